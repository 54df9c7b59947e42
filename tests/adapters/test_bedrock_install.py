"""Bedrock through the public switch: ``instrument()`` patches botocore and aiobotocore (already imported or not),
one Bedrock stream makes exactly one span and one series, and ``uninstrument()`` restores the original functions."""

from __future__ import annotations

import aiobotocore.client
import aiobotocore.eventstream
import botocore.client
import botocore.eventstream
import pytest
import wrapt
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

import otelstream
from otelstream import names
from tests.adapters.bedrock_driver import run
from tests.support.bedrock_server import PAUSE_S, BedrockServer

POINTS = [
    (botocore.client.BaseClient, "_make_api_call"),
    (aiobotocore.client.AioBaseClient, "_make_api_call"),
    (botocore.eventstream.EventStream, "__iter__"),
    (botocore.eventstream.EventStream, "close"),
    (aiobotocore.eventstream.AioEventStream, "__anext__"),
]


def _originals() -> list[object]:
    return [cls.__dict__[name] for cls, name in POINTS]


def test_instrument_patches_and_uninstrument_restores(registry: CollectorRegistry) -> None:
    before = _originals()
    otelstream.instrument(registry=registry)
    try:
        assert all(isinstance(f, wrapt.FunctionWrapper) for f in _originals())
    finally:
        otelstream.uninstrument()
    assert _originals() == before


def test_instrumentor_lists_the_bedrock_clients_among_its_any_of_dependencies() -> None:
    from otelstream import instrumentation

    assert {"botocore", "aiobotocore"} <= set(instrumentation._SDKS)
    assert "botocore" in instrumentation.installed_sdks()


def _streams(registry: CollectorRegistry, surface: str) -> float:
    total = 0.0
    for family in registry.collect():
        for s in family.samples:
            if s.name == f"{names.PROM_STREAMS}_total" and s.labels.get(names.LABEL_SURFACE) == surface:
                total += s.value
    return total


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_one_stream_one_span_one_series(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter, registry: CollectorRegistry, mode: str
) -> None:
    with BedrockServer() as server:
        otelstream.instrument(tracer_provider=tracer_provider, registry=registry)
        try:
            seen = run(server, mode, "converse", "pause")
            otelstream.flush()
        finally:
            otelstream.uninstrument()
    assert seen.error is None and len(seen.events) == 6
    spans = [s for s in span_exporter.get_finished_spans() if s.attributes.get(names.ATTR_SURFACE) == names.CONVERSE]
    assert len(spans) == 1
    a = spans[0].attributes
    assert a[names.ATTR_OUTCOME] == names.COMPLETED
    assert a[names.ATTR_BEDROCK_LATENCY_MS] == 321  # the service's own metadata.metrics.latencyMs
    assert a[names.ATTR_TIME_TO_FIRST_DELTA] >= PAUSE_S
    assert _streams(registry, names.CONVERSE) == 1
