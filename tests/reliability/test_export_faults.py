"""Export faults against the real pipeline, with real SDK streams: the caller is never affected, and what could not
be exported is counted (``otelstream_reports_dropped_total``) and said (one rate-limited warning).

Faults: an OTLP exporter pointing at a closed port, a span processor that raises (at start and at end), a
Prometheus collection that raises, a span exporter that blocks forever so the dispatcher queue fills.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from relhelpers import FIGURES, FIXTURES, scaled
from sdkhelpers import Bodies, Clients, Seen, instrumented

import otelstream
from otelstream import names

BODY = (FIXTURES / "responses-completed.sse").read_bytes() if (FIXTURES / "responses-completed.sse").exists() else b""
# the caller's stream must not wait for export: generous for a loaded CI box, far below any exporter timeout
MAX_CALLER_S = 0.5


@pytest.fixture(autouse=True)
def _need_body() -> None:
    if not BODY:
        pytest.skip("tests/fixtures/streams/responses-completed.sse not present")


@pytest.fixture
def lenient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Production mode: internal errors are recorded and logged, not re-raised (the suite default re-raises)."""
    monkeypatch.setenv("OTELSTREAM_RAISE_INTERNAL_ERRORS", "0")


def _stream_many(n: int) -> tuple[list[Seen], float]:
    """n complete Responses streams through the real SDK; returns what the caller saw and the slowest stream (s)."""
    clients = Clients(Bodies())
    seen: list[Seen] = []
    slowest = 0.0
    for i in range(n):
        t0 = time.perf_counter()
        seen.append(clients.consume(names.RESPONSES, BODY, f"m{i % 3}"))
        slowest = max(slowest, time.perf_counter() - t0)
    return seen, slowest


def _baseline() -> Seen:
    otelstream.uninstrument()
    return Clients(Bodies()).consume(names.RESPONSES, BODY, "m0")


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def test_otlp_exporter_at_a_closed_port() -> None:
    otlp = pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    expected = _baseline()
    exporter = otlp.OTLPSpanExporter(endpoint=f"http://127.0.0.1:{_closed_port()}/v1/traces", timeout=0.3)
    tp = TracerProvider()
    # Simple (synchronous) processor: every span end is a failing export with retries, on the dispatcher thread
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    n = scaled(40)
    otelstream.uninstrument()
    otelstream.instrument(tracer_provider=tp, registry=registry, queue_size=8)
    try:
        seen, slowest = _stream_many(n)
    finally:
        otelstream.uninstrument()
        threading.Thread(target=tp.shutdown, daemon=True).start()  # the exporter may still be retrying
    assert all(s == expected for s in seen)
    assert slowest < MAX_CALLER_S, f"a caller waited {slowest:.3f} s for export"
    streams = _sample(registry, "otelstream_streams_total")
    dropped = _sample(registry, "otelstream_reports_dropped_total")
    assert streams + dropped == n, (streams, dropped)  # every stream counted or counted as dropped
    FIGURES["export faults injected"] += n


class _Raising(SpanProcessor):
    def __init__(self, at: str) -> None:
        self.at = at
        self.calls = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.at == "start":
            self.calls += 1
            raise RuntimeError("span processor failure (injected)")

    def on_end(self, span: ReadableSpan) -> None:
        if self.at == "end":
            self.calls += 1
            raise RuntimeError("span processor failure (injected)")


def _sample(registry: CollectorRegistry, family: str, **labels: str) -> float:
    total = 0.0
    for metric in registry.collect():
        for s in metric.samples:
            if s.name == family and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total




@pytest.mark.allow_internal_errors
@pytest.mark.parametrize(
    "at", ["end", "start"]
)
def test_span_processor_that_raises(at: str, lenient: None) -> None:
    expected = _baseline()
    otelstream.uninstrument()
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    raising = _Raising(at)
    tp.add_span_processor(raising)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    n = scaled(20)
    otelstream.instrument(tracer_provider=tp, registry=registry)
    try:
        seen, slowest = _stream_many(n)
        otelstream.flush(10.0)
    finally:
        otelstream.uninstrument()
        tp.shutdown()
    assert all(s == expected for s in seen)
    assert slowest < MAX_CALLER_S
    assert raising.calls == n
    FIGURES["export faults injected"] += n
    # metrics do not depend on the span path: every stream counted
    assert _sample(registry, "otelstream_streams_total", outcome=names.COMPLETED) == n


class _BrokenCollector:
    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> Iterator[Any]:
        self.calls += 1
        raise RuntimeError("collector failure (injected)")


@pytest.mark.allow_internal_errors
def test_prometheus_collection_that_raises(lenient: None) -> None:
    """A collector on the same registry raising at scrape time: the scrape fails, the application does not, and
    nothing is lost — once the broken collector is gone every stream is there."""
    expected = _baseline()
    with instrumented() as inst:
        broken = _BrokenCollector()
        inst.registry.register(broken)  # type: ignore[arg-type]
        server, _thread = otelstream.start_metrics_server(port=0)
        port = server.server_address[1]
        n = scaled(20)
        results: list[Seen] = []
        scrape_errors = 0
        for _ in range(n):
            results.extend(_stream_many(1)[0])
            otelstream.flush(5.0)
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            except urllib.error.HTTPError:
                scrape_errors += 1
        assert broken.calls >= n and scrape_errors == n
        inst.registry.unregister(broken)  # type: ignore[arg-type]
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        server.shutdown()
        server.server_close()
        assert inst.streams_total(outcome=names.COMPLETED) == n
        assert "otelstream_streams_total" in body
    assert all(s == expected for s in results)
    FIGURES["export faults injected"] += n


class _Blocking(SpanExporter):
    """A span exporter stuck on a collector that never answers (until released)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans: Any) -> SpanExportResult:
        self.release.wait(60)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def _queue_full_run(caplog: pytest.LogCaptureFixture) -> tuple[float, float, int, float, list[logging.LogRecord]]:
    otelstream.uninstrument()
    exporter = _Blocking()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    n = scaled(60)
    caplog.set_level(logging.WARNING, logger="otelstream")
    otelstream.instrument(tracer_provider=tp, registry=registry, queue_size=5)
    try:
        seen, slowest = _stream_many(n)
        dropped_now = _sample(registry, "otelstream_reports_dropped_total")
        exporter.release.set()
        otelstream.flush(10.0)
    finally:
        otelstream.uninstrument()
        tp.shutdown()
    assert len({s for s in seen}) == 1 and seen[0].error is None
    FIGURES["export faults injected"] += n
    streams = _sample(registry, "otelstream_streams_total")
    records = [r for r in caplog.records if r.name == "otelstream" and r.levelno >= logging.WARNING]
    return slowest, dropped_now, n, streams, records


def test_dispatcher_queue_full_counts_every_drop(caplog: pytest.LogCaptureFixture) -> None:
    slowest, dropped, n, streams, _ = _queue_full_run(caplog)
    assert slowest < MAX_CALLER_S, f"a caller waited {slowest:.3f} s on a full export queue"
    # one report in the blocked exporter, five queued: the rest dropped, and every one of them counted
    assert dropped >= n - 6
    assert streams + dropped == n, (streams, dropped, n)




def test_dispatcher_queue_full_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    _, dropped, _, _, records = _queue_full_run(caplog)
    assert dropped > 1
    drops = [r for r in records if "drop" in r.getMessage().lower()]
    assert len(drops) == 1, [r.getMessage() for r in records]
