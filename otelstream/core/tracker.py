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
    tracker.event(item, sse=sse)    # the item is classified, timed at t_frame (else now)

The HTTP-level observer, which recognises a plain delta on its bytes, calls ``tracker.plain_delta(choice)`` in place
of ``event`` for it (recorded as the flat path records it; ``takes_plain`` says which decoded events it may stand for).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, ClassVar, Protocol

from otelstream import names
from otelstream.core import protocols
from otelstream.core.chunk_time import BOUNDS_BELOW_BITS as _BOUNDS_BELOW_BITS
from otelstream.core.chunk_time import BOUNDS_PADDED as _BOUNDS_PADDED
from otelstream.core.chunk_time import CHUNK_BOUNDS_NS as _CHUNK_BOUNDS_NS
from otelstream.core.chunk_time import FIRST_BOUND_NS as _FIRST_BOUND_NS
from otelstream.core.chunk_time import N_CHUNK_BUCKETS as _N_CHUNK_BUCKETS
from otelstream.core.outcome_rank import RANK_COMPLETED
from otelstream.core.protocols import DELTA as _DELTA
from otelstream.core.protocols import KEEPALIVE as _KEEPALIVE
from otelstream.core.protocols import OTHER as _OTHER
from otelstream.core.protocols.responses import DELTA_TYPES as _RESPONSES_DELTA_TYPES
from otelstream.core.protocols.responses import REASONING_DELTA_TYPES as _RESPONSES_REASONING_DELTA_TYPES
from otelstream.core.report import Stall
from otelstream.core.state import Observer
from otelstream.core.stream_end import StreamEnd

# flat-path codes per surface for SDK models, and + _RAW for decoded JSON (what the HTTP-level observer and
# ``otelstream check`` pass: plain dicts, read by subscripts, where an SDK model is read through its ``__dict__``)
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



def _raw_text(fast: int, ev: Any, last_choice: object) -> object:
    """The text of a plain delta in decoded JSON (Chat, Completions, Messages), as the flat path takes it; None for
    any other shape (optional keys may be absent)."""
    try:
        if fast == _RAW_MESSAGES:
            if ev["type"] == "content_block_delta":
                dd = ev["delta"]
                if dd["type"] == "text_delta":
                    return dd["text"]
            return None
        # chat or legacy completions: one choice (ValueError otherwise), its text only, no finish, no usage, no error
        [c] = ev["choices"]
        if (
            "error" not in ev
            and ev.get("usage") is None
            and c.get("finish_reason") is None  # some gateways (LiteLLM) leave it out until the end
            and c["index"] == last_choice
        ):
            return c["delta"].get("content") if fast == _RAW_CHAT else c.get("text")
    except (AttributeError, KeyError, TypeError, IndexError, ValueError):  # another shape
        pass
    return None


class Frame(Protocol):
    """An SSE frame as an SDK's decoder yields it (read only for its ``event:`` name)."""

    @property
    def event(self) -> str | None: ...


