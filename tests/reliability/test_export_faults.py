"""Export faults against the real pipeline, with real SDK streams: the caller is never affected, and what could not
be exported is counted (``otelstream_reports_dropped_total``) and said (one rate-limited warning).

Faults: an OTLP exporter pointing at a closed port, a span processor that raises (at start and at end), a
Prometheus collection that raises, a span exporter that blocks forever (metrics must not wait on spans; flush and
uninstrument stay within their timeouts).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

import otelstream
import otelstream.instrumentation
from otelstream import names
from tests.reliability.harness import FIGURES, scaled
from tests.support.body_clients import Bodies, Clients, Seen
from tests.support.instrumented import instrumented
from tests.support.paths import FIXTURES
from tests.support.raw_server import raw_server

BODY = (FIXTURES / "responses-completed.sse").read_bytes()  # committed: a missing one is an error, not a skip
# the caller's stream must not wait for export: generous for a loaded CI box, far below any exporter timeout
MAX_CALLER_S = 0.5


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
    # every stream counted, or counted as dropped (a queue of 8 may overflow on a busy box; spans may be dropped too)
    assert streams <= n <= streams + dropped, (streams, dropped)
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
        self.entered = threading.Event()
        self.exported = 0

    def export(self, spans: Any) -> SpanExportResult:
        self.entered.set()
        self.release.wait(60)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


_OUR_THREADS = ("otelstream", "OtelBatch")


@pytest.fixture
def hung() -> Iterator[Callable[..., tuple[_Blocking, TracerProvider]]]:
    """Tracer providers whose exporter never returns; released in teardown, and every thread the test started
    (ours, the SDK's batch worker) must then end: nothing stuck leaks into later tests."""
    otelstream.uninstrument()
    before = set(threading.enumerate())
    made: list[tuple[_Blocking, TracerProvider]] = []

    def make(*, batch: bool = False) -> tuple[_Blocking, TracerProvider]:
        exporter = _Blocking()
        tp = TracerProvider()
        tp.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=10) if batch
                              else SimpleSpanProcessor(exporter))  # fmt: skip
        made.append((exporter, tp))
        return exporter, tp

    yield make
    for exporter, _ in made:
        exporter.release.set()
    otelstream.flush(10.0)
    otelstream.uninstrument(timeout=10.0)
    for _, tp in made:
        tp.shutdown()
    started = [t for t in threading.enumerate() if t not in before and t.name.startswith(_OUR_THREADS)]
    for t in started:
        t.join(10.0)
    assert not [t.name for t in started if t.is_alive()], "threads left behind by a released exporter"


def _stream_local(base: str, n: int) -> tuple[list[Seen], float]:
    """n complete Responses streams through the real openai client against a server on 127.0.0.1."""
    client = openai.OpenAI(api_key="sk-test", base_url=f"{base}/v1", max_retries=0)
    seen: list[Seen] = []
    slowest = 0.0
    try:
        for i in range(n):
            t0 = time.perf_counter()
            items = []
            # the raw server answers one request per connection
            with client.responses.create(
                model=f"m{i % 3}", input="x", stream=True, extra_headers={"connection": "close"}
            ) as stream:
                items = [type(ev).__name__ for ev in stream]
            seen.append(Seen(tuple(items), None))
            slowest = max(slowest, time.perf_counter() - t0)
    finally:
        client.close()
    return seen, slowest


QUEUE = 30  # spans overflow it; the metrics thread, which never waits, keeps up with it


def _hung_run(
    hung: Callable[..., tuple[_Blocking, TracerProvider]], caplog: pytest.LogCaptureFixture, n: int
) -> tuple[_Blocking, CollectorRegistry, list[Seen], float]:
    exporter, tp = hung()
    registry = CollectorRegistry()
    caplog.set_level(logging.WARNING, logger="otelstream")
    otelstream.instrument(tracer_provider=tp, registry=registry, queue_size=QUEUE)
    with raw_server(BODY) as base:
        seen, slowest = _stream_local(base, n)
    FIGURES["export faults injected"] += n
    return exporter, registry, seen, slowest


