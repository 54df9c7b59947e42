"""Metrics from real streams: TTFT bucket placement of a scripted pause, and the exposition of a registry filled by
real streams parsed back with prometheus_client's text and OpenMetrics parsers (exemplars present)."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.exchange import PAUSE_HEADER
from otelstream.demo.provider import FakeProvider
from tests.support.clients import client_for
from tests.support.surfaces import SSE_SURFACES
from tests.telemetry.harness import (
    FAULT_FOR,
    MODELS,
    Telemetry,
    consume_sync,
    create_fn,
    request_kwargs,
)

TTFC = "gen_ai_client_operation_time_to_first_chunk_seconds"


@pytest.mark.parametrize("surface", SSE_SURFACES)
def test_scripted_pause_lands_in_the_032_bucket(tel: Telemetry, provider: FakeProvider, surface: str) -> None:
    """slow_first with a 0.2 s pause before the first delta (plus ttfd 4 ms): TTFT in (0.16, 0.32]."""
    client = client_for(provider, surface)
    try:
        kwargs = request_kwargs(surface, F.SLOW_FIRST, **{PAUSE_HEADER: "0.2"})
        with create_fn(client, surface)(**kwargs) as stream:
            for _ in stream:
                pass
    finally:
        client.close()
    tel.flush()
    model = {names.LABEL_MODEL: MODELS[surface]}
    assert tel.bucket(TTFC, "0.16", **model) == 0
    assert tel.bucket(TTFC, "0.32", **model) == 1
    assert tel.bucket(TTFC, "+Inf", **model) == 1
    ttfc = tel.ours()[0].attributes[names.ATTR_RESPONSE_TTFC]  # type: ignore[index]
    assert 0.2 <= ttfc <= 0.32


def _fill(tel: Telemetry, provider: FakeProvider) -> None:
    """A few real streams of every SSE surface: healthy, broken and abandoned, under a sampled parent span."""
    for surface in SSE_SURFACES:
        client = client_for(provider, surface)
        try:
            for outcome in (names.COMPLETED, names.CUT, names.ABANDONED, names.HTTP_ERROR):
                consume_sync(client, surface, outcome, tel.tracer)
        finally:
            client.close()
    tel.flush()


def test_text_exposition_parses(tel: Telemetry, provider: FakeProvider) -> None:
    _fill(tel, provider)
    text = generate_latest(tel.registry).decode()
    families = {f.name: f for f in parse_text(text)}
    assert {
        "gen_ai_client_operation_duration_seconds", "gen_ai_client_token_usage", TTFC,
        "gen_ai_client_operation_time_per_output_chunk_seconds", "otelstream_streams",
        "otelstream_stream_time_to_first_event_seconds", "otelstream_stream_max_wait_seconds",
        "otelstream_stream_sequence_anomalies", "otelstream_stream_anomalies", "otelstream_streams_active",
        "otelstream_streams_stalled", "otelstream_reports_dropped",
    } <= set(families)  # fmt: skip
    streams = [s for s in families["otelstream_streams"].samples if s.name == "otelstream_streams_total"]
    assert sum(s.value for s in streams) == 4 * len(SSE_SURFACES)
    for surface in SSE_SURFACES:
        for outcome in (names.COMPLETED, names.CUT, names.ABANDONED, names.HTTP_ERROR):
            [sample] = [s for s in streams if s.labels["surface"] == surface and s.labels["outcome"] == outcome]
            assert sample.value == 1


def test_openmetrics_exposition_parses_with_exemplars(tel: Telemetry, provider: FakeProvider) -> None:
    _fill(tel, provider)
    text = generate_openmetrics(tel.registry).decode()
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in parse_openmetrics(text)}
    span_ids = {format(s.context.span_id, "016x") for s in tel.ours()}
    trace_ids = {format(s.context.trace_id, "032x") for s in tel.ours()}
    for family in ("gen_ai_client_operation_duration_seconds", TTFC, "otelstream_stream_max_wait_seconds",
                   "gen_ai_client_operation_time_per_output_chunk_seconds", "gen_ai_client_token_usage"):  # fmt: skip
        exemplars = [s.exemplar for s in families[family].samples if s.exemplar is not None]
        assert exemplars, f"{family} has no exemplar"
        for ex in exemplars:
            assert set(ex.labels) == {"trace_id", "span_id"}
            assert ex.labels["span_id"] in span_ids and ex.labels["trace_id"] in trace_ids
    streams = [s for s in families["otelstream_streams"].samples if s.name == "otelstream_streams_total"]
    assert sum(s.value for s in streams) == 4 * len(SSE_SURFACES)


@pytest.mark.parametrize("surface", SSE_SURFACES)
def test_http_error_request_id(tel: Telemetry, provider: FakeProvider, surface: str) -> None:
    """docs/telemetry.md: the request id header is kept; an HTTP 500 answer carries one (x-request-id / request-id)."""
    client = client_for(provider, surface)
    try:
        consume_sync(client, surface, names.HTTP_ERROR, tel.tracer)
    finally:
        client.close()
    tel.flush()
    assert provider.wait_idle(5.0)
    rec = provider.requests[-1]
    assert rec.fault == FAULT_FOR[names.HTTP_ERROR]
    assert tel.ours()[0].attributes.get(names.ATTR_REQUEST_ID) == f"req_{rec.index:016x}"  # type: ignore[union-attr]
