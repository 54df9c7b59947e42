"""Watchdog: a stall adds one span event when it begins; idle streams are abandoned once; orphans end; one pass
per tick (stall and idle checks, the live counts) with one clock read."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otelstream import _guard, names
from otelstream.core.report import Stall
from otelstream.export.watchdog import LiveStreams, Watchdog
from tests.export.harness import LIVE_LABELS, Clock, Ended, FakeTracker, make_report, make_start


def test_stall_event_once_per_stall(make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter) -> None:
    p = make_pipeline(stall_threshold_s=30)
    start = make_start(t_request_ns=clock())
    tracker = FakeTracker(start, clock)
    h = p.stream_started(start, tracker)
    clock.advance(1)
    tracker.t_pull = clock()
    p.watchdog.tick()
    clock.advance(31)
    p.watchdog.tick()
    clock.advance(5)
    p.watchdog.tick()  # the same wait: no second event
    tracker.t_pull = 0
    clock.advance(1)
    tracker.t_pull = clock()  # a second wait
    clock.advance(40)
    p.watchdog.tick()
    tracker.ended = True
    stalls = (Stall(1.0, 36.0), Stall(38.0, 40.0))  # the report lists the same two stalls
    p.stream_finished(Ended(make_report(start, t_end_ns=clock(), stalls=stalls, stall_count=2)), h)
    assert p.flush(5.0)
    (span,) = span_exporter.get_finished_spans()
    stall_events = [e for e in span.events if e.name == names.SPAN_EVENT_STALL]
    assert len(stall_events) == 2  # reported live, not again from the report
    assert all((e.attributes or {})[names.ATTR_STALL_ONGOING] for e in stall_events)
    assert (stall_events[0].attributes or {})[names.ATTR_STALL_OFFSET] == 1.0
    assert span.start_time is not None
    assert stall_events[0].timestamp - span.start_time == 1_000_000_000


def test_live_stall_offset_is_from_the_last_attempt(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    """After a retry, the live stall event measures its offset from the last attempt's send, as the report does."""
    p = make_pipeline(stall_threshold_s=30)
    start = make_start(t_request_ns=clock())
    tracker = FakeTracker(start, clock)
    h = p.stream_started(start, tracker)
    clock.advance(2)
    tracker.t_request = clock()  # the first attempt failed; the retry was sent 2 s later
    clock.advance(1)
    tracker.t_pull = clock()
    clock.advance(31)
    p.watchdog.tick()
    tracker.ended = True
    stalls = (Stall(1.0, 31.0),)  # the same stall in the report: not added again
    report = make_report(start, t_request_ns=tracker.t_request, t_end_ns=clock(), stalls=stalls, stall_count=1)
    p.stream_finished(Ended(report), h)
    assert p.flush(5.0)
    (span,) = span_exporter.get_finished_spans()
    (event,) = [e for e in span.events if e.name == names.SPAN_EVENT_STALL]
    assert (event.attributes or {})[names.ATTR_STALL_OFFSET] == 1.0


def test_idle_stream_is_abandoned_once(make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter) -> None:
    p = make_pipeline(abandon_after_s=600)
    start = make_start(t_request_ns=clock())
    tracker = FakeTracker(start, clock)
    p.stream_started(start, tracker)
    clock.advance(599)
    p.watchdog.tick()
    assert tracker.end_calls == []
    tracker.t_pull = clock()  # waiting inside the SDK is not idle, however long
    clock.advance(700)
    p.watchdog.tick()
    assert tracker.end_calls == []
    tracker.t_pull = 0
    tracker.t_last_event = clock()  # an event arrived: idleness counts from here
    clock.advance(601)
    p.watchdog.tick()
    p.watchdog.tick()
    assert tracker.end_calls == ["idle"]
    assert len(p.live) == 0
    assert p.flush(5.0)
    (span,) = span_exporter.get_finished_spans()
    a = span.attributes or {}
    assert (a[names.ATTR_OUTCOME], a[names.ATTR_ABANDONED_REASON]) == ("abandoned", "idle")


