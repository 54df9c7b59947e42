"""A stream's end: ``conclude`` records, once, what cannot wait (how it ended, when, the outcome and the error class
it decides), ``final_report`` assembles the one report later, on whichever thread asks first. ``StreamTracker``'s base
class; the hot path that feeds it is ``core/tracker.py``. Pure module.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from otelstream import names
from otelstream.core import errors, protocols
from otelstream.core.outcome_rank import OUTCOME_BY_RANK, RANK_INCOMPLETE
from otelstream.core.report import StreamReport
from otelstream.core.report_assembly import build_report, final_anomalies
from otelstream.core.state import StreamState
from otelstream.names import EndReason

# how a stream ended, when no terminal condition decides the outcome
_END_OUTCOME: dict[str, tuple[str, str | None]] = {
    EndReason.EOF: (names.CUT, None),
    EndReason.CLOSE: (names.ABANDONED, names.ABANDON_CLOSE),
    EndReason.GC: (names.ABANDONED, names.ABANDON_GC),
    EndReason.CANCEL: (names.ABANDONED, names.ABANDON_CANCEL),
    EndReason.IDLE: (names.ABANDONED, names.ABANDON_IDLE),
    EndReason.TRANSPORT_ERROR: (names.TRANSPORT_ERROR, None),
    EndReason.HTTP_ERROR: (names.HTTP_ERROR, None),
    EndReason.ERROR: (names.ERROR, None),
}

# end() can race between the caller's thread and the export watchdog (idle fallback) or a finalizer: one shared
# lock makes "first call wins" exact. It is taken once per stream, never per event. Re-entrant, as every lock a
# stream's end takes: the end of a stream found by the cyclic collector runs inside whatever allocation started the
# collection, on that thread, maybe while it holds this very lock for another stream.
_END_LOCK = threading.RLock()
# The report is assembled once, by whichever thread asks first (StreamTracker.final_report): a lock of its own, held
# for one assembly (pure, bounded), taken by the export thread and by otelstream.report_of before the report exists.
_REPORT_LOCK = threading.RLock()  # re-entrant: a collection during an assembly may end (and report) another stream


class StreamEnd(StreamState):
    """The end of what ``StreamTracker`` measures (its base: the hot path keeps the waits this closes)."""

    __slots__ = ()

    if TYPE_CHECKING:

        def _wait_ended(self, now: int) -> int: ...

    def end(
        self,
        how: EndReason | str,
        error_type: str | None = None,
        now: int | None = None,
        exc: BaseException | None = None,
    ) -> StreamReport | None:
        """Finish the stream and assemble its report: ``conclude``, then ``final_report``. Returns the report the
        first time, None afterwards."""
        if not self.conclude(how, error_type, now, exc):
            return None
        return self.final_report()

    def conclude(
        self,
        how: EndReason | str,
        error_type: str | None = None,
        now: int | None = None,
        exc: BaseException | None = None,
    ) -> bool:
        """Finish the stream: True the first time (first call wins), False afterwards. It records only what cannot
        wait (the times the adapters keep stamping, how the stream ended); the report is assembled later by
        ``final_report``, on the export thread or wherever it is asked for first, off the caller's path.

        ``how``: a ``names.EndReason`` (a plain string of one is read alike, and any other as a transport error).
        ``exc``: the exception that ended it,
        if one did: its HTTP status and its type (a timeout or a reset) decide the error class."""
        with _END_LOCK:
            if self.ended:
                return False
            self.ended = True
            self._fast = 0
        if now is None:
            now = self.clock()
        r = self.rare()
        # consumer time = time between the first and the last event spent neither waiting for the next one nor in
        # the SDK's work on it
        last = self.t_last_event = max(self.t_last_event, self.t_prev_delta)  # the fast path stamps deltas only
        if self.t_first_event:
            r.consumer_ns = (
                (last - self.t_first_event) - (self.wait_ns - self._wait_first) - (self.sdk_ns - self._sdk_first)
            )
        # the last wait ended with the stream's end (EOF, a reset, a timeout): it still counts as waiting
        tp = self._wait_ended(now)
        if tp and last and tp > last:
            r.consumer_ns += tp - last
        r.consumer_ns += self._pre_pull_ns
        if how == EndReason.ERROR:
            self.set_error_type(error_type)
            self.outcome_seen(names.ERROR, terminal=False)
        elif error_type is not None and how in (EndReason.TRANSPORT_ERROR, EndReason.HTTP_ERROR):
            self.set_error_type(error_type)
        abandoned_reason = None
        if self.rank >= RANK_INCOMPLETE:
            outcome = OUTCOME_BY_RANK[self.rank]
        elif self.terminal or (how == EndReason.EOF and protocols.transport_decides(self)):
            outcome = names.COMPLETED
        else:
            outcome, abandoned_reason = _END_OUTCOME.get(how, (names.TRANSPORT_ERROR, None))
        t_end = r.t_terminal if self.terminal and r.t_terminal else now
        # the exception is read now, not kept: it holds the frames (and the SDK's stream) alive
        klass = errors.error_class(outcome, r.error_type, errors.status_of(exc), exc, r.error_fields)
        r._ending = (outcome, abandoned_reason, t_end, klass)  # last: what final_report waits for
        return True

    def final_report(self) -> StreamReport | None:
        """The stream's one report once it has ended (None before): assembled on the first call, exactly once,
        whichever thread asks first (the export thread, or the caller through ``otelstream.report_of``)."""
        r = self._rare
        if r is None:
            return None
        report = r.report
        if report is not None or r._ending is None:
            return report
        with _REPORT_LOCK:  # the assembly's lock, never the end's: the caller's end never waits for an assembly
            report = r.report
            ending = r._ending
            if report is None and ending is not None:  # (set once, never unset)
                outcome, abandoned_reason, t_end, klass = ending
                final_anomalies(self, outcome)
                report = r.report = build_report(self, outcome, abandoned_reason, t_end, klass)
        return report
