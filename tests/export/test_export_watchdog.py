"""Watchdog: a stall adds one span event when it begins; idle streams are abandoned once; orphans end."""

from __future__ import annotations

import gc
import time
from typing import Any

from exporthelpers import Clock, FakeTracker, make_report, make_start
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otelstream import names
from otelstream.core.report import Stall


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
    p.stream_finished(make_report(start, t_end_ns=clock(), stalls=stalls, stall_count=2), h)
    assert p.flush(5.0)
    (span,) = span_exporter.get_finished_spans()
    stall_events = [e for e in span.events if e.name == names.SPAN_EVENT_STALL]
    assert len(stall_events) == 2  # reported live, not again from the report
    assert all((e.attributes or {})[names.ATTR_STALL_ONGOING] for e in stall_events)
    assert (stall_events[0].attributes or {})[names.ATTR_STALL_OFFSET] == 1.0
    assert span.start_time is not None
    assert stall_events[0].timestamp - span.start_time == 1_000_000_000


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
        {names.LABEL_PROVIDER: "openai", names.LABEL_OPERATION: "chat", names.LABEL_MODEL: "gpt-test",
         "surface": "responses"},
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
