"""The per-stream tracker: the hot path. One instance per streamed response.

Invariants (every method keeps them; property tests in tests/core check them):
- ``event()`` is O(1) in time and memory whatever the stream length: a clock read, a few dict lookups, a few
  integer updates (a plain in-order delta takes a flat path of its own). Memory per stream is bounded (anomaly list
  capped, sequence window a 64-bit mask, choice set capped).
- No input makes the tracker raise: wrong types, missing fields, NaN usage become anomalies.
- ``end()`` produces exactly one ``StreamReport``; later calls and later events are ignored.
- ``events == deltas + other events``; keepalives and ``[DONE]`` are not events.
- Outcome precedence over everything seen before the end: error > failed > incomplete > completed; when none of
  those was seen, how the stream ended decides (cut, abandoned, transport_error, http_error).

The adapter drives it like this (``t_pull`` is a plain attribute so the watchdog thread can read it)::

    tracker.t_handed = clock()      # the stream reaches the caller (once)
    tracker.first_pull(clock())     # the caller asks for the first event: the gap since t_handed is consumer time
    ...
    tracker.t_pull = clock()        # the caller asks for the next event: a wait begins
    item = next(sdk_generator)      # meanwhile, at the SSE layer: tracker.t_frame = clock() (the wait's end)
    tracker.event(item, sse_name)   # the item is classified, timed at t_frame (else now)
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable
from itertools import compress
from operator import mul
from typing import Any

from otelstream import names
from otelstream.core import errors, protocols
from otelstream.core.protocols.responses import DELTA_TYPES as _RESPONSES_DELTA_TYPES
from otelstream.core.report import Anomaly, SequenceStats, Stall, StreamReport, StreamStart, Usage, assemble

Clock = Callable[[], int]

# outcome ranks for precedence
_RANK_NONE, _RANK_COMPLETED, _RANK_INCOMPLETE, _RANK_FAILED, _RANK_ERROR = 0, 1, 2, 3, 4
_OUTCOME_BY_RANK = {
    _RANK_COMPLETED: names.COMPLETED,
    _RANK_INCOMPLETE: names.INCOMPLETE,
    _RANK_FAILED: names.FAILED,
    _RANK_ERROR: names.ERROR,
}
# how a stream ended, when no terminal condition decides the outcome
_END_OUTCOME = {
    "eof": (names.CUT, None),
    "close": (names.ABANDONED, names.ABANDON_CLOSE),
    "gc": (names.ABANDONED, names.ABANDON_GC),
    "cancel": (names.ABANDONED, names.ABANDON_CANCEL),
    "idle": (names.ABANDONED, names.ABANDON_IDLE),
    "transport_error": (names.TRANSPORT_ERROR, None),
    "http_error": (names.HTTP_ERROR, None),
    "error": (names.ERROR, None),
}
END_REASONS = tuple(_END_OUTCOME)

_CHUNK_BOUNDS_NS = tuple(int(b * 1e9) for b in names.TIME_PER_CHUNK_BUCKETS)
_N_CHUNK_BUCKETS = len(_CHUNK_BOUNDS_NS) + 1
_FIRST_BOUND_NS = _CHUNK_BOUNDS_NS[0]
# Bucket placement without a binary search (which costs a C call and five comparisons of Python ints): no two bounds
# share a power-of-two interval [2**(k-1), 2**k), so the number of bounds below 2**(k-1) plus at most one comparison
# places a gap of bit length k (tests/adapters/test_flat_path.py checks the premise and the result).
_BOUNDS_BELOW_BITS = (0, *(sum(b < 1 << (k - 1) for b in _CHUNK_BOUNDS_NS) for k in range(1, 65)))
_BOUNDS_PADDED = (*_CHUNK_BOUNDS_NS, float("inf"))
# spread_sums: per bucket, its least value in integer ns (``le`` is inclusive) and how far above that a value can be
_LEAST_NS = (0, *(b + 1 for b in _CHUNK_BOUNDS_NS))
_ROOM_NS = tuple(b - least for b, least in zip(_CHUNK_BOUNDS_NS, _LEAST_NS, strict=False))
_BUCKET_INDEXES = range(_N_CHUNK_BUCKETS)
_OVERFLOW = _N_CHUNK_BUCKETS - 1
# flat-path codes per surface for SDK models, and + _RAW for decoded JSON (what our copies of the SDKs' ``__stream__``
# pass: plain dicts, so no pydantic attribute protocol and no type lookups per field)
_FAST_RESPONSES, _FAST_MESSAGES, _FAST_CHAT, _FAST_COMPLETIONS = 1, 2, 3, 4
_RAW = 4
_RAW_RESPONSES, _RAW_MESSAGES, _RAW_CHAT = _FAST_RESPONSES + _RAW, _FAST_MESSAGES + _RAW, _FAST_CHAT + _RAW
_FAST_BY_SURFACE = {
    names.RESPONSES: _FAST_RESPONSES,
    names.RESPONSES_WEBSOCKET: _FAST_RESPONSES,
    names.MESSAGES: _FAST_MESSAGES,
    names.CHAT_COMPLETIONS: _FAST_CHAT,
    names.COMPLETIONS: _FAST_COMPLETIONS,
}


def spread_sums(counts: list[int], total: int) -> tuple[int, ...]:
    """Per-bucket sums (ns) for per-bucket counts whose overall sum is ``total``: each bucket's mean stays inside
    the bucket, so recording the mean ``count`` times keeps the count, the sum and the bucket placement exact.
    The hot path keeps only counts; the total of the gaps between consecutive deltas is last - first delta.

    Each bucket starts at its least value per count, then the rest of ``total`` fills the non-empty buckets from the
    first up to their bounds (the overflow bucket takes whatever is left). Loops run in C where they can: this runs
    once per stream on the caller's thread."""
    sums = list(map(mul, counts, _LEAST_NS))
    residual = total - sum(sums)
    if residual > 0:
        for i in compress(_BUCKET_INDEXES, counts):  # the non-empty buckets, in order
            add = residual if i == _OVERFLOW else min(counts[i] * _ROOM_NS[i], residual)
            sums[i] += add
            residual -= add
            if residual <= 0:
                break
    return tuple(sums)


