"""The core tests' harness for driving the tracker by hand: a fake monotonic clock and a one-call stream runner."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.tracker import StreamTracker

MS = 1_000_000  # ns


class FakeClock:
    """A monotonic ns clock the test moves by hand; reading it does not advance it."""

    def __init__(self, start: int = 1_000 * MS) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> int:
        self.now += ns
        return self.now


def tracker(surface: str, clock: FakeClock | None = None, **kw: Any) -> StreamTracker:
    clk = clock if clock is not None else FakeClock()
    return StreamTracker(StreamStart(surface=surface, t_request_ns=clk()), clock=clk, **kw)


def run(surface: str, events: Iterable[Any], how: str = "eof", **kw: Any) -> StreamReport:
    """Feed (event) or (name, event) items, 1 ms apart, then end the stream."""
    clk = FakeClock()
    t = tracker(surface, clk, **kw)
    for item in events:
        name = None
        if type(item) is tuple:
            name, item = item
        clk.advance(MS)
        t.t_pull = clk()
        clk.advance(MS)
        if item == "[DONE]":
            t.done_sentinel()
        else:
            t.event(item, name)
    report = t.end(how)
    assert report is not None
    return report


def counts(report: StreamReport) -> dict[str, int]:
    return dict(report.anomaly_counts)
