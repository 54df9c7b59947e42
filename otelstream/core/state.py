"""The per-stream state: everything one stream's tracker knows, and the methods through which the protocol modules
(``core/protocols/``) report what an event says: terminal conditions, usage, sequence numbers, choices, anomalies.

``StreamState`` is the tracker's base (``core/stream_end.py`` adds the end, ``core/tracker.py`` the hot path); the
protocol modules depend on this module only. Its own bases keep the sequence numbers (``core/sequence_numbers.py``)
and the choices (``core/choices.py``); the fields only rare events write live in side objects
(``core/side_objects.py``). These methods run on rare events (not per delta) and every one keeps the tracker's
invariants: O(1) time and bounded memory per stream, no input makes them raise (wrong types, missing fields, NaN
usage become anomalies).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from otelstream import names
from otelstream.core.choices import Choices
from otelstream.core.errors import NO_ERROR_FIELDS, ErrorFields
from otelstream.core.outcome_rank import RANK_BY_OUTCOME, RANK_ERROR, RANK_NONE
from otelstream.core.report import Anomaly, RateLimit, Stall, StreamReport, StreamStart
from otelstream.core.sequence_numbers import NO_SEQUENCE, Sequence, SequenceNumbers
from otelstream.core.side_objects import NO_RARE, NO_TOKENS, Rare, Tokens, forwarded

Clock = Callable[[], int]
# one wire protocol's reading of an event (``core/protocols/``): (the stream's state, the event's field dict, its SSE
# name or the SSE frame that names it (read with ``protocols._fields.event_name`` only where a protocol needs it: a
# property read per event), the event itself: for fields an SDK model keeps as extras) -> DELTA, OTHER or KEEPALIVE
Observer = Callable[["StreamState", dict[str, Any], object, object], int]

# StreamState.rare: the side object is made exactly once per stream. Re-entrant: making it allocates, which may run
# the cyclic collector, which may end a dropped stream right here (whose end makes its own side object)
_RARE_LOCK = threading.RLock()
_INT64_MAX = names.MAX_COUNT

class StreamState(SequenceNumbers, Choices):
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
        "provider_latency_ms",
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
        self.provider_latency_ms: int | None = None
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
    # sequence numbers (Responses) and choices (chat, completions): the base classes, each in its module
    def anomaly(self, kind: str, detail: str = "") -> None:
        r = self._rare
        if r is not None and r._ending is not None:
            return  # after the end: the report (maybe assembled later, elsewhere) has what the end saw
        self.add_anomaly(kind, detail)

    def add_anomaly(self, kind: str, detail: str = "") -> None:
        """Record an anomaly, also after the end (``core.report_assembly``: those only the end can judge)."""
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
        rank = RANK_BY_OUTCOME[outcome]
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
                r.error_type = value[: names.MAX_REASON_LEN]

    def error_seen(self, fields: ErrorFields) -> None:
        """An error body (in-band, after HTTP 200): its code, else its type, is the stream's ``error_type``; all three
        decide its class at the end. The first error body wins, as for ``error_type``."""
        r = self.rare()
        if r.error_fields is NO_ERROR_FIELDS:
            r.error_fields = fields
        self.set_error_type(fields[0] or fields[1])

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



for _side, _make, _default, _cls in (
    ("_rare", StreamState.rare, NO_RARE, Rare),
    ("_tokens", StreamState.token_counts, NO_TOKENS, Tokens),
    ("_seq", StreamState.seq_state, NO_SEQUENCE, Sequence),
):
    for _name in _cls.__slots__:
        setattr(StreamState, _name, forwarded(_side, _make, _default, _name))