def test_idle_end_assembles_the_report_on_the_metrics_thread(
    monkeypatch: pytest.MonkeyPatch, make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    """A real tracker left idle: the watchdog's tick only ends it (its report assembled on the metrics thread, as a
    caller's end's is), and the caller's own end that comes later reports nothing more."""
    from otelstream.core import stream_end as tracker_module
    from otelstream.core.report import StreamStart
    from otelstream.core.tracker import StreamTracker

    assembled_on: list[str] = []
    real = tracker_module.build_report

    def build(*args: Any) -> Any:
        assembled_on.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(tracker_module, "build_report", build)
    p = make_pipeline(abandon_after_s=10)
    start = StreamStart(surface=names.CHAT_COMPLETIONS, provider="openai", request_model="m", t_request_ns=clock())
    tracker = StreamTracker(start, clock=clock)
    tracker.t_last_ns = clock()
    tracker.handle = p.stream_started(start, tracker)
    clock.advance(11)
    p.watchdog.tick()
    assert tracker.ended and len(p.live) == 0
    assert p.flush(5.0)
    assert assembled_on == ["otelstream-export"]
    report = tracker.report
    assert report is not None and (report.outcome, report.abandoned_reason) == (names.ABANDONED, names.ABANDON_IDLE)
    assert not tracker.conclude("eof")  # the caller's end, later: nothing more
    assert tracker.final_report() is report and assembled_on == ["otelstream-export"]
    (span,) = span_exporter.get_finished_spans()
    assert (span.attributes or {})[names.ATTR_ABANDONED_REASON] == names.ABANDON_IDLE


class SlowReport(FakeTracker):
    """Its idle report takes a while once the stream is ended: the watchdog's thread preempted between the end and
    the hand-over (a loaded machine; a forked child also starts its export threads right then)."""

    def __init__(self, start: Any, clock: Clock) -> None:
        super().__init__(start, clock)
        self.ending = threading.Event()
        self.release = threading.Event()

    def conclude(self, how: str, error_type: str | None = None) -> bool:
        first = super().conclude(how, error_type)  # ended first: the caller's own end, meanwhile, gets nothing
        if first and how == names.ABANDON_IDLE:
            self.ending.set()
            self.release.wait(10)
        return first


def test_flush_waits_for_an_idle_report_being_handed_over(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    """The idle fallback ended a stream and the caller's own end (its collection) came second and reported nothing:
    the report is the watchdog's to hand over, and a flush must not say done before it is in."""
    p = make_pipeline(abandon_after_s=10)
    start = make_start(t_request_ns=clock())
    tracker = SlowReport(start, clock)
    h = p.stream_started(start, tracker)
    clock.advance(11)
    ticking = threading.Thread(target=p.watchdog.tick)  # the watchdog's thread, driven once
    ticking.start()
    try:
        assert tracker.ending.wait(10)
        assert tracker.end(names.ABANDON_GC) is None  # the collection: already ended, nothing to report
        assert not p.flush(0.2)  # the idle report is not in yet: not done
        releaser = threading.Timer(0.1, tracker.release.set)
        releaser.start()
        assert p.flush(10.0)  # waits for the hand-over, then for the report's export
        releaser.join()
    finally:
        tracker.release.set()
        ticking.join(10)
    (span,) = span_exporter.get_finished_spans()
    a = span.attributes or {}
    assert (a[names.ATTR_OUTCOME], a[names.ATTR_ABANDONED_REASON]) == (names.ABANDONED, names.ABANDON_IDLE)
    assert h.finished and len(p.live) == 0


def test_orphaned_tracker_ends_span(make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter) -> None:
    p = make_pipeline()
    start = make_start(t_request_ns=clock())
    tracker = FakeTracker(start, clock)
    p.stream_started(start, tracker)
    del tracker
    gc.collect()
    p.watchdog.tick()
    assert p.flush(5.0)
    (span,) = span_exporter.get_finished_spans()
    assert (span.attributes or {})[names.ATTR_ABANDONED_REASON] == "gc"


def test_watchdog_thread_runs_and_multiprocess_off(make_pipeline: Any, clock: Clock,
                                                    span_exporter: InMemorySpanExporter) -> None:  # fmt: skip
    p = make_pipeline(watchdog_interval_s=0.01, stall_threshold_s=1)
    start = make_start(t_request_ns=clock())
    tracker = FakeTracker(start, clock)
    h = p.stream_started(start, tracker)
    tracker.t_pull = clock()
    clock.advance(2)
    deadline = time.monotonic() + 5
    while h.stall_mark == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert h.stall_mark == tracker.t_pull


def test_real_tracker(make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter,
                      registry: CollectorRegistry) -> None:  # fmt: skip
    """The lead's StreamTracker (slotted, no __weakref__) works with the watchdog and the idle fallback."""
    from otelstream.core.tracker import StreamTracker

    p = make_pipeline(abandon_after_s=10)
    start = make_start(t_request_ns=clock())
    tracker = StreamTracker(start, clock=clock)
    tracker.handle = p.stream_started(start, tracker)
    assert registry.get_sample_value(
        "otelstream_streams_active",
        {**LIVE_LABELS, "surface": "responses"},
    ) == 1  # fmt: skip
    clock.advance(11)
    p.watchdog.tick()
    assert tracker.ended
    assert p.flush(5.0)
    (span,) = span_exporter.get_finished_spans()
    a = span.attributes or {}
    assert (a[names.ATTR_OUTCOME], a[names.ATTR_ABANDONED_REASON]) == ("abandoned", "idle")
    assert span.end_time is not None and span.start_time is not None
    assert span.end_time - span.start_time == 11_000_000_000


# --- one pass per tick: stall/idle checks and the live counts together, one clock read ----------------------------
class CountingClock(Clock):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def __call__(self) -> int:
        self.reads += 1
        return self.now


class Recorder:
    """A watchdog's callbacks; the idle fallback ends the stream the way the pipeline does."""

    def __init__(self, p: Any) -> None:
        self.p = p
        self.stalls: list[tuple[Any, int, int]] = []
        self.idled: list[Any] = []
        self.orphans: list[Any] = []
        self.ticks: list[tuple[dict[Any, int], dict[Any, int]]] = []

    def watchdog(self, live: LiveStreams, abandon_after_s: float = 600.0) -> Watchdog:
        return Watchdog(
            live, interval_s=3600.0, abandon_after_s=abandon_after_s, on_stall=self.on_stall,
            on_idle=self.on_idle, on_orphan=self.orphans.append, on_tick=self.on_tick,
        )  # fmt: skip

    def on_stall(self, handle: Any, t_pull: int, now: int) -> None:
        self.stalls.append((handle, t_pull, now))

    def on_idle(self, tracker: Any, handle: Any) -> None:
        self.idled.append(handle)
        if tracker.conclude("idle"):
            self.p.stream_finished(tracker, handle)

    def on_tick(self, active: dict[Any, int], stalled: dict[Any, int]) -> None:
        self.ticks.append((active, stalled))


def open_streams(p: Any, clock: Clock, n: int, **start_kw: Any) -> tuple[list[FakeTracker], list[Any]]:
    trackers, handles = [], []
    for _ in range(n):
        start = make_start(t_request_ns=clock(), **start_kw)
        tracker = FakeTracker(start, clock)
        trackers.append(tracker)
        handles.append(p.stream_started(start, tracker))
    return trackers, handles


def test_tick_counts_in_the_same_pass(make_pipeline: Any, clock: Clock) -> None:
    """The counts a tick hands to on_tick are the ones counts() gives at that moment: after a stall begins, while
    it lasts, after it ends; an idle stream ended by the tick and an orphan are not active in that tick's counts."""
    p = make_pipeline(stall_threshold_s=30, abandon_after_s=600)
    rec = Recorder(p)
    wd = rec.watchdog(p.live)
    (waiting, busy, idle), (h, _, _) = open_streams(p, clock, 3)
    (other,), (other_h,) = open_streams(p, clock, 1, request_model="gpt-other")
    key, other_key = h.labels, other_h.labels
    assert key != other_key

    def tick() -> tuple[dict[Any, int], dict[Any, int]]:
        wd.tick()
        assert rec.ticks[-1] == p.live.counts()
        return rec.ticks[-1]

    assert tick() == ({key: 3, other_key: 1}, {key: 0, other_key: 0})
    waiting.t_pull = clock()
    other.t_pull = clock()
    clock.advance(31)
    busy.t_last_event = clock()  # busy: activity within abandon_after, no pull pending
    assert tick() == ({key: 3, other_key: 1}, {key: 1, other_key: 1})
    assert [s[0] for s in rec.stalls] == [h, other_h]
    clock.advance(5)
    assert tick() == ({key: 3, other_key: 1}, {key: 1, other_key: 1})  # still stalled: no second stall event
    assert len(rec.stalls) == 2
    waiting.t_pull = 0  # the event arrived
    waiting.t_last_event = clock()
    assert tick() == ({key: 3, other_key: 1}, {key: 0, other_key: 1})

    clock.advance(570)  # idle's last activity (its send) is now 606 s ago, busy's 575 s, waiting's 570 s
    assert tick() == ({key: 2, other_key: 1}, {key: 0, other_key: 1})
    assert len(rec.idled) == 1
    assert idle.ended and not busy.ended and not waiting.ended
    del idle, waiting
    gc.collect()
    assert tick() == ({key: 1, other_key: 1}, {key: 0, other_key: 1})  # the orphan is retired, not counted
    assert rec.orphans == [h]


def test_one_clock_read_per_tick(make_pipeline: Any) -> None:
    clock = CountingClock()
    p = make_pipeline(stall_threshold_s=30, abandon_after_s=600)
    rec = Recorder(p)
    wd = rec.watchdog(p.live)
    trackers, handles = open_streams(p, clock, 50)
    for t in trackers[::2]:
        t.t_pull = clock()  # half wait inside the SDK (stall check), half do not (idle check)
    clock.advance(31)
    wd.tick()  # reports the 25 stalls (these callbacks read no clock)
    clock.reads = 0
    wd.tick()
    assert clock.reads == 1
    assert rec.ticks[-1] == ({handles[0].labels: 50}, {handles[0].labels: 25})
    clock.reads = 0
    assert p.live.counts() == rec.ticks[-1]
    assert clock.reads == 1


def test_trackers_on_different_clocks(make_pipeline: Any) -> None:
    """A tracker's waits are measured on its own clock, even when another clock was read first in the tick."""
    early, late = Clock(), Clock()
    p = make_pipeline(stall_threshold_s=30)
    rec = Recorder(p)
    wd = rec.watchdog(p.live)
    (a,), _ = open_streams(p, early, 1)
    (b,), (bh,) = open_streams(p, late, 1)
    (c,), _ = open_streams(p, early, 1)
    for t in (a, b, c):
        t.t_pull = t.clock()
    late.advance(31)
    wd.tick()
    assert [s[0] for s in rec.stalls] == [bh]
    assert rec.ticks[-1] == p.live.counts() == ({bh.labels: 3}, {bh.labels: 1})


@pytest.mark.allow_internal_errors
def test_watchdog_thread_outlives_a_failing_tick(make_pipeline: Any, clock: Clock) -> None:
    p = make_pipeline(stall_threshold_s=1)
    calls: list[int] = []

    def on_stall(handle: Any, t_pull: int, now: int) -> None:
        calls.append(t_pull)
        if len(calls) == 1:
            raise RuntimeError("boom")

    wd = Watchdog(p.live, interval_s=0.01, abandon_after_s=0, on_stall=on_stall, on_idle=lambda t, h: None,
                  on_orphan=lambda h: None)  # fmt: skip
    (tracker,), _ = open_streams(p, clock, 1)
    tracker.t_pull = clock()
    clock.advance(2)
    wd.ensure_started()
    try:
        deadline = time.monotonic() + 5
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
        tracker.t_pull = clock()  # a second wait, a second stall: reported by a later tick of the same thread
        clock.advance(2)
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        wd.stop()
    assert calls == [tracker.t_pull - 2_000_000_000, tracker.t_pull]
    assert [where for where, _ in _guard.errors] == ["export.watchdog"]