class StreamTracker(StreamEnd):
    """Measures one stream. Not thread-safe by design: one stream is consumed by one thread at a time."""

    __slots__ = ("__weakref__",)  # the export watchdog holds open streams weakly

    # every surface with a protocol module; those without a flat path (code 0) take the general path throughout
    _SURFACES: ClassVar[dict[str, tuple[Observer, int]]] = {
        surface: (observer, _FAST_BY_SURFACE.get(surface, 0)) for surface, observer in protocols.OBSERVERS.items()
    }
    _OTHER_SURFACE = (protocols.observe_unknown, 0)
    _FAST_DELTAS_BEFORE_OUTPUT = _RESPONSES_REASONING_DELTA_TYPES

    # --- hot path ------------------------------------------------------------------------------------------
    def event(self, ev: Any, name: str | None = None, sse: Frame | None = None) -> None:
        """One parsed event reached the caller: the decoded JSON it was built from, or the SDK's model of it. ``name``
        is the SSE ``event:`` field when the layer sees it; ``sse``, instead, the SSE frame the event came from (its
        ``event`` is read only off the flat path: a property read per event would cost more than the flat path). The
        pull's wait ended when the adapter's tap stamped the decoding of its frame (``t_frame``); the time from then to
        now was the SDK's own work on it (JSON, model), neither wait nor the caller's. Without a stamp (WebSocket,
        offline) the wait ends now.

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
            self._event(ev, name if sse is None else sse, now, frame)
            return
        text = seq = None
        try:
            if fast > _RAW:  # decoded JSON (offline, the HTTP-level observer): not a budgeted path
                if fast == _RAW_RESPONSES:
                    seq = ev["sequence_number"]
                    if seq == self.seq_next and type(seq) is int and ev["type"] in self._fast_deltas:
                        text = ev["delta"]
                else:
                    text = _raw_text(fast, ev, self.last_choice)
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
                    if seq == self.seq_next and type(seq) is int and d["type"] in self._fast_deltas:
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
            self._event(ev, name if sse is None else sse, now, frame)
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
        # deltas = 1 + the chunk counts, the last event time is t_prev_delta. This accounting stands here and in
        # plain_delta inline (a call per event would cost more than it); tests/adapters/test_flat_path.py pins both
        # to the general path's (_wait_ended, bisect placement) at every bucket bound.
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

    def _flat_at(self, now: int, seq: int | None) -> None:
        """The flat path's accounting of a plain delta taken at ``now`` (``seq``: its Responses sequence number), as
        ``event`` does it inline: for the compiled accelerator when a value leaves 64 bits (an injected clock)."""
        frame = self.t_frame
        if frame:
            self.t_frame = 0
            self.sdk_ns += now - frame
        else:
            frame = now
        if seq is not None:
            self.seq_next = seq + 1
        self._wait_ended(frame)
        gap = now - self.t_prev_delta
        self.t_prev_delta = now
        self._chunk_counts[bisect_left(_CHUNK_BOUNDS_NS, gap)] += 1  # type: ignore[index]

    def takes_plain(self, ev: Any) -> bool:
        """Whether ``event`` would take this decoded event on its flat path now: a plain output delta (Chat,
        Completions, Messages) of a steady stream, of the choice seen last. Reads nothing else; changes nothing."""
        fast = self._fast
        if not fast or type(ev) is not dict:
            return False
        code = self._fast_code + _RAW
        if code == _RAW_RESPONSES:  # its sequence numbers are read per event: no plain_delta there
            return False
        text = _raw_text(code, ev, self.last_choice)
        return type(text) is str and text != ""

    def plain_delta(self, choice: object) -> bool:
        """An event recognised as a plain output delta without decoding it (the HTTP-level observer, on the bytes of
        an event shaped like one that ``takes_plain`` took), of ``choice`` (the index its bytes name on Chat and
        Completions; ``last_choice`` elsewhere): recorded exactly as the flat path of ``event`` records it, and True.
        False, nothing recorded, when the flat path would not take it now: the caller decodes it and calls
        ``event``."""
        if not self._fast or choice != self.last_choice or self._fast_code == _FAST_RESPONSES:
            return False
        # the flat path's accounting, inline as there (a call per event would cost more than the accounting); pinned
        # to the general path's by tests/adapters/test_flat_path.py
        now = self.clock()
        frame = self.t_frame
        if frame:
            self.t_frame = 0
            self.sdk_ns += now - frame
        else:
            frame = now
        tp = self.t_pull
        if tp:
            self.t_pull = 0
            wait = frame - tp
            self.wait_ns += wait
            if wait > self._wait_alarm:
                self._long_wait(tp, wait)
        gap = now - self.t_prev_delta
        self.t_prev_delta = now
        if gap > _FIRST_BOUND_NS:
            try:
                i = _BOUNDS_BELOW_BITS[gap.bit_length()]
            except IndexError:
                i = _N_CHUNK_BUCKETS - 1
            self._chunk_counts[i + 1 if gap > _BOUNDS_PADDED[i] else i] += 1  # type: ignore[index]
        else:
            self._chunk_counts[0] += 1  # type: ignore[index]
        return True

    def _event(self, ev: Any, name: str | Frame | None, now: int, frame: int) -> None:
        """The general path: any event, classified by the surface's protocol module (its wait ended at ``frame``).

        Every stream's first events, its finish, usage and terminal events come here, on the caller's thread: the
        common shapes take straight lines (module constants, one test for a steady stream's flat path), the rare
        ones the calls."""
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
            kind = _OTHER
            self.anomaly(names.ANOM_BAD_FIELD, f"event of type {type(ev).__name__}")
        else:
            kind = self._observe(self, d, name, ev)
        self.t_last_event = now
        if kind == _OTHER:
            self.others += 1
        elif kind == _KEEPALIVE:
            self.keepalive(1, now)
        else:  # a delta: of output (DELTA) or of reasoning
            if not self.t_first_output and kind == _DELTA:
                self._first_output(now)
            prev = self.t_prev_delta
            self.t_prev_delta = now
            if not prev:
                self.t_first_delta = now
                self._chunk_counts = [0] * _N_CHUNK_BUCKETS
            else:
                self._chunk_counts[bisect_left(_CHUNK_BOUNDS_NS, now - prev)] += 1  # type: ignore[index]
        fast = self._fast_code
        # steady: the answer is not over, every event reaches the caller, and the flat path may take the deltas that
        # come: those of output once the first one was recorded here (chat, completions and messages take nothing
        # else), or, on Responses, those of reasoning from the first delta on (``_fast_deltas``)
        if (
            fast
            and (self.t_first_output or (fast == _FAST_RESPONSES and self.t_prev_delta))
            and not self.terminal
            and not self.ended
            and self.client_filter_after is None
        ):
            self._fast = fast + _RAW if type(ev) is dict else fast
        else:
            self._fast = 0

    def _first_output(self, now: int) -> None:
        """The first delta that is not reasoning (TTFO): its time, its index among the events, and from now on the
        flat path takes every Responses delta type."""
        self.t_first_output = now
        self.first_output_event = self.events
        self._fast_deltas = _RESPONSES_DELTA_TYPES

    def last_activity_ns(self) -> int:
        """When the stream last did something: its send, an event, ``[DONE]`` (the idle fallback counts from it)."""
        return max(self.t_last_ns, self.t_last_event, self.t_prev_delta)

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
        r = self.rare()
        r.stall_count += 1
        stalls = r._stalls
        if stalls is None:
            stalls = r._stalls = []
        if len(stalls) < names.MAX_RECORDED_STALLS:
            stalls.append(Stall(offset_s=(tp - self.t_request) / 1e9, wait_s=wait / 1e9))

    def first_pull(self, now: int) -> None:
        """The caller asks for the first event: a wait begins, and the time since the stream was handed over (a
        framework's set-up, a sleep) was the caller's (consumer time)."""
        self.t_pull = now
        handed = self.t_handed
        if handed and now > handed and not self._pre_pull_ns:
            self._pre_pull_ns = now - handed

    def keepalive(self, count: int = 1, now: int = 0) -> None:
        """Keepalives (comment lines, pings) seen at ``now`` (0: no time for them), below or at the event layer."""
        if self.ended:
            return
        self.keepalives += count
        if now:
            r = self.rare()
            last = r.t_keepalive
            if last and now - last > r.max_keepalive_gap_ns:
                r.max_keepalive_gap_ns = now - last
            r.t_keepalive = now

    def done_sentinel(self, at: int | None = None) -> None:
        """``data: [DONE]`` was seen (``at``: when its frame was decoded, if not now)."""
        if self.ended:
            return
        self.done_seen = True
        now = self.t_last_ns = self.clock() if at is None else at  # arrived during a wait: activity, not an event
        surface = self.surface
        if surface in (names.RESPONSES, names.RESPONSES_WEBSOCKET):
            self.anomaly(names.ANOM_TRAILING_DONE, "[DONE] after the terminal event" if self.terminal else "[DONE]")
        elif surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS) and not self.terminal and self.events:
            # the server's explicit end of a chat stream: some servers never send a finish_reason, or
            # leave out the usage that was requested; the answer is over all the same
            r = self.rare()
            r.done_ended = True
            self.terminal = True
            self._fast = 0
            r.t_terminal = now
            if self.rank < RANK_COMPLETED:
                self.rank = RANK_COMPLETED
