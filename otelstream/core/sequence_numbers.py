"""Sequence numbers (Responses): each event's ``sequence_number`` checked against the next one expected and a
64-number window of those seen, in O(1) time and memory per stream, gaps, duplicates, numbers out of order, a bad
first number and a missing one told apart. ``StreamState`` has them as a base class. Pure
module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelstream import names

if TYPE_CHECKING:
    from otelstream.core.side_objects import Rare


_SEQ_WINDOW = 64
_SEQ_MASK = (1 << _SEQ_WINDOW) - 1
_INT64_MAX = names.MAX_COUNT


class Sequence:
    """Sequence-number bookkeeping beyond the next number expected (Responses only): made at the first number."""

    __slots__ = (
        "_seq_last_at",
        "_seq_win_top",
        "seq_bad_start",
        "seq_duplicates",
        "seq_first",
        "seq_gaps",
        "seq_last",
        "seq_missing",
        "seq_out_of_order",
        "seq_skipped",
        "seq_window",
    )

    def __init__(self) -> None:
        self.seq_first: int | None = None
        self.seq_last: int | None = None
        self.seq_window = 0  # bit k set: number (_seq_win_top - 1 - k) was seen
        self._seq_win_top = 0
        self._seq_last_at = 0  # seq_next when seq_last was recorded
        self.seq_gaps = 0
        self.seq_skipped = 0
        self.seq_duplicates = 0
        self.seq_out_of_order = 0
        self.seq_bad_start = False
        self.seq_missing = False


NO_SEQUENCE = Sequence()  # read-only defaults for the forwarding properties (never written)


class SequenceNumbers:
    """``StreamState``'s sequence-number checks (a base class of it: the state declares the fields)."""

    if TYPE_CHECKING:  # the fields and methods of StreamState these read and write (its slots)
        seq_next: int | None
        _rare: Rare | None
        _seq: Sequence | None

        def seq_state(self) -> Sequence: ...
        def anomaly(self, kind: str, detail: str = "") -> None: ...
    else:
        __slots__ = ()  # no fields of its own: an instance dict would cost every open stream

    def sequence(self, n: object) -> None:
        """Check one ``sequence_number`` (per response, O(1)). Protocol modules take the in-order case themselves
        (``n == seq_next``: just advance ``seq_next``); the 64-number window of what was seen is brought up to date
        here, lazily: every number from ``_seq_win_top`` to ``seq_next - 1`` arrived in order."""
        if type(n) is not int or not 0 <= n <= _INT64_MAX:
            if n is None:
                self.missing_sequence()
            else:
                # wrong type, negative, or beyond what any exporter can encode (int64)
                self.anomaly(names.ANOM_BAD_FIELD, f"sequence_number {type(n).__name__}")
            return
        q = self.seq_state()
        nxt = self.seq_next
        if nxt is None:
            q.seq_first = n
            starting_after = self._rare.starting_after if self._rare is not None else None
            expected = 0 if starting_after is None else starting_after + 1
            if n != expected:
                q.seq_bad_start = True
                self.anomaly(names.ANOM_SEQUENCE_BAD_START, f"expected {expected}, got {n}")
            q.seq_window = 1
        else:
            run = nxt - q._seq_win_top  # numbers that arrived in order since the window was last updated
            if run >= _SEQ_WINDOW:
                q.seq_window = _SEQ_MASK
            elif run:
                q.seq_window = ((q.seq_window << run) | ((1 << run) - 1)) & _SEQ_MASK
            if n >= nxt:
                if n > nxt:
                    q.seq_gaps += 1
                    q.seq_skipped += n - nxt
                    self.anomaly(names.ANOM_SEQUENCE_GAP, f"expected {nxt}, got {n}")
                shift = n - nxt + 1
                q.seq_window = ((q.seq_window << shift) | 1) & _SEQ_MASK if shift < _SEQ_WINDOW else 1
            else:
                back = nxt - 1 - n
                first = q.seq_first if q.seq_first is not None else 0
                if back < _SEQ_WINDOW and n >= first and (q.seq_window >> back) & 1:
                    q.seq_duplicates += 1
                    self.anomaly(names.ANOM_SEQUENCE_DUPLICATE, f"{n} seen before")
                else:
                    q.seq_out_of_order += 1
                    self.anomaly(names.ANOM_SEQUENCE_OUT_OF_ORDER, f"{n} after {self.last_sequence()}")
                    if back < _SEQ_WINDOW:
                        q.seq_window |= 1 << back
                q._seq_win_top = nxt
                q.seq_last = n
                q._seq_last_at = nxt
                return
        self.seq_next = n + 1
        q._seq_win_top = n + 1
        q.seq_last = n
        q._seq_last_at = n + 1

    def last_sequence(self) -> int | None:
        """The sequence number seen last: ``seq_next - 1`` unless the last one seen arrived out of order."""
        nxt = self.seq_next
        if nxt is None:
            return None
        q = self._seq
        if q is not None and q._seq_last_at == nxt:
            return q.seq_last
        return nxt - 1

    def missing_sequence(self) -> None:
        q = self.seq_state()
        if not q.seq_missing:
            q.seq_missing = True
            self.anomaly(names.ANOM_SEQUENCE_MISSING, "event without sequence_number")
