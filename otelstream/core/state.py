"""The per-stream state: everything one stream's tracker knows, and the methods through which the protocol modules
(``core/protocols/``) report what an event says: terminal conditions, usage, sequence numbers, choices, anomalies.

``StreamState`` is the tracker's base class (``core/tracker.py`` adds the hot path and the end); the protocol
modules depend on this module only. These methods run on rare events (not per delta) and every one keeps the
tracker's invariants: O(1) time and bounded memory per stream, no input makes them raise (wrong types, missing
fields, NaN usage become anomalies).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar

from otelstream import names
from otelstream.core.errors import NO_ERROR_FIELDS, ErrorFields
from otelstream.core.report import Anomaly, RateLimit, Stall, StreamReport, StreamStart

Clock = Callable[[], int]
# one wire protocol's reading of an event (``core/protocols/``): (the stream's state, the event's field dict, its SSE
# name or the SSE frame that names it (read with ``protocols._fields.event_name`` only where a protocol needs it: a
# property read per event), the event itself: for fields an SDK model keeps as extras) -> DELTA, OTHER or KEEPALIVE
Observer = Callable[["StreamState", dict[str, Any], object, object], int]

# outcome ranks for precedence: error > failed > incomplete > completed
RANK_NONE, RANK_COMPLETED, RANK_INCOMPLETE, RANK_FAILED, RANK_ERROR = 0, 1, 2, 3, 4
OUTCOME_BY_RANK = {
    RANK_COMPLETED: names.COMPLETED,
    RANK_INCOMPLETE: names.INCOMPLETE,
    RANK_FAILED: names.FAILED,
    RANK_ERROR: names.ERROR,
}
_RANK_BY_OUTCOME = {v: k for k, v in OUTCOME_BY_RANK.items()}

# StreamState.rare: the side object is made exactly once per stream. Re-entrant: making it allocates, which may run
# the cyclic collector, which may end a dropped stream right here (whose end makes its own side object)
_RARE_LOCK = threading.RLock()
_SEQ_WINDOW = 64
_SEQ_MASK = (1 << _SEQ_WINDOW) - 1
MAX_CHOICES = 128
_MAX_ERROR_TYPE_LEN = 64
_INT64_MAX = names.MAX_COUNT

class Rare:
    """The fields only rare events and the end write (errors, finishes, stalls, anomalies, the end itself): a side
    object made on the first write, so an open stream in mid-answer carries one slot for all of them (memory per
    open stream is budgeted; every slot is 8 bytes)."""

    __slots__ = (
        "_anomalies",
        "_anomaly_counts",
        "_choices_finished",
        "_ending",
        "_stalls",
        "choices_seen",
        "consumer_ns",
        "done_ended",
        "error_fields",
        "error_type",
        "finish_reasons",
        "max_keepalive_gap_ns",
        "report",
        "stall_count",
        "starting_after",
        "t_keepalive",
        "t_terminal",
    )

    def __init__(self) -> None:
        self._anomalies: list[Anomaly] | None = None
        self._anomaly_counts: dict[str, int] | None = None
        self._choices_finished: dict[int, str] | None = None
        # how the stream ended (outcome, abandoned reason, end time, error class), set by the end: the report is
        # assembled from it and the state later, on the export thread or for otelstream.report_of
        self._ending: tuple[str, str | None, int, str | None] | None = None
        self._stalls: list[Stall] | None = None
        self.choices_seen: set[int] | None = None
        self.consumer_ns = 0
        self.done_ended = False  # chat/completions: [DONE] was the terminal condition (no finish on every choice)
        self.error_fields: ErrorFields = NO_ERROR_FIELDS  # the first in-band error body's code, type, status
        self.error_type: str | None = None
        self.finish_reasons: list[str] = []
        self.max_keepalive_gap_ns = 0  # the largest gap between two keepalives: a proxy's read timeout must exceed it
        self.report: StreamReport | None = None  # the one report, once assembled (StreamTracker.final_report)
        self.stall_count = 0
        self.starting_after: int | None = None
        self.t_keepalive = 0  # the last keepalive's time (0: none yet, or no clock for it)
        self.t_terminal = 0


class Tokens:
    """The token counts as the server reported them (None: not reported): made at the first usage object."""

    __slots__ = (
        "usage_cache_read",
        "usage_cache_write",
        "usage_input",
        "usage_input_raw",
        "usage_output",
        "usage_reasoning",
    )

    def __init__(self) -> None:
        self.usage_input: int | None = None
        self.usage_input_raw: int | None = None  # Anthropic: input before adding the cache counts
        self.usage_output: int | None = None
        self.usage_cache_read: int | None = None
        self.usage_cache_write: int | None = None
        self.usage_reasoning: int | None = None


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


NO_RARE = Rare()  # read-only defaults for the forwarding properties (never written: writes make a side object)
NO_RARE.finish_reasons = ()  # type: ignore[assignment]
NO_TOKENS = Tokens()
NO_SEQUENCE = Sequence()


class StreamState:
    """What one stream's tracker knows. Not thread-safe by design: one stream is consumed by one thread at a time."""

    # per surface, its protocol module's observer and the tracker's flat-path code, and both for any other surface:
    # set by the tracker's class (the protocol modules depend on this module, so it cannot import them)
    _SURFACES: ClassVar[Mapping[str, tuple[Observer, int]]]
    _OTHER_SURFACE: ClassVar[tuple[Observer, int]]
    _FAST_DELTAS_BEFORE_OUTPUT: ClassVar[frozenset[str]]  # the Responses reasoning delta types

    __slots__ = (
        "_chunk_counts",
        "_fast",
        "_fast_code",
        "_fast_deltas",
        "_observe",
        "_pre_pull_ns",
        "_rare",
        "_sdk_first",
        "_seq",
        "_tokens",
        "_wait_alarm",
        "_wait_first",
        "client_filter_after",
        "clock",
        "done_observable",
        "done_seen",
        "ended",
        "expected_choices",
        "first_output_event",
        "handle",
        "keepalives",
        "last_choice",
        "max_wait_ns",
        "others",
        "rank",
        "ratelimits",
        "request_id",
        "response_id",
        "response_model",
        "retries",
        "sdk_ns",
        "seq_next",
        "service_tier",
        "stall_ns",
        "start",
        "system_fingerprint",
        "t_first_delta",
        "t_first_event",
        "t_first_output",
        "t_frame",
        "t_handed",
        "t_last_event",
        "t_last_ns",
        "t_prev_delta",
        "t_pull",
        "t_request",
        "terminal",
        "unobserved",
        "usage_requested",
        "usage_seen",
        "wait_ns",
    )

    def __init__(
        self,
        start: StreamStart,
        *,
        clock: Clock,
        expected_choices: int | None = None,
        usage_requested: bool | None = None,
        starting_after: int | None = None,
        client_filter_after: int | None = None,
        done_observable: bool = True,
        stall_threshold_ns: int = 30_000_000_000,
        retries: int = 0,
        request_id: str | None = None,
        unobserved: frozenset[str] = frozenset(),
    ) -> None:
        """``usage_requested`` None means "infer from the chunks" (offline: a ``usage`` key is present).
        ``starting_after``: a server-side resume (the first sequence number must be N+1).
        ``client_filter_after``: the SDK helper replays from 0 and hides events up to N from the caller, so the
        first delta counts only after N. ``done_observable``: whether ``[DONE]`` can be seen at this layer.
        ``unobserved``: the ``names.MEASURE_*`` this stream cannot observe (a patch point missing from the SDK): they
        are reported as unknown (None), and the anomalies that rest on them are not raised."""
        self.start = start
        self.clock = clock
        self.t_request = start.t_request_ns or clock()
        self.t_pull = 0
        self.t_frame = 0  # when the SSE frame of the event being built was decoded (set by the adapter's tap)
        self.t_handed = 0  # when the stream was handed to the caller (0: unknown, offline)
        self._pre_pull_ns = 0  # t_handed to the first pull: the caller's time, counted as consumer time
        self.sdk_ns = 0  # the SDK's own work on events, from their frames' decoding to the caller (not wait)
        self._sdk_first = 0  # of it, before the first event reached the caller
        self.t_last_ns = self.t_request
        self.t_last_event = 0
        self.t_first_event = 0
        self.t_first_delta = 0
        self.t_first_output = 0  # the first delta that is not reasoning (TTFO)
        self.first_output_event = -1  # its index among the events (offline has no clock: check reports this)
        self.t_prev_delta = 0
        self.wait_ns = 0
        self._wait_first = 0  # the wait before the first event (not between events: not part of consumer time)
        self.max_wait_ns = 0
        self.stall_ns = stall_threshold_ns
        self._wait_alarm = 0  # min(max_wait_ns, stall_ns): one comparison per event finds both
        self.others = 0  # events that are not deltas (events = deltas + others)
        self.keepalives = 0
        self.done_seen = False
        self.unobserved = unobserved
        self.done_observable = done_observable and names.MEASURE_DONE_SENTINEL not in unobserved
        self.ended = False
        self.handle: object = None
        self.rank = RANK_NONE
        self.terminal = False
        self.expected_choices = expected_choices
        self.last_choice: object = None  # the index choice_seen() accepted last (chunks repeat it)
        self.usage_requested = usage_requested
        self.usage_seen = False
        self.response_id: str | None = None
        self.response_model: str | None = None
        self.service_tier: str | None = None
        self.system_fingerprint: str | None = None
        self.request_id = request_id
        self.ratelimits: tuple[RateLimit, ...] = ()  # set by the adapter from the answer's headers at the send
        self.retries = retries
        self.client_filter_after = client_filter_after
        self.seq_next: int | None = None  # the number expected next (None before the first)
        self._chunk_counts: list[int] | None = None  # time per output chunk: counts per bucket (sums derived)
        self._fast = 0  # the tracker's flat-path code while steady (see StreamTracker.event); 0 turns it off
        # the Responses delta types the flat path takes: reasoning ones until the first output, which only the general
        # path records (so once TTFO is known, checking for it costs the flat path nothing)
        self._fast_deltas = self._FAST_DELTAS_BEFORE_OUTPUT
        self._rare: Rare | None = None  # the side objects, made on their first write (memory per open stream)
        self._tokens: Tokens | None = None
        self._seq: Sequence | None = None
        if starting_after is not None:
            self.rare().starting_after = starting_after
        self._observe, self._fast_code = self._SURFACES.get(self.surface, self._OTHER_SURFACE)

    if TYPE_CHECKING:  # the side objects' fields, readable (and writable) here too: see _forward below
        _anomalies: list[Anomaly] | None
        _anomaly_counts: dict[str, int] | None
        _choices_finished: dict[int, str] | None
        _ending: tuple[str, str | None, int, str | None] | None
        _stalls: list[Stall] | None
        choices_seen: set[int] | None
        consumer_ns: int
        done_ended: bool
        error_fields: ErrorFields
        error_type: str | None
        finish_reasons: list[str]
        max_keepalive_gap_ns: int
        report: StreamReport | None
        stall_count: int
        starting_after: int | None
        t_keepalive: int
        t_terminal: int
        usage_cache_read: int | None
        usage_cache_write: int | None
        usage_input: int | None
        usage_input_raw: int | None
        usage_output: int | None
        usage_reasoning: int | None
        _seq_last_at: int
        _seq_win_top: int
        seq_bad_start: bool
        seq_duplicates: int
        seq_first: int | None
        seq_gaps: int
        seq_last: int | None
        seq_missing: bool
        seq_out_of_order: int
        seq_skipped: int
        seq_window: int

    @property
    def surface(self) -> str:
        return self.start.surface

    def rare(self) -> Rare:
        """The side object of the rare fields, made now if it is not yet. Made under a lock: the end can come from
        another thread (the watchdog's idle fallback, a finalizer) while the caller's thread makes it for an
        anomaly, and two objects would lose one side's writes (the end's among them). Taken once per stream."""
        r = self._rare
        if r is None:
            with _RARE_LOCK:
                r = self._rare
                if r is None:
                    r = self._rare = Rare()
        return r

    def token_counts(self) -> Tokens:
        """The side object of the token counts, made now if it is not yet."""
        u = self._tokens
        if u is None:
            u = self._tokens = Tokens()
        return u

    def seq_state(self) -> Sequence:
        """The side object of the sequence-number bookkeeping, made now if it is not yet."""
        q = self._seq
        if q is None:
            q = self._seq = Sequence()
        return q

    @property
    def deltas(self) -> int:
        """Deltas so far: the first, plus one per gap counted in the time-per-chunk buckets."""
        counts = self._chunk_counts
        return 0 if counts is None else 1 + sum(counts)

    @property
    def events(self) -> int:
        """Parsed events so far, keepalives and ``[DONE]`` excluded."""
        return self.deltas + self.others

    # --- called by protocol modules (rare events, not per delta) --------------------------------------------
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

    def anomaly(self, kind: str, detail: str = "") -> None:
        r = self._rare
        if r is not None and r._ending is not None:
            return  # after the end: the report (maybe assembled later, elsewhere) has what the end saw
        self.add_anomaly(kind, detail)

    def add_anomaly(self, kind: str, detail: str = "") -> None:
        """Record an anomaly, also after the end (``core.ending``: those only the end can judge)."""
        r = self.rare()
        counts = r._anomaly_counts
        if counts is None:
            counts = r._anomaly_counts = {}
            r._anomalies = []
        counts[kind] = counts.get(kind, 0) + 1
        found = r._anomalies
        if found is not None and len(found) < names.MAX_REPORTED_ANOMALIES:
            found.append(Anomaly(kind, self.events, detail[:200]))

    def outcome_seen(self, outcome: str, *, terminal: bool) -> None:
        """A terminal-ish condition: keeps the highest-precedence outcome seen; ``terminal`` ends the answer."""
        rank = _RANK_BY_OUTCOME[outcome]
        if rank > self.rank:
            self.rank = rank
        if terminal and not self.terminal:
            self.terminal = True
            self._fast = 0
            self.rare().t_terminal = self.clock()

    def saw_error(self) -> bool:
        """An in-band error was seen (the highest-precedence outcome is ``error``)."""
        return self.rank == RANK_ERROR

    def after_terminal(self) -> bool:
        """Record (once per event) that the server kept talking after the terminal event."""
        if self.terminal:
            self.anomaly(names.ANOM_EVENT_AFTER_TERMINAL)
            return True
        return False

    def set_error_type(self, value: object) -> None:
        if isinstance(value, str) and value:
            r = self.rare()
            if r.error_type is None:
                r.error_type = value[:_MAX_ERROR_TYPE_LEN]

    def error_seen(self, fields: ErrorFields) -> None:
        """An error body (in-band, after HTTP 200): its code, else its type, is the stream's ``error_type``; all three
        decide its class at the end. The first error body wins, as for ``error_type``."""
        r = self.rare()
        if r.error_fields is NO_ERROR_FIELDS:
            r.error_fields = fields
        self.set_error_type(fields[0] or fields[1])

    def add_finish_reason(self, reason: object) -> None:
        if isinstance(reason, str):
            found = self.rare().finish_reasons
            if len(found) < MAX_CHOICES:
                found.append(reason[:_MAX_ERROR_TYPE_LEN])

    def choice_seen(self, index: object) -> int | None:
        """Track a chat/completions choice index (bounded); returns it, or None when unusable. Most streams have one
        choice: a set of the indices is made only when a second one appears."""
        if type(index) is not int or index < 0:
            if index is not None:
                self.anomaly(names.ANOM_BAD_FIELD, "choice index")
            return None if index is not None else 0
        if index == self.last_choice:
            return index
        r = self._rare
        seen = r.choices_seen if r is not None else None
        if seen is None:
            if self.last_choice is None:
                self.last_choice = index
                return index
            seen = self.rare().choices_seen = {self.last_choice}  # type: ignore[arg-type]
        if index not in seen:
            if len(seen) >= MAX_CHOICES:
                self.anomaly(names.ANOM_BAD_FIELD, "too many choices")
                return None
            seen.add(index)
            if self.terminal and self.expected_choices is None and self.rank < RANK_FAILED:
                # "every choice finished" was judged on the choices seen so far (offline, or n not in the request):
                # a new one means the answer was not over
                self.terminal = False
                self.rare().t_terminal = 0
        self.last_choice = index
        return index

    def choice_finished(self, index: int, reason: str) -> bool:
        """Record a choice's finish; returns True when every expected choice has finished."""
        r = self.rare()
        finished = r._choices_finished
        if finished is None:
            finished = r._choices_finished = {}
        if index in finished:
            # a repeated finish (OpenRouter repeats it on its usage chunk) loses nothing: the first one counts, and new
            # output after it is flagged by the protocol module
            return False
        finished[index] = reason
        self.add_finish_reason(reason)
        return self.all_choices_finished()

    def all_choices_finished(self) -> bool:
        r = self._rare
        finished = r._choices_finished if r is not None else None
        if not finished:
            return False
        n = self.expected_choices
        if n is not None and n > 0:
            return len(finished) >= n
        seen = r.choices_seen  # type: ignore[union-attr]
        return len(finished) >= (len(seen) if seen is not None else 1)

    def tokens(self, value: object, what: str) -> int | None:
        """Validate a token count from the server: a non-negative int, else an anomaly and None."""
        if value is None:
            return None
        if type(value) is int and 0 <= value <= _INT64_MAX:
            return value
        # the range check comes before int(): int(inf) raises OverflowError
        if type(value) is float and 0 <= value < 1e18 and value == int(value):
            return int(value)
        self.anomaly(names.ANOM_BAD_FIELD, f"{what}={value!r}"[:80])
        return None



def _forward(side: str, make: Callable[[StreamState], object], default: object, name: str) -> property:
    """A field of a side object read and written as the tracker's own (its default while the object is not made):
    for the adapters, the end and tests; the protocol modules write the side objects directly."""
    get_side = attrgetter(side)
    read = attrgetter(name)

    def fget(self: StreamState) -> Any:
        obj = get_side(self)
        return read(default if obj is None else obj)

    def fset(self: StreamState, value: object) -> None:
        setattr(make(self), name, value)

    return property(fget, fset)


for _side, _make, _default, _cls in (
    ("_rare", StreamState.rare, NO_RARE, Rare),
    ("_tokens", StreamState.token_counts, NO_TOKENS, Tokens),
    ("_seq", StreamState.seq_state, NO_SEQUENCE, Sequence),
):
    for _name in _cls.__slots__:
        setattr(StreamState, _name, _forward(_side, _make, _default, _name))
