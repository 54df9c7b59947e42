"""Replay through the tracker: one recorded stream (one response) fed to the live path's ``StreamTracker`` the way
the SDK would feed it, on a synthetic clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from otelstream import names
from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.tracker import StreamTracker
from otelstream.offline.reading import Record, Undecodable

TICK_NS: Final = 1_000_000  # the synthetic clock's step: one read = 1 ms


class TickClock:
    """The synthetic clock: every read advances 1 ms (offline input has no times)."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += TICK_NS
        return self.now


@dataclass
class Run:
    """One stream (one response) being fed to a tracker the way the SDK would feed it."""

    surface: str
    sse_framed: bool
    tracker: StreamTracker
    clock: TickClock
    stopped: bool = False  # the SDK would have stopped reading here ([DONE], undecodable data)
    after_stop_flagged: bool = False
    report: StreamReport | None = None

    @classmethod
    def open(
        cls, surface: str, *, sse_framed: bool, starting_after: int | None = None, stream_id: str | None = None
    ) -> Run:
        clock = TickClock()
        provider = names.PROVIDER_ANTHROPIC if surface == names.MESSAGES else names.PROVIDER_OPENAI
        start = StreamStart(surface=surface, provider=provider, resumed=starting_after is not None, stream_id=stream_id)
        tracker = StreamTracker(start, clock=clock, starting_after=starting_after)
        return cls(surface, sse_framed, tracker, clock)

    def comment(self) -> None:
        if not self.stopped:
            self.tracker.keepalive()

    def record(self, rec: Record) -> None:
        t = self.tracker
        value = rec.value
        if self.stopped:
            if not self.after_stop_flagged and not isinstance(value, Undecodable):
                self.after_stop_flagged = True
                t.anomaly(names.ANOM_EVENT_AFTER_TERMINAL, "data after the stream ended (the SDK stops reading)")
            return
        messages = self.surface == names.MESSAGES
        if value == "[DONE]":
            t.done_sentinel()
            if not messages:
                self.stopped = True  # openai: `break` at [DONE]; the rest of the body is never read
            return
        if messages and self.sse_framed:
            # anthropic skips `ping`, unnamed events and (except `error`) events without data
            if rec.name == "ping":
                t.keepalive()
                return
            if rec.name is None:
                t.anomaly(names.ANOM_UNKNOWN_EVENT, "event without an event: name (the SDK skips it)")
                return
            if rec.name == "error" and isinstance(value, Undecodable):
                t.anomaly(names.ANOM_UNDECODABLE, f"error event: {value.reason}")
                self._stop("error")
                return
            if isinstance(value, Undecodable) and value.reason == "event without data":
                return
        if isinstance(value, Undecodable):
            # the SDK raises JSONDecodeError here: live, this stream ends as a transport error
            t.anomaly(names.ANOM_UNDECODABLE, value.reason + (f" (event {rec.name!r})" if rec.name else ""))
            # (as live: the SDK's JSONDecodeError, a ValueError, decides the error class)
            self._stop("transport_error", exc=ValueError(value.reason))
            return
        t.t_pull = self.clock()
        t.event(value, rec.name)

    def _stop(self, how: str, error_type: str | None = None, exc: BaseException | None = None) -> None:
        self.stopped = True
        self.report = self.tracker.end(how, error_type, exc=exc)

    def finish(self, *, unterminated: bool = False) -> StreamReport:
        if self.report is None:
            if unterminated:
                self.tracker.anomaly(
                    names.ANOM_UNTERMINATED_EVENT, "the body ended inside an event (no blank line): the SDKs drop it"
                )
            self.report = self.tracker.end("eof")
        assert self.report is not None  # end() returns a report the first time, and only _stop/finish call it
        return self.report


def resume_point(first: Record | None) -> int | None:
    """A recorded Responses stream that starts past 0 on anything but ``response.created`` is a resume
    (``GET /responses/{id}?starting_after=N``): the server sends N+1 onward. A fresh stream always starts with
    ``response.created`` at 0, so only a resume recording looks like this."""
    if first is None or type(first.value) is not dict:
        return None
    typ = first.value.get("type") or first.name
    seq = first.value.get("sequence_number")
    if typ != "response.created" and type(seq) is int and seq > 0:
        return seq - 1
    return None
