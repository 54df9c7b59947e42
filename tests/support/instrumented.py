"""otelstream instrumented through its public API on a private tracer provider and registry, and what it
exported."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

import otelstream
from otelstream import names


@dataclass
class Instrumented:
    spans: InMemorySpanExporter
    registry: CollectorRegistry
    tracer_provider: TracerProvider

    def finished(self) -> list[ReadableSpan]:
        otelstream.flush(timeout=30.0)
        return list(self.spans.get_finished_spans())

    def sample(self, family: str, **labels: str) -> float:
        """Sum of a family's samples whose labels include ``labels``."""
        total = 0.0
        for metric in self.registry.collect():
            for s in metric.samples:
                if s.name == family and all(s.labels.get(k) == v for k, v in labels.items()):
                    total += s.value
        return total

    def streams_total(self, **labels: str) -> float:
        return self.sample("otelstream_streams_total", **labels)

    def dropped_total(self) -> float:
        return self.sample("otelstream_reports_dropped_total")


@contextlib.contextmanager
def instrumented(**settings: Any) -> Iterator[Instrumented]:
    """``otelstream.instrument()`` with a private tracer provider and registry; ``uninstrument()`` on exit."""
    otelstream.uninstrument()
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    otelstream.instrument(tracer_provider=tp, registry=registry, **settings)
    try:
        yield Instrumented(exporter, registry, tp)
    finally:
        otelstream.uninstrument()
        tp.shutdown()


def outcome_of(span: ReadableSpan) -> str:
    value = (span.attributes or {}).get(names.ATTR_OUTCOME)
    return str(value)