def test_hung_span_export_costs_no_stream_metric(
    hung: Callable[..., tuple[_Blocking, TracerProvider]], caplog: pytest.LogCaptureFixture
) -> None:
    """A span exporter that never returns (SimpleSpanProcessor): every stream is still counted while it hangs
    (a collector outage must not blind the error-ratio alerts); only spans are dropped, and those are counted."""
    n = 120
    exporter, registry, seen, slowest = _hung_run(hung, caplog, n)
    assert len(set(seen)) == 1 and seen[0].error is None and seen[0].items
    assert slowest < MAX_CALLER_S, f"a caller waited {slowest:.3f} s on a hung exporter"
    t0 = time.monotonic()
    assert not otelstream.flush(1.0)  # the spans cannot be flushed: said, within the timeout
    assert time.monotonic() - t0 < 1.0 + 1.0
    assert exporter.entered.is_set() and exporter.exported == 0  # it really is stuck in the first span's export
    assert _sample(registry, "otelstream_streams_total", outcome=names.COMPLETED) == n
    # one span in the exporter's hands, QUEUE queued (one more if the span thread took its first late): the rest
    # dropped and counted
    dropped = _sample(registry, "otelstream_reports_dropped_total")
    assert n - QUEUE - 2 <= dropped <= n - QUEUE - 1, dropped
    exporter.release.set()
    assert otelstream.flush(10.0)
    assert exporter.exported + dropped == n  # every span exported or counted as dropped
    assert _sample(registry, "otelstream_streams_total") == n


def test_hung_span_export_says_so_once(
    hung: Callable[..., tuple[_Blocking, TracerProvider]], caplog: pytest.LogCaptureFixture
) -> None:
    _, registry, _, _ = _hung_run(hung, caplog, scaled(60))
    otelstream.flush(0.5)
    assert _sample(registry, "otelstream_reports_dropped_total") > 1
    records = [r for r in caplog.records if r.name == "otelstream" and r.levelno >= logging.WARNING]
    drops = [r for r in records if "drop" in r.getMessage().lower()]
    assert len(drops) == 1, [r.getMessage() for r in records]


@pytest.mark.slow
def test_uninstrument_with_hung_exporter_is_bounded_and_does_not_hold_up_instrument(
    hung: Callable[..., tuple[_Blocking, TracerProvider]], caplog: pytest.LogCaptureFixture
) -> None:
    """uninstrument() waits at most its timeout (5 s by default) in all, and instrument() meanwhile is not held up
    behind it: the lock covers swapping the patches only."""
    exporter, _, _, _ = _hung_run(hung, caplog, 20)
    assert exporter.entered.wait(5.0)
    took: list[float] = []

    def uninstrument() -> None:
        t0 = time.monotonic()
        otelstream.uninstrument()
        took.append(time.monotonic() - t0)

    worker = threading.Thread(target=uninstrument, daemon=True)
    worker.start()
    deadline = time.monotonic() + 5.0
    while otelstream.instrumentation.is_instrumented() and time.monotonic() < deadline:
        time.sleep(0.005)
    t0 = time.monotonic()
    otelstream.instrument(registry=CollectorRegistry())  # a fresh pipeline while the old one is still draining
    instrument_s = time.monotonic() - t0
    still_draining = worker.is_alive()
    worker.join(5.0 + 5.0)
    assert instrument_s < 1.0, f"instrument() waited {instrument_s:.1f} s behind uninstrument()"
    assert still_draining, "uninstrument() did not wait for the hung exporter at all"
    assert took and took[0] < 5.0 + 1.5, f"uninstrument() took {took[0]:.1f} s"


@pytest.mark.slow
def test_flush_is_bounded_by_its_timeout_across_pipelines(
    hung: Callable[..., tuple[_Blocking, TracerProvider]], caplog: pytest.LogCaptureFixture
) -> None:
    """flush(2.0) returns within 2 s in all, with two pipelines hung: one uninstrumented with a SimpleSpanProcessor
    stuck in export, the current one with a BatchSpanProcessor whose force_flush blocks (the SDK exports on the
    flushing thread, behind the lock its stuck worker holds)."""
    _hung_run(hung, caplog, 10)
    otelstream.uninstrument(timeout=0.2)
    exporter, tp = hung(batch=True)
    registry = CollectorRegistry()
    otelstream.instrument(tracer_provider=tp, registry=registry)
    with raw_server(BODY) as base:
        _stream_local(base, 10)
    assert exporter.entered.wait(5.0)
    t0 = time.monotonic()
    flushed = otelstream.flush(2.0)
    took = time.monotonic() - t0
    assert not flushed
    assert took < 2.0 + 1.0, f"flush(2.0) took {took:.1f} s"
    assert _sample(registry, "otelstream_streams_total") == 10  # the metrics were flushed all the same
