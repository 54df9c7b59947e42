"""The caller is never blocked by export: a span exporter and a Prometheus scrape that hang do not delay it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from otelstream import config
from otelstream.export import build_pipeline
from tests.export.harness import COMMON_LABELS, Clock, run_stream


class BlockingExporter(SpanExporter):
    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(30)
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


class BlockingCollector:
    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.entered = threading.Event()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.entered.set()
        self.release.wait(30)
        yield GaugeMetricFamily("app_blocking", "blocks the scrape")


def test_hung_exporter_and_scrape_do_not_block_streams(clock: Clock) -> None:
    release = threading.Event()
    exporter = BlockingExporter(release)
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    blocker = BlockingCollector(release)
    registry.register(blocker)
    p = build_pipeline(config.load({"watchdog_interval_s": 3600}, environ={}), tracer_provider=tp, registry=registry)
    scrape = threading.Thread(target=generate_latest, args=(registry,), daemon=True)
    scrape.start()
    assert blocker.entered.wait(5)
    try:
        worst = 0.0
        for _ in range(100):
            t0 = time.perf_counter()
            run_stream(p, clock)
            worst = max(worst, time.perf_counter() - t0)
        # Nothing waited on the exporter: the span thread is stuck in the first span's export.
        assert len(exporter.spans) == 0
        assert worst < 0.25, f"a stream waited {worst:.3f}s on export"
        # ... and the metrics did not wait for it either (flush says the spans are not out, within its timeout);
        # read past the stuck scrape, which goes on blocking
        assert not p.flush(0.5)
        registry.unregister(blocker)  # type: ignore[arg-type]
        assert _completed(registry) == 100
    finally:
        release.set()
    assert p.flush(10.0)
    assert len(exporter.spans) == 100
    assert _completed(registry) == 100
    scrape.join(5)
    p.shutdown()


def _completed(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value(
        "otelstream_streams_total",
        {**COMMON_LABELS, "surface": "responses", "outcome": "completed", "error_type": "", "phase": ""},
    )  # fmt: skip


def test_stream_started_and_finished_never_raise_into_caller(clock: Clock, monkeypatch: Any) -> None:
    """An internal bug is recorded (and re-raised only in strict mode, which the suite uses)."""
    from otelstream import _guard

    monkeypatch.setenv("OTELSTREAM_RAISE_INTERNAL_ERRORS", "0")
    p = build_pipeline(config.load({"watchdog_interval_s": 3600}, environ={}), registry=CollectorRegistry())

    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(p.spans, "start", broken)
    assert p.stream_started(object(), object()) is None  # type: ignore[arg-type]
    p.stream_finished(object(), None)  # type: ignore[arg-type]
    assert p.activate(None) is None
    p.deactivate(None)
    assert [w for w, _ in _guard.errors] == ["export.stream_started"]
    _guard.errors.clear()
    p.shutdown()
