"""The semantic-convention switch (``semconv``) on both metric paths and on spans, and no double counting of the
gen_ai.client.* metrics under another GenAI instrumentation's CLIENT span (a real OTel SDK tracer's span under a
foreign instrumentation scope; tests/telemetry/test_peer_metrics.py runs the real OTel GenAI OpenAI instrumentation).
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry, generate_latest

from otelstream import config, names
from otelstream.core.report import Usage
from otelstream.export.points import GENAI_DEFAULT_SPECS, GENAI_LATEST_SPECS
from tests.export.harness import Clock, FakeTracker, make_start, run_stream

OLD = {s.prom for s in GENAI_DEFAULT_SPECS}
NEW = {s.prom for s in GENAI_LATEST_SPECS}
UNKNOWN = {names.LABEL_TOKEN_MODALITY: names.TOKEN_MODALITY_UNKNOWN}


def samples(registry: CollectorRegistry) -> dict[str, float]:
    """Sample name -> value summed over every label set."""
    out: dict[str, float] = {}
    for fam in registry.collect():
        for s in fam.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def family_names(registry: CollectorRegistry) -> set[str]:
    return {fam.name for fam in registry.collect()}


def with_labels(registry: CollectorRegistry, name: str) -> list[tuple[dict[str, str], float]]:
    return [(dict(s.labels), s.value) for fam in registry.collect() for s in fam.samples if s.name == name]


def feed_mix(p: Any, clock: Clock) -> None:
    """A completed stream with usage and chunk gaps, a cut one with partial usage, an http_error without usage."""
    counts = [0] * (len(names.TIME_PER_CHUNK_BUCKETS) + 1)
    sums = [0] * (len(names.TIME_PER_CHUNK_BUCKETS) + 1)
    counts[1], sums[1] = 3, 6_000_000
    run_stream(p, clock, {"usage": Usage(10, 5, 2, 0, 1), "chunk_counts": tuple(counts),
                          "chunk_sums_ns": tuple(sums)})  # fmt: skip
    run_stream(p, clock, {"outcome": names.CUT, "usage": Usage(7, 3), "finish_reasons": ()})
    run_stream(p, clock, {"outcome": names.HTTP_ERROR, "error_type": "500", "usage": Usage(), "events": 0,
                          "deltas": 0, "time_to_first_event_ns": None, "time_to_first_delta_ns": None,
                          "time_to_first_output_ns": None, "finish_reasons": ()})  # fmt: skip
    assert p.flush(5.0)


def test_latest_records_the_v010_names_only(make_pipeline: Any, clock: Clock, registry: CollectorRegistry) -> None:
    p = make_pipeline(semconv=names.SEMCONV_LATEST)
    feed_mix(p, clock)
    fams = family_names(registry)
    assert fams.isdisjoint(OLD), sorted(fams & OLD)
    text = generate_latest(registry).decode()
    assert "gen_ai_client_operation_" not in text and "gen_ai_client_token_usage" not in text
    got = samples(registry)
    assert got["gen_ai_client_inference_duration_seconds_count"] == 3
    assert got["gen_ai_client_inference_time_to_first_chunk_seconds_count"] == 2  # the http_error had no delta
    assert got["gen_ai_client_inference_time_per_output_chunk_seconds_count"] == 3
    assert got["gen_ai_client_inference_time_per_output_chunk_seconds_sum"] == pytest.approx(0.006)
    # counters: every call, the failed ones too (the cut's 7 input tokens), 0 where none was reported
    assert got["gen_ai_client_inference_usage_input_tokens_total"] == 17
    assert got["gen_ai_client_inference_usage_output_tokens_total"] == 8
    assert got["gen_ai_client_inference_usage_cache_read_input_tokens_total"] == 2
    assert got["gen_ai_client_inference_usage_cache_write_input_tokens_total"] == 0
    assert got["gen_ai_client_inference_usage_reasoning_output_tokens_total"] == 1
    for counter in ("input", "output", "cache_read_input", "cache_write_input", "reasoning_output"):
        rows = with_labels(registry, f"gen_ai_client_inference_usage_{counter}_tokens_total")
        assert rows and all(labels.items() >= UNKNOWN.items() for labels, _ in rows), counter
    # the per-call histograms: the successful call only, no modality
    assert got["gen_ai_client_inference_operation_input_tokens_count"] == 1
    assert got["gen_ai_client_inference_operation_input_tokens_sum"] == 10
    assert got["gen_ai_client_inference_operation_output_tokens_sum"] == 5
    [(labels, _)] = with_labels(registry, "gen_ai_client_inference_operation_input_tokens_count")
    assert names.LABEL_TOKEN_MODALITY not in labels and names.LABEL_ERROR_TYPE not in labels
    # the duration keeps the error class of the bad outcomes
    classes = {labels.get(names.LABEL_ERROR_TYPE) for labels, _ in
               with_labels(registry, "gen_ai_client_inference_duration_seconds_count")}  # fmt: skip
    assert classes == {"", names.EC_CUT, names.EC_SERVER_ERROR}
    assert got["otelstream_streams_total"] == 3


def test_dup_records_both_alike(make_pipeline: Any, clock: Clock, registry: CollectorRegistry) -> None:
    p = make_pipeline(semconv=names.SEMCONV_DUP)
    feed_mix(p, clock)
    assert family_names(registry) >= OLD | NEW
    got = samples(registry)
    for old, new in names.SEMCONV_RENAMED.items():
        for suffix in ("_count", "_sum"):
            assert got[old + suffix] == got[new + suffix] > 0, (old, suffix)
    input_sum = sum(v for labels, v in with_labels(registry, "gen_ai_client_token_usage_sum")
                    if labels[names.LABEL_TOKEN_TYPE] == names.TOKEN_TYPE_INPUT)  # fmt: skip
    assert input_sum == got["gen_ai_client_inference_usage_input_tokens_total"] == 17


def test_default_records_the_old_names_only(make_pipeline: Any, clock: Clock, registry: CollectorRegistry) -> None:
    p = make_pipeline()
    feed_mix(p, clock)
    fams = family_names(registry)
    assert fams >= OLD and fams.isdisjoint(NEW)


def test_otel_path_latest(make_pipeline: Any, clock: Clock) -> None:
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    p = make_pipeline(meter_provider=mp, prometheus_metrics=False, semconv=names.SEMCONV_LATEST)
    feed_mix(p, clock)
    data = reader.get_metrics_data()
    assert data is not None
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert set(metrics).isdisjoint({s.otel for s in GENAI_DEFAULT_SPECS})
    assert {s.otel for s in GENAI_LATEST_SPECS} <= set(metrics)
    usage = metrics[names.OTEL_USAGE_INPUT_TOKENS]
    assert usage.unit == "{token}"
    (pt,) = usage.data.data_points  # type: ignore[union-attr]
    attrs = dict(pt.attributes or {})
    assert attrs["gen_ai.token.modality"] == names.TOKEN_MODALITY_UNKNOWN and pt.value == 17  # type: ignore[union-attr]
    assert usage.data.is_monotonic  # type: ignore[union-attr]
    (hp,) = metrics[names.OTEL_OPERATION_OUTPUT_TOKENS].data.data_points  # type: ignore[union-attr]
    assert (hp.count, hp.sum) == (1, 5)  # type: ignore[union-attr]
    assert tuple(hp.explicit_bounds) == names.TOKEN_BUCKETS  # type: ignore[union-attr]
    assert metrics[names.OTEL_INFERENCE_DURATION].unit == "s"
    mp.shutdown()


def test_setting_from_the_standard_variable() -> None:
    env = names.SEMCONV_ENV
    assert config.load(environ={}).semconv == names.SEMCONV_DEFAULT
    assert config.load(environ={env: "http, gen_ai_latest_experimental"}).semconv == names.SEMCONV_LATEST
    # /dup wins over the plain value, as OTel's own instrumentations read the list
    both = "gen_ai_latest_experimental,gen_ai_latest_experimental/dup"
    assert config.load(environ={env: both}).semconv == names.SEMCONV_DUP
    assert config.load(environ={env: "http/dup,database"}).semconv == names.SEMCONV_DEFAULT  # other signals' values
    # an argument beats the environment
    assert config.load({"semconv": "default"}, environ={env: both}).semconv == names.SEMCONV_DEFAULT
    assert config.load(environ={"OTELSTREAM_SEMCONV": "latest"}).semconv == names.SEMCONV_DEFAULT
    with pytest.raises(ValueError, match="semconv"):
        config.load({"semconv": "gen_ai_latest_experimental"})


# --- spans ----------------------------------------------------------------------------------------------------------
def _span(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = exporter.get_finished_spans()
    return span


@pytest.mark.parametrize(
    ("outcome", "reasons", "choices", "padded"),
    [
        (names.CUT, (), None, ("error",)),
        (names.ERROR, (), None, ("error",)),
        (names.FAILED, (), None, ("error",)),
        (names.TRANSPORT_ERROR, (), None, ("error",)),
        (names.ABANDONED, (), None, ("error",)),
        (names.CUT, ("stop",), 3, ("stop", "error", "error")),  # n=3: one choice finished, two expected
        (names.ERROR, ("abort",), None, ("abort",)),  # a reason was received: nothing to pad
        (names.COMPLETED, ("stop",), None, ("stop",)),
        (names.INCOMPLETE, ("length",), None, ("length",)),
        (names.HTTP_ERROR, (), None, None),  # no generation started: no finish reason was expected
    ],
)
def test_finish_reasons_padding_follows_the_switch(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter,
    outcome: str, reasons: tuple[str, ...], choices: int | None, padded: tuple[str, ...] | None,
) -> None:  # fmt: skip
    for semconv in names.SEMCONV_MODES:
        span_exporter.clear()
        p = make_pipeline(semconv=semconv)
        run_stream(p, clock, {"outcome": outcome, "finish_reasons": reasons}, request_choice_count=choices)
        assert p.flush(5.0)
        got = _span(span_exporter).attributes.get(names.ATTR_RESPONSE_FINISH_REASONS)  # type: ignore[union-attr]
        # one value per attribute: /dup follows the latest conventions on spans
        want = padded if semconv != names.SEMCONV_DEFAULT else (reasons or None)
        assert (tuple(got) if got is not None else None) == want, semconv
        p.shutdown()


def test_zero_cache_and_reasoning_counts_follow_the_switch(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    usage = {"usage": Usage(10, 5, 0, 0, 0)}
    breakdown = (names.ATTR_USAGE_CACHE_READ, names.ATTR_USAGE_CACHE_WRITE, names.ATTR_USAGE_REASONING)
    p = make_pipeline(semconv=names.SEMCONV_LATEST)
    run_stream(p, clock, usage)
    run_stream(p, clock, {"usage": Usage(10, 5, 3, 0, 2)})
    assert p.flush(5.0)
    zero, nonzero = (dict(s.attributes or {}) for s in span_exporter.get_finished_spans())
    assert (zero[names.ATTR_USAGE_INPUT], zero[names.ATTR_USAGE_OUTPUT]) == (10, 5)  # 0 or not, always there
    assert not set(breakdown) & set(zero)
    assert (nonzero[names.ATTR_USAGE_CACHE_READ], nonzero[names.ATTR_USAGE_REASONING]) == (3, 2)
    assert names.ATTR_USAGE_CACHE_WRITE not in nonzero
    span_exporter.clear()
    p = make_pipeline()  # the default conventions keep a reported 0
    run_stream(p, clock, usage)
    assert p.flush(5.0)
    a = dict(_span(span_exporter).attributes or {})
    assert [a[k] for k in breakdown] == [0, 0, 0]


def test_orphaned_span_padded_under_latest(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    """A tracker gone without a report (abandoned, gc): no finish reason came for either of its two choices."""
    p = make_pipeline(semconv=names.SEMCONV_LATEST)
    start = make_start(t_request_ns=clock(), request_choice_count=2)
    handle = p.stream_started(start, FakeTracker(start, clock))
    p.spans.finish_orphan(handle)
    a = dict(_span(span_exporter).attributes or {})
    assert a[names.ATTR_OUTCOME] == names.ABANDONED
    assert tuple(a[names.ATTR_RESPONSE_FINISH_REASONS]) == ("error", "error")  # type: ignore[arg-type]


# --- no double counting under a GenAI peer -----------------------------------------------------------------------
GENAI_ATTRS = {names.ATTR_OPERATION_NAME: "chat", names.ATTR_PROVIDER_NAME: "openai"}


@pytest.mark.parametrize("semconv", names.SEMCONV_MODES)
@pytest.mark.parametrize(
    ("scope", "kind", "attrs", "peer_metrics"),
    [
        # another GenAI instrumentation owns the call: it records the gen_ai.client.* metrics
        ("opentelemetry.instrumentation.genai.openai", SpanKind.CLIENT, GENAI_ATTRS, True),
        ("opentelemetry.instrumentation.openai_v2", SpanKind.CLIENT, GENAI_ATTRS, True),
        ("some.genai.peer", SpanKind.CLIENT, GENAI_ATTRS, True),
        # the Anthropic SDK's own span: it has no meter, so otelstream's are the call's only gen_ai metrics
        ("com.anthropic.sdk.python", SpanKind.CLIENT, GENAI_ATTRS, False),
        # not a GenAI peer: an HTTP client span, an application's span that names an operation
        ("opentelemetry.instrumentation.httpx", SpanKind.CLIENT, {"http.request.method": "POST"}, False),
        ("app", SpanKind.INTERNAL, GENAI_ATTRS, False),
    ],
)
def test_gen_ai_metrics_left_to_a_genai_peer(
    make_pipeline: Any, clock: Clock, tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter,
    registry: CollectorRegistry, scope: str, kind: SpanKind, attrs: dict[str, str], peer_metrics: bool,
    semconv: str,
) -> None:  # fmt: skip
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    p = make_pipeline(meter_provider=mp, semconv=semconv)
    peer = tracer_provider.get_tracer(scope)
    gaps = {"chunk_counts": (0, 2), "chunk_sums_ns": (0, 4_000_000)}  # two gaps of 2 ms
    with peer.start_as_current_span("peer call", kind=kind, attributes=attrs):
        run_stream(p, clock, gaps)
    run_stream(p, clock, gaps)  # a second call, under no span: always recorded
    assert p.flush(5.0)

    # otelstream's own registry, which no peer writes: every series of both calls, gen_ai.client.* included
    got = samples(registry)
    assert got["otelstream_streams_total"] == 2
    assert got["otelstream_stream_max_wait_seconds_count"] == 2
    default, latest = semconv != names.SEMCONV_LATEST, semconv != names.SEMCONV_DEFAULT
    ttfd = [names.PROM_TIME_TO_FIRST_CHUNK] * default + [names.PROM_INFERENCE_TIME_TO_FIRST_CHUNK] * latest
    duration = [names.PROM_OPERATION_DURATION] * default + [names.PROM_INFERENCE_DURATION] * latest
    assert [got.get(f + "_count") for f in (*ttfd, *duration)] == [2] * len(ttfd + duration)
    chunks = [f for f in (names.PROM_TIME_PER_OUTPUT_CHUNK, names.PROM_INFERENCE_TIME_PER_OUTPUT_CHUNK)
              if f + "_count" in got]  # fmt: skip
    assert len(chunks) == (2 if semconv == names.SEMCONV_DUP else 1)
    assert all(got[f + "_count"] == 4 for f in chunks)

    # the MeterProvider the peer shares: the gen_ai.client.* instruments skip the call the peer records
    calls = 1 if peer_metrics else 2

    data = reader.get_metrics_data()
    assert data is not None
    points = {m.name: m.data.data_points for rm in data.resource_metrics for sm in rm.scope_metrics  # type: ignore[union-attr]
              for m in sm.metrics}  # fmt: skip
    otel_duration = names.OTEL_OPERATION_DURATION if semconv == names.SEMCONV_DEFAULT else names.OTEL_INFERENCE_DURATION
    assert sum(pt.count for pt in points[otel_duration]) == calls  # type: ignore[attr-defined]
    latest_only = semconv == names.SEMCONV_LATEST
    otel_ttfd = names.OTEL_INFERENCE_TIME_TO_FIRST_CHUNK if latest_only else names.OTEL_TIME_TO_FIRST_CHUNK
    assert sum(pt.count for pt in points[otel_ttfd]) == calls  # type: ignore[attr-defined]
    otel_chunk = [m for m in points if m.endswith("time_per_output_chunk")]
    assert all(sum(pt.count for pt in points[m]) == 2 * calls for m in otel_chunk) and otel_chunk  # type: ignore[attr-defined]
    assert sum(pt.value for pt in points[names.OTEL_STREAMS]) == 2  # type: ignore[attr-defined]
    internal = [s for s in span_exporter.get_finished_spans() if s.name == names.SPAN_STREAM_INTERNAL]
    assert len(internal) == (1 if kind is SpanKind.CLIENT and scope != "opentelemetry.instrumentation.httpx" else 0)
    mp.shutdown()