_SEQ_WINDOW = 64
_SEQ_MASK = (1 << _SEQ_WINDOW) - 1
_MAX_CHOICES = 128
_MAX_ERROR_TYPE_LEN = 64
_INT64_MAX = 2**63 - 1  # counts beyond this cannot be exported (OTLP and Prometheus encode int64 / float64)
# end() can race between the caller's thread and the export watchdog (idle fallback) or a finalizer: one shared
# lock makes "first call wins" exact. It is taken once per stream, never per event.
_END_LOCK = threading.Lock()


class StreamTracker:
    """Measures one stream. Not thread-safe by design: one stream is consumed by one thread at a time."""

    __slots__ = (
        "__weakref__",  # the export watchdog holds open streams weakly
        "_anomalies",
        "_anomaly_counts",
        "_choices_finished",
        "_chunk_counts",
        "_fast",
        "_fast_code",
        "_observe",
        "_pre_pull_ns",
        "_sdk_first",
        "_seq_last_at",
        "_seq_win_top",
        "_stalls",
        "_wait_alarm",
        "_wait_first",
        "choices_seen",
        "client_filter_after",
        "clock",
        "consumer_ns",
        "done_ended",
        "done_observable",
        "done_seen",
        "ended",
        "error_type",
        "expected_choices",
        "finish_reasons",
        "handle",
        "keepalives",
        "last_choice",
        "max_wait_ns",
        "others",
        "rank",
        "report",
        "request_id",
        "response_id",
        "response_model",
        "retries",
        "sdk_ns",
        "seq_bad_start",
        "seq_duplicates",
        "seq_first",
        "seq_gaps",
        "seq_last",
        "seq_missing",
        "seq_next",
        "seq_out_of_order",
        "seq_skipped",
        "seq_window",
        "service_tier",
        "stall_count",
        "stall_ns",
        "start",
        "starting_after",
        "surface",
        "system_fingerprint",
        "t_first_delta",
        "t_first_event",
        "t_frame",
        "t_handed",
        "t_last_event",
        "t_last_ns",
        "t_prev_delta",
        "t_pull",
        "t_request",
        "t_terminal",
        "terminal",
        "unobserved",
        "usage_cache_read",
        "usage_cache_write",
        "usage_input",
        "usage_input_raw",
        "usage_output",
        "usage_reasoning",
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
        self.surface = start.surface
        self.clock = clock
        self._observe = protocols.OBSERVERS.get(start.surface, protocols.observe_unknown)
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
        self.t_prev_delta = 0
        self.t_terminal = 0
        self.wait_ns = 0
        self._wait_first = 0  # the wait before the first event (not between events: not part of consumer time)
        self.consumer_ns = 0
        self.max_wait_ns = 0
        self.stall_ns = stall_threshold_ns
        self._wait_alarm = 0  # min(max_wait_ns, stall_ns): one comparison per event finds both
        self.stall_count = 0
        self._stalls: list[Stall] | None = None
        self.others = 0  # events that are not deltas (events = deltas + others)
        self.keepalives = 0
        self.done_seen = False
        self.done_ended = False  # chat/completions: [DONE] was the terminal condition (no finish on every choice)
        self.unobserved = unobserved
        self.done_observable = done_observable and names.MEASURE_DONE_SENTINEL not in unobserved
        self.ended = False
        self.handle: object = None
        self.rank = _RANK_NONE
        self.terminal = False
        self.error_type: str | None = None
        self.finish_reasons: list[str] = []
        self.expected_choices = expected_choices
        self.choices_seen: set[int] | None = None
        self.last_choice: object = None  # the index choice_seen() accepted last (chunks repeat it)
        self._choices_finished: dict[int, str] | None = None
        self.usage_requested = usage_requested
        self.usage_seen = False
        self.usage_input: int | None = None
        self.usage_input_raw: int | None = None  # Anthropic: input before adding the cache counts
        self.usage_output: int | None = None
        self.usage_cache_read: int | None = None
        self.usage_cache_write: int | None = None
        self.usage_reasoning: int | None = None
        self.response_id: str | None = None
        self.response_model: str | None = None
        self.service_tier: str | None = None
        self.system_fingerprint: str | None = None
        self.report: StreamReport | None = None  # the one report, once ended (otelstream.report_of reads it)
        self.request_id = request_id
        self.retries = retries
        self.starting_after = starting_after
        self.client_filter_after = client_filter_after
        self.seq_first: int | None = None
        self.seq_last: int | None = None
        self.seq_next: int | None = None  # the number expected next (None before the first)
        self.seq_window = 0  # bit k set: number (_seq_win_top - 1 - k) was seen
        self._seq_win_top = 0
        self._seq_last_at = 0  # seq_next when seq_last was recorded
        self.seq_gaps = 0
        self.seq_skipped = 0
        self.seq_duplicates = 0
        self.seq_out_of_order = 0
        self.seq_bad_start = False
        self.seq_missing = False
        self._anomalies: list[Anomaly] | None = None
        self._anomaly_counts: dict[str, int] | None = None
        self._chunk_counts: list[int] | None = None  # time per output chunk: counts per bucket (sums derived)
        self._fast_code = _FAST_BY_SURFACE.get(start.surface, 0)
        self._fast = 0  # while steady: _fast_code, + _RAW when fed decoded JSON (see event())

    # --- hot path ------------------------------------------------------------------------------------------
    def event(self, ev: Any, name: str | None = None) -> None:
        """One parsed event reached the caller: the decoded JSON it was built from, or the SDK's model of it. ``name``
        is the SSE ``event:`` field when the layer sees it. The pull's wait ended when the adapter's tap stamped the
        decoding of its frame (``t_frame``); the time from then to now was the SDK's own work on it (JSON, model),
        neither wait nor the caller's. Without a stamp (WebSocket, offline) the wait ends now.

        Every statement here costs the caller on every event (on the order of 50 machine instructions per bytecode),
        so the common case, an event carrying a plain delta in order mid-stream, takes a flat path: it checks its few
        fields inline, and any field that does not match sends the event to the general path (``_event``), which
        classifies it through the surface's protocol module. The flat path only records what cannot be derived later
        (consumer time and the chunk-time sums are computed at the end)."""
        clock = self.clock  # a local: a call through the slot would take CPython's unspecialized method lookup
        now = clock()
        frame = self.t_frame
        if frame:
            self.t_frame = 0
            self.sdk_ns += now - frame
        else:
            frame = now
        fast = self._fast  # the surface's fast-path code while the stream is steady, else 0
        if not fast:
            self._event(ev, name, now, frame)
            return
        text = seq = None
        try:
            if fast > _RAW:  # decoded JSON: optional keys may be absent
                if fast == _RAW_MESSAGES:
                    if ev["type"] == "content_block_delta":
                        dd = ev["delta"]
                        if dd["type"] == "text_delta":
                            text = dd["text"]
                elif fast == _RAW_RESPONSES:
                    seq = ev["sequence_number"]
                    if seq == self.seq_next and type(seq) is int and ev["type"] in _RESPONSES_DELTA_TYPES:
                        text = ev["delta"]
                else:  # chat or legacy completions: one choice (ValueError otherwise), its text only, no finish,
                    # no usage, no error
                    [c] = ev["choices"]
                    if (
                        "error" not in ev
                        and ev.get("usage") is None
                        and c.get("finish_reason") is None  # some gateways (LiteLLM) leave it out until the end
                        and c["index"] == self.last_choice
                    ):
                        text = c["delta"].get("content") if fast == _RAW_CHAT else c.get("text")
            else:
                # SDK models: ``__dict__`` once per model, then subscripts (pydantic models define ``__getattr__``, so
                # every attribute read takes CPython's slow path). The SDKs' models hold every declared field there.
                d = ev.__dict__
                if fast == _FAST_MESSAGES:
                    if d["type"] == "content_block_delta":
                        dd = d["delta"].__dict__
                        if dd["type"] == "text_delta":
                            text = dd["text"]
                elif fast == _FAST_RESPONSES:
                    seq = d["sequence_number"]
                    if seq == self.seq_next and type(seq) is int and d["type"] in _RESPONSES_DELTA_TYPES:
                        text = d["delta"]
                else:
                    [c] = d["choices"]
                    c = c.__dict__
                    if (
                        d["usage"] is None
                        and "error" not in d
                        and c["finish_reason"] is None
                        and c["index"] == self.last_choice
                    ):
                        text = c["delta"].__dict__["content"] if fast == _FAST_CHAT else c["text"]
        except (AttributeError, KeyError, TypeError, IndexError, ValueError):  # another shape: the general path
            text = None
        if not text or type(text) is not str:
            self._event(ev, name, now, frame)
            return
        if seq is not None:  # Responses: the number checked above was the one expected
            self.seq_next = seq + 1
        # _wait_ended, inline: a call per event would cost more than the accounting itself
        tp = self.t_pull
        if tp:
            self.t_pull = 0
            wait = frame - tp
            self.wait_ns += wait
            if wait > self._wait_alarm:
                self._long_wait(tp, wait)
        # deltas = 1 + the chunk counts, the last event time is t_prev_delta
        gap = now - self.t_prev_delta
        self.t_prev_delta = now
        if gap > _FIRST_BOUND_NS:  # = bisect_left(_CHUNK_BOUNDS_NS, gap), the general path's placement
            try:
                i = _BOUNDS_BELOW_BITS[gap.bit_length()]
            except IndexError:  # beyond 2**64 ns: only an injected clock
                i = _N_CHUNK_BUCKETS - 1
            self._chunk_counts[i + 1 if gap > _BOUNDS_PADDED[i] else i] += 1  # type: ignore[index]
        else:
            self._chunk_counts[0] += 1  # type: ignore[index]

    def _event(self, ev: Any, name: str | None, now: int, frame: int) -> None:
        """The general path: any event, classified by the surface's protocol module (its wait ended at ``frame``)."""
        if self.ended:
            return
        self._wait_ended(frame)
        if not self.t_first_event:
            self.t_first_event = now
            self._wait_first = self.wait_ns
            self._sdk_first = self.sdk_ns
        try:
            d = ev.__dict__  # an SDK model's fields
        except AttributeError:
            d = ev if type(ev) is dict else None  # decoded JSON (offline), or junk
        if d is None:
            kind = protocols.OTHER
            self.anomaly(names.ANOM_BAD_FIELD, f"event of type {type(ev).__name__}")
        else:
            kind = self._observe(self, d, name, ev)
        self.t_last_event = now
        if kind == protocols.DELTA:
            prev = self.t_prev_delta
            self.t_prev_delta = now
            if not prev:
                self.t_first_delta = now
                self._chunk_counts = [0] * _N_CHUNK_BUCKETS
            else:
                self._chunk_counts[bisect_left(_CHUNK_BOUNDS_NS, now - prev)] += 1  # type: ignore[index]
        elif kind == protocols.KEEPALIVE:
            self.keepalives += 1
        else:
            self.others += 1
        # steady: a delta was seen, the answer is not over, every event reaches the caller
        steady = self.t_prev_delta and not self.terminal and not self.ended and self.client_filter_after is None
        fast = self._fast_code
        self._fast = (fast + _RAW if type(ev) is dict else fast) if steady and fast else 0

    def last_activity_ns(self) -> int:
        """When the stream last did something: its send, an event, ``[DONE]`` (the idle fallback counts from it)."""
        return max(self.t_last_ns, self.t_last_event, self.t_prev_delta)

    @property
    def deltas(self) -> int:
        """Deltas so far: the first, plus one per gap counted in the time-per-chunk buckets."""
        counts = self._chunk_counts
        return 0 if counts is None else 1 + sum(counts)

    @property
    def events(self) -> int:
        """Parsed events so far, keepalives and ``[DONE]`` excluded."""
        return self.deltas + self.others

    def _wait_ended(self, now: int) -> int:
        """A pull's wait ends at ``now``: account it; returns when it began (0: no pull was waiting). The flat path in
        ``event()`` does the same inline."""
        tp = self.t_pull
        if tp:
            self.t_pull = 0
            wait = now - tp
            self.wait_ns += wait
            if wait > self._wait_alarm:
                self._long_wait(tp, wait)
        return tp

    def _long_wait(self, tp: int, wait: int) -> None:
        """A wait above the alarm: a new longest wait, or a stall (the alarm is the lower of the two)."""
        if wait > self.max_wait_ns:
            self.max_wait_ns = wait
        if wait > self.stall_ns:
            self._stall(tp, wait)
        self._wait_alarm = min(self.max_wait_ns, self.stall_ns)

    def _stall(self, tp: int, wait: int) -> None:
        self.stall_count += 1
        stalls = self._stalls
        if stalls is None:
            stalls = self._stalls = []
        if len(stalls) < names.MAX_RECORDED_STALLS:
            stalls.append(Stall(offset_s=(tp - self.t_request) / 1e9, wait_s=wait / 1e9))

    def first_pull(self, now: int) -> None:
        """The caller asks for the first event: a wait begins, and the time since the stream was handed over (a
        framework's set-up, a sleep) was the caller's (DESIGN §2: consumer time)."""
        self.t_pull = now
        handed = self.t_handed
        if handed and now > handed and not self._pre_pull_ns:
            self._pre_pull_ns = now - handed

    def keepalive(self, count: int = 1) -> None:
        """Keepalive comment lines (or pings) seen below the event layer."""
        if not self.ended:
            self.keepalives += count

    def done_sentinel(self) -> None:
        """``data: [DONE]`` was seen."""
        if self.ended:
            return
        self.done_seen = True
        now = self.t_last_ns = self.clock()  # arrived during a wait: activity, but not an event
        surface = self.surface
        if surface in (names.RESPONSES, names.RESPONSES_WEBSOCKET):
            self.anomaly(names.ANOM_TRAILING_DONE, "[DONE] after the terminal event" if self.terminal else "[DONE]")
        elif surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS) and not self.terminal and self.events:
            # the server's explicit end of a chat stream (DESIGN §2): some servers never send a finish_reason, or
            # leave out the usage that was requested; the answer is over all the same
            self.done_ended = True
            self.terminal = True
            self._fast = 0
            self.t_terminal = now
            if self.rank < _RANK_COMPLETED:
                self.rank = _RANK_COMPLETED

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
        nxt = self.seq_next
        if nxt is None:
            self.seq_first = n
            expected = 0 if self.starting_after is None else self.starting_after + 1
            if n != expected:
                self.seq_bad_start = True
                self.anomaly(names.ANOM_SEQUENCE_BAD_START, f"expected {expected}, got {n}")
            self.seq_window = 1
        else:
            run = nxt - self._seq_win_top  # numbers that arrived in order since the window was last updated
            if run >= _SEQ_WINDOW:
                self.seq_window = _SEQ_MASK
            elif run:
                self.seq_window = ((self.seq_window << run) | ((1 << run) - 1)) & _SEQ_MASK
            if n >= nxt:
                if n > nxt:
                    self.seq_gaps += 1
                    self.seq_skipped += n - nxt
                    self.anomaly(names.ANOM_SEQUENCE_GAP, f"expected {nxt}, got {n}")
                shift = n - nxt + 1
                self.seq_window = ((self.seq_window << shift) | 1) & _SEQ_MASK if shift < _SEQ_WINDOW else 1
            else:
                back = nxt - 1 - n
                first = self.seq_first if self.seq_first is not None else 0
                if back < _SEQ_WINDOW and n >= first and (self.seq_window >> back) & 1:
                    self.seq_duplicates += 1
                    self.anomaly(names.ANOM_SEQUENCE_DUPLICATE, f"{n} seen before")
                else:
                    self.seq_out_of_order += 1
                    self.anomaly(names.ANOM_SEQUENCE_OUT_OF_ORDER, f"{n} after {self.last_sequence()}")
                    if back < _SEQ_WINDOW:
                        self.seq_window |= 1 << back
                self._seq_win_top = nxt
                self.seq_last = n
                self._seq_last_at = nxt
                return
        self.seq_next = n + 1
        self._seq_win_top = n + 1
        self.seq_last = n
        self._seq_last_at = n + 1

    def last_sequence(self) -> int | None:
        """The sequence number seen last: ``seq_next - 1`` unless the last one seen arrived out of order."""
        if self.seq_next is None:
            return None
        return self.seq_last if self._seq_last_at == self.seq_next else self.seq_next - 1

    def missing_sequence(self) -> None:
        if not self.seq_missing:
            self.seq_missing = True
            self.anomaly(names.ANOM_SEQUENCE_MISSING, "event without sequence_number")

    def anomaly(self, kind: str, detail: str = "") -> None:
        counts = self._anomaly_counts
        if counts is None:
            counts = self._anomaly_counts = {}
            self._anomalies = []
        counts[kind] = counts.get(kind, 0) + 1
        found = self._anomalies
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
            self.t_terminal = self.clock()

    def saw_error(self) -> bool:
        """An in-band error was seen (the highest-precedence outcome is ``error``)."""
        return self.rank == _RANK_ERROR

    def after_terminal(self) -> bool:
        """Record (once per event) that the server kept talking after the terminal event."""
        if self.terminal:
            self.anomaly(names.ANOM_EVENT_AFTER_TERMINAL)
            return True
        return False

    def set_error_type(self, value: object) -> None:
        if self.error_type is None and isinstance(value, str) and value:
            self.error_type = value[:_MAX_ERROR_TYPE_LEN]

    def add_finish_reason(self, reason: object) -> None:
        if isinstance(reason, str) and len(self.finish_reasons) < _MAX_CHOICES:
            self.finish_reasons.append(reason[:_MAX_ERROR_TYPE_LEN])

    def choice_seen(self, index: object) -> int | None:
        """Track a chat/completions choice index (bounded); returns it, or None when unusable. Most streams have one
        choice: a set of the indices is made only when a second one appears."""
        if type(index) is not int or index < 0:
            if index is not None:
                self.anomaly(names.ANOM_BAD_FIELD, "choice index")
            return None if index is not None else 0
        if index == self.last_choice:
            return index
        seen = self.choices_seen
        if seen is None:
            if self.last_choice is None:
                self.last_choice = index
                return index
            seen = self.choices_seen = {self.last_choice}  # type: ignore[arg-type]
        if index not in seen:
            if len(seen) >= _MAX_CHOICES:
                self.anomaly(names.ANOM_BAD_FIELD, "too many choices")
                return None
            seen.add(index)
            if self.terminal and self.expected_choices is None and self.rank < _RANK_FAILED:
                # "every choice finished" was judged on the choices seen so far (offline, or n not in the request):
                # a new one means the answer was not over
                self.terminal = False
                self.t_terminal = 0
        self.last_choice = index
        return index

    def choice_finished(self, index: int, reason: str) -> bool:
        """Record a choice's finish; returns True when every expected choice has finished."""
        finished = self._choices_finished
        if finished is None:
            finished = self._choices_finished = {}
        if index in finished:
            self.anomaly(names.ANOM_EVENT_AFTER_TERMINAL, f"choice {index} finished twice")
            return False
        finished[index] = reason
        self.add_finish_reason(reason)
        return self.all_choices_finished()

    def all_choices_finished(self) -> bool:
        finished = self._choices_finished
        if not finished:
            return False
        n = self.expected_choices
        if n is not None and n > 0:
            return len(finished) >= n
        seen = self.choices_seen
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

    # --- the end ------------------------------------------------------------------------------------------
    def end(
        self, how: str, error_type: str | None = None, now: int | None = None, exc: BaseException | None = None
    ) -> StreamReport | None:
        """Finish the stream; returns its report the first time, None afterwards.

        ``how``: eof (the body ended), close / gc / cancel / idle (the caller stopped), error (an in-band error
        reached the caller as an SDK exception), transport_error, http_error. ``exc``: the exception that ended it,
        if one did: its HTTP status and its type (a timeout or a reset) decide the error class."""
        with _END_LOCK:
            if self.ended:
                return None
            self.ended = True
            self._fast = 0
        if now is None:
            now = self.clock()
        # consumer time = time between the first and the last event spent neither waiting for the next one nor in
        # the SDK's work on it
        last = self.t_last_event = max(self.t_last_event, self.t_prev_delta)  # the fast path stamps deltas only
        if self.t_first_event:
            self.consumer_ns = (
                (last - self.t_first_event) - (self.wait_ns - self._wait_first) - (self.sdk_ns - self._sdk_first)
            )
        # the last wait ended with the stream's end (EOF, a reset, a timeout): it still counts as waiting
        tp = self._wait_ended(now)
        if tp and last and tp > last:
            self.consumer_ns += tp - last
        self.consumer_ns += self._pre_pull_ns
        if how == "error":
            self.set_error_type(error_type)
            self.outcome_seen(names.ERROR, terminal=False)
        elif error_type is not None and how in ("transport_error", "http_error"):
            self.set_error_type(error_type)
        abandoned_reason = None
        if self.rank >= _RANK_INCOMPLETE:
            outcome = _OUTCOME_BY_RANK[self.rank]
        elif self.terminal:
            outcome = names.COMPLETED
        else:
            outcome, abandoned_reason = _END_OUTCOME.get(how, (names.TRANSPORT_ERROR, None))
        self._final_anomalies(outcome)
        t_end = self.t_terminal if self.terminal and self.t_terminal else now
        klass = errors.error_class(outcome, self.error_type, errors.status_of(exc), exc)
        report = self.report = self._report(outcome, abandoned_reason, t_end, klass)
        return report

    def _final_anomalies(self, outcome: str) -> None:
        surface = self.surface
        answered = outcome in (names.COMPLETED, names.INCOMPLETE)
        if surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS):
            if (self.done_ended or self.all_choices_finished()) and not self.usage_seen:
                self.anomaly(names.ANOM_USAGE_MISSING)
            if self.done_ended and answered:
                self._missing_finish_reasons()
            if answered and self.done_observable and not self.done_seen:
                self.anomaly(names.ANOM_MISSING_DONE)
        if answered and self.deltas == 0:
            self.anomaly(names.ANOM_NO_DELTA)

    def _missing_finish_reasons(self) -> None:
        """One ``missing_finish_reason`` per choice (seen, or expected from the request's ``n``) that [DONE] ended
        without a finish reason."""
        finished = self._choices_finished or {}
        seen = set(self.choices_seen) if self.choices_seen is not None else set()
        if self.last_choice is not None:
            seen.add(self.last_choice)  # type: ignore[arg-type]
        for index in sorted(seen.difference(finished)):
            self.anomaly(names.ANOM_MISSING_FINISH_REASON, f"choice {index}")
        expected = min(self.expected_choices or 0, _MAX_CHOICES)
        for _ in range(expected - len(seen.union(finished))):
            self.anomaly(names.ANOM_MISSING_FINISH_REASON, "a requested choice never seen")

    def _report(
        self, outcome: str, abandoned_reason: str | None, t_end: int, error_class: str | None
    ) -> StreamReport:
        start = self.start
        t0 = self.t_request
        ttfe = self.t_first_event - t0 if self.t_first_event else None
        ttfd = self.t_first_delta - t0 if self.t_first_delta else None
        retries: int | None = self.retries
        keepalives: int | None = self.keepalives
        done: bool | None = self.done_seen
        unobserved = self.unobserved
        if unobserved:  # a patch point is missing from the SDK: what rests on it is unknown, not zero or guessed
            if names.MEASURE_TIME_TO_FIRST_EVENT in unobserved:
                ttfe = None
            if names.MEASURE_TIME_TO_FIRST_DELTA in unobserved:
                ttfd = None
            if names.MEASURE_RETRIES in unobserved:
                retries = None
            if names.MEASURE_KEEPALIVES in unobserved:
                keepalives = None
            if names.MEASURE_DONE_SENTINEL in unobserved and not self.done_seen:
                done = None
        counts = self._anomaly_counts
        chunk_counts = self._chunk_counts or [0] * _N_CHUNK_BUCKETS
        chunk_total = self.t_prev_delta - self.t_first_delta if self.t_first_delta else 0
        sequence = assemble(
            SequenceStats,
            {
                "first": self.seq_first,
                "last": self.last_sequence(),
                "gaps": self.seq_gaps,
                "skipped": self.seq_skipped,
                "duplicates": self.seq_duplicates,
                "out_of_order": self.seq_out_of_order,
                "bad_start": self.seq_bad_start,
                "missing": self.seq_missing,
            },
        )
        usage = assemble(
            Usage,
            {
                "input_tokens": self.usage_input,
                "output_tokens": self.usage_output,
                "cache_read_input_tokens": self.usage_cache_read,
                "cache_write_input_tokens": self.usage_cache_write,
                "reasoning_output_tokens": self.usage_reasoning,
            },
        )
        return assemble(
            StreamReport,
            {
                "surface": self.surface,
                "provider": start.provider,
                "outcome": outcome,
                "request_model": start.request_model,
                "response_model": self.response_model,
                "response_id": self.response_id,
                "request_id": self.request_id,
                "stream_id": start.stream_id,
                "server_address": start.server_address,
                "server_port": start.server_port,
                "api_type": start.api_type,
                "service_tier": self.service_tier,
                "system_fingerprint": self.system_fingerprint,
                "attributes": start.attributes,
                "abandoned_reason": abandoned_reason,
                "error_type": self.error_type,  # the provider's, as sent: never an outcome name (DESIGN §2)
                "error_class": error_class,
                "finish_reasons": tuple(self.finish_reasons),
                "resumed": start.resumed or self.starting_after is not None or self.client_filter_after is not None,
                "retries": retries,
                "t_request_ns": t0,
                "t_end_ns": max(t_end, t0),
                "time_to_first_event_ns": ttfe,
                "time_to_first_delta_ns": ttfd,
                "max_wait_ns": max(0, self.max_wait_ns),
                "wait_ns": max(0, self.wait_ns),  # never negative, even with an injected clock that went backwards
                "consumer_ns": max(0, self.consumer_ns),
                "events": self.events,
                "deltas": self.deltas,
                "keepalives": keepalives,
                "done_sentinel": done,
                "sequence": sequence,
                "usage": usage,
                "usage_requested": bool(self.usage_requested),
                "anomalies": tuple(self._anomalies or ()),
                "anomaly_counts": tuple(sorted(counts.items())) if counts else (),
                "stalls": tuple(self._stalls or ()),
                "stall_count": self.stall_count,
                "chunk_counts": tuple(chunk_counts),
                "chunk_sums_ns": spread_sums(chunk_counts, chunk_total),
                "unobserved": tuple(sorted(unobserved)) if unobserved else (),
            },
        )


_RANK_BY_OUTCOME = {v: k for k, v in _OUTCOME_BY_RANK.items()}
