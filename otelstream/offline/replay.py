"""Replay through the tracker: one recorded stream (one response) fed to the live path's ``StreamTracker`` the way
the SDK would feed it (the client's reading rules: ``core.client_rules``), on a synthetic clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from otelstream import names
from otelstream.core.client_rules import ClientReader
from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.tracker import StreamTracker
from otelstream.offline.reading import Record

TICK_NS: Final = 1_000_000  # the synthetic clock's step: one read = 1 ms
# a recording names no provider: the one each surface's wire belongs to (Vertex AI streams Gemini's wire as well)
_PROVIDER_BY_SURFACE: Final = {
    names.MESSAGES: names.PROVIDER_ANTHROPIC,
    names.GENERATE_CONTENT: names.PROVIDER_GEMINI,
    names.CONVERSE: names.PROVIDER_BEDROCK,
}


class TickClock:
    """The synthetic clock: every read advances 1 ms (offline input has no times)."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += TICK_NS
        return self.now


class _Replay(ClientReader):
    """The SDK's reading of a recording (``core.client_rules``), each delivery after a pull on the synthetic clock."""

    __slots__ = ("clock",)

    def __init__(self, tracker: StreamTracker, clock: TickClock, *, named: bool) -> None:
        super().__init__(tracker, named=named, sdk=True)
        self.clock = clock

    def deliver(self, value: Any, name: str | None) -> None:
        t = self.tracker
        t.t_pull = self.clock()
        t.event(value, name)


@dataclass
class Run:
    """One stream (one response) being fed to a tracker the way the SDK would feed it."""

    surface: str
    tracker: StreamTracker
    reader: ClientReader

    @classmethod
    def open(
        cls,
        surface: str,
        *,
        sse_framed: bool,
        starting_after: int | None = None,
        stream_id: str | None = None,
        provider: str | None = None,
    ) -> Run:
        clock = TickClock()
        if provider is None:
            provider = _PROVIDER_BY_SURFACE.get(surface, names.PROVIDER_OPENAI)
        start = StreamStart(surface=surface, provider=provider, resumed=starting_after is not None, stream_id=stream_id)
        tracker = StreamTracker(start, clock=clock, starting_after=starting_after)
        return cls(surface, tracker, _Replay(tracker, clock, named=sse_framed))

    @property
    def report(self) -> StreamReport | None:
        """The stream's report once it ended (the SDK raised, or ``finish``)."""
        return self.tracker.report

    def comment(self) -> None:
        self.reader.comments()

    def record(self, rec: Record) -> None:
        self.reader.event(rec.name, rec.value)

    def finish(self, *, unterminated: bool = False) -> StreamReport:
        t = self.tracker
        if not t.ended:
            self.reader.finish(unterminated)
            t.end("eof")
        assert t.report is not None  # end() made it, here or when the SDK raised
        return t.report


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
