"""The report in the application's hands: ``otelstream.report_of(stream)`` on the SDK's own stream
objects, and ``on_report`` callbacks that see each report once and can neither break nor stall anything."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import otelstream
from otelstream import names
from otelstream.demo.provider import FakeProvider
from tests.support.clients import client_for
from tests.telemetry.harness import ABANDON_AFTER, FAULT_FOR, MODELS, Telemetry, consume_sync, request_kwargs

CH, R, M = names.CHAT_COMPLETIONS, names.RESPONSES, names.MESSAGES



def _streams_total(tel: Telemetry) -> float:
    return sum(s.value for f in tel.registry.collect() for s in f.samples if s.name == "otelstream_streams_total")


@pytest.mark.parametrize("outcome", [names.COMPLETED, names.CUT, names.ABANDONED])
def test_report_of_a_finished_stream_and_none_while_open(
    instrument: Callable[..., Telemetry], provider: FakeProvider, outcome: str
) -> None:
    instrument()
    client = client_for(provider, CH)
    try:
        stream = client.chat.completions.create(**request_kwargs(CH, FAULT_FOR[outcome]))
        assert otelstream.report_of(stream) is None  # open: nothing to report yet
        deltas = 0
        try:
            for chunk in stream:
                deltas += bool(chunk.choices and chunk.choices[0].delta.content)
                assert otelstream.report_of(stream) is None
                if outcome == names.ABANDONED and deltas == ABANDON_AFTER:
                    stream.close()
                    break
        except Exception:  # a cut stream: the SDK may raise or just end, either way the report says cut
            pass
        report = otelstream.report_of(stream)
    finally:
        client.close()
    assert isinstance(report, otelstream.StreamReport)
    assert report.outcome == outcome and report.surface == CH
    assert report.deltas == deltas
    if outcome == names.ABANDONED:
        assert report.abandoned_reason == names.ABANDON_CLOSE
    assert otelstream.report_of(stream) is report  # the same object every time


def test_report_of_right_after_the_end_while_the_export_thread_is_busy(
    instrument: Callable[..., Telemetry], provider: FakeProvider
) -> None:
    """The caller's end only queues the stream: the report is assembled on the metrics thread. ``report_of`` asked
    before that thread got to it assembles it there and then, once: the export thread records that same report."""
    from otelstream import instrumentation
    from otelstream.adapters.calls import call_on

    tel = instrument()
    pipeline = instrumentation._pipeline
    assert pipeline is not None
    dispatcher = pipeline.dispatcher
    handle_item = dispatcher._handler
    busy, release = threading.Event(), threading.Event()
    exported: list[object] = []

    def held(item: Any) -> None:  # the metrics thread, held up before it touches the stream's item
        busy.set()
        release.wait(10)
        handle_item(item)
        exported.append(item.ended.final_report())

    dispatcher._handler = held
    client = client_for(provider, CH)
    try:
        stream = client.chat.completions.create(**request_kwargs(CH, FAULT_FOR[names.COMPLETED]))
        deltas = sum(bool(c.choices and c.choices[0].delta.content) for c in stream)
        assert busy.wait(10)
        call = call_on(stream)
        assert call is not None and call.tracker.report is None  # not assembled on the caller's thread
        report = otelstream.report_of(stream)
    finally:
        release.set()
        client.close()
    assert report is not None and report.outcome == names.COMPLETED and report.deltas == deltas
    assert otelstream.report_of(stream) is report
    tel.flush()
    assert exported == [report]  # the export thread found it assembled: the same object, not a second one
    assert _streams_total(tel) == 1
    (span,) = tel.ours()
    assert (span.attributes or {})[names.ATTR_DELTAS] == deltas


def test_report_of_helper_streams_and_other_objects(
    instrument: Callable[..., Telemetry], provider: FakeProvider
) -> None:
    instrument()
    oa, an = client_for(provider, R), client_for(provider, M)
    try:
        kw = request_kwargs(R, FAULT_FOR[names.COMPLETED])
        kw.pop("stream")
        with oa.responses.stream(**kw) as rs:
            for _ in rs:
                pass
        mk = request_kwargs(M, FAULT_FOR[names.COMPLETED])
        mk.pop("stream")
        with an.messages.stream(**mk) as ms:
            ms.until_done()
    finally:
        oa.close()
        an.close()
    for helper, surface in ((rs, R), (ms, M)):
        report = otelstream.report_of(helper)
        assert report is not None and (report.surface, report.outcome) == (surface, names.COMPLETED)
        assert report.response_model == MODELS[surface]
    for other in (None, object(), "stream", 3, client_for):
        assert otelstream.report_of(other) is None


def test_on_report_sees_each_report_once(instrument: Callable[..., Telemetry], provider: FakeProvider) -> None:
    got: list[otelstream.StreamReport] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def callback(report: otelstream.StreamReport) -> None:
        with lock:
            got.append(report)
            threads.add(threading.current_thread().name)

    tel = instrument(on_report=callback)
    client = client_for(provider, CH)
    try:
        for i, outcome in enumerate((names.COMPLETED, names.CUT, names.ABANDONED, names.HTTP_ERROR)):
            with otelstream.attributes(n=i):
                consume_sync(client, CH, outcome)
    finally:
        client.close()
    tel.flush()
    pipeline = otelstream.instrumentation._pipeline
    assert pipeline is not None and pipeline.reports is not None and pipeline.reports.flush(5.0)
    assert [(r.outcome, dict(r.attributes)) for r in got] == [
        (names.COMPLETED, {"n": 0}), (names.CUT, {"n": 1}), (names.ABANDONED, {"n": 2}), (names.HTTP_ERROR, {"n": 3}),
    ]  # fmt: skip
    assert threading.current_thread().name not in threads  # never on the caller's thread


@pytest.mark.parametrize("misbehaviour", ["raises", "blocks"])
def test_a_failing_or_blocked_callback_leaves_stream_and_sinks_untouched(
    instrument: Callable[..., Telemetry], provider: FakeProvider, misbehaviour: str
) -> None:
    release = threading.Event()
    calls: list[str] = []

    def callback(report: otelstream.StreamReport) -> None:
        calls.append(report.outcome)
        if misbehaviour == "raises":
            raise RuntimeError("the application's bug")
        release.wait(10)  # sleeps up to 10 s: every later report waits behind it, nothing else does

    client = client_for(provider, CH)
    try:
        instrument()
        baseline = consume_sync(client, CH, names.COMPLETED)
        tel = instrument(on_report=callback)
        seen = [consume_sync(client, CH, names.COMPLETED) for _ in range(4)]
        # the caller's stream: exactly what it is without a callback
        for s in seen:
            assert s.exc is None and s.deltas == baseline.deltas
            assert [type(i) for i in s.items] == [type(i) for i in baseline.items]
        # the other sinks: every span and every counter, while the callback is still stuck in its first call
        assert otelstream.flush(5.0)
        assert len(tel.ours()) == 4 and _streams_total(tel) == 4
        if misbehaviour == "blocks":
            assert not release.is_set() and calls == [names.COMPLETED]
        release.set()
        pipeline = otelstream.instrumentation._pipeline
        assert pipeline is not None and pipeline.reports is not None and pipeline.reports.flush(15.0)
        assert calls == [names.COMPLETED] * 4  # and each later report was still delivered
        if misbehaviour == "raises":
            assert pipeline.reports.failed == 4
    finally:
        release.set()
        client.close()


def test_a_full_callback_queue_drops_for_the_callback_only(
    instrument: Callable[..., Telemetry], provider: FakeProvider
) -> None:
    release = threading.Event()
    calls: list[str] = []

    def callback(report: otelstream.StreamReport) -> None:
        calls.append(report.outcome)
        release.wait(10)

    tel = instrument(on_report=callback, queue_size=2)
    client = client_for(provider, CH)
    try:
        for _ in range(6):
            consume_sync(client, CH, names.COMPLETED)
        assert otelstream.flush(5.0)
        pipeline = otelstream.instrumentation._pipeline
        assert pipeline is not None and pipeline.reports is not None
        # at most one in the callback and two queued, the rest dropped and counted: telemetry has all six
        assert pipeline.reports.dropped >= 3
        assert len(tel.ours()) == 6 and _streams_total(tel) == 6
        release.set()
        assert pipeline.reports.flush(5.0)
        assert len(calls) + pipeline.reports.dropped == 6
    finally:
        release.set()
        client.close()
