"""OTel metrics sink: parity with the native Prometheus series through PrometheusMetricReader; collision warning."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry

from otelstream import names
from otelstream.core.report import SequenceStats, Usage
from tests.export.harness import Clock, FakeTracker, make_start, run_stream

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def series(registry: CollectorRegistry) -> Series:
    """Every sample; labels with an empty value dropped (Prometheus: empty label == absent)."""
    out: Series = {}
    for fam in registry.collect():
        for s in fam.samples:
            if s.name == "target_info":
                continue
            # `le` spelled differently by the two writers (1.048576e+06 vs 1048576.0): Prometheus reads a float.
            labels = frozenset((k, repr(float(v)) if k == "le" else v) for k, v in s.labels.items() if v != "")
            out[(s.name, labels)] = s.value
    return out


def feed(p: Any, clock: Clock) -> None:
    bounds = names.TIME_PER_CHUNK_BUCKETS
    counts = [0] * (len(bounds) + 1)
    sums = [0] * (len(bounds) + 1)
    counts[1], sums[1] = 3, 6_000_000  # three gaps of 2 ms
    counts[8], sums[8] = 2, 500_000_000  # two gaps in (0.16, 0.32]
    run_stream(p, clock, {"chunk_counts": tuple(counts), "chunk_sums_ns": tuple(sums)})
    run_stream(p, clock, {"outcome": names.CUT, "sequence": SequenceStats(gaps=1, skipped=2),
                          "anomaly_counts": ((names.ANOM_MISSING_DONE, 1),)})  # fmt: skip
    run_stream(p, clock, {"outcome": names.HTTP_ERROR, "time_to_first_event_ns": None,
                          "time_to_first_delta_ns": None, "time_to_first_output_ns": None, "usage": Usage(),
                          "events": 0, "deltas": 0},
               provider=names.PROVIDER_ANTHROPIC, surface=names.MESSAGES, request_model="claude-x")  # fmt: skip
    # error classes on the error_type label of both the duration histogram and the streams counter
    run_stream(p, clock, {"outcome": names.HTTP_ERROR, "error_type": "429", "time_to_first_event_ns": None,
                          "time_to_first_delta_ns": None, "time_to_first_output_ns": None, "usage": Usage(),
                          "events": 0, "deltas": 0})  # fmt: skip
    run_stream(p, clock, {"outcome": names.ERROR, "error_type": "overloaded_error"})
    # the failure phase: an in-band error before any delta (the report's others are during output)
    run_stream(p, clock, {"outcome": names.ERROR, "error_type": "server_error", "deltas": 0,
                          "time_to_first_delta_ns": None, "time_to_first_output_ns": None})  # fmt: skip
    # a reasoning stream: its first output well after its first delta, in another bucket
    run_stream(p, clock, {"time_to_first_delta_ns": 50_000_000, "time_to_first_output_ns": 3_000_000_000})
    # one stream still open: the live gauges must agree too
    start = make_start(t_request_ns=clock())
    tracker = FakeTracker(start, clock)
    tracker.t_pull = clock()
    clock.advance(60)
    p.stream_started(start, tracker)
    p._parity_keepalive = tracker  # keep it open (and referenced) during the comparison
    assert p.flush(5.0)


def feed_attributed(p: Any, clock: Clock) -> None:
    """Streams carrying application attributes: a named key (a label), an unnamed one (never a label), over the cap."""
    run_stream(p, clock, {"outcome": names.CUT}, attributes={"tenant.id": True})  # a bool value: "true"
    for tenant in ("acme", "globex", "initech"):
        run_stream(p, clock, attributes={"tenant.id": tenant, "app.feature": "summarize", "user.n": 7})
    run_stream(p, clock, {"response_model": None})  # no attributes, no response model: both labels absent
    assert p.flush(5.0)


# the gen_ai.client.* series each semantic-convention setting must show (both paths alike), and those it must not
_GENAI_OLD = ("gen_ai_client_token_usage_bucket", "gen_ai_client_operation_duration_seconds_count",
              "gen_ai_client_operation_time_per_output_chunk_seconds_bucket",
              "gen_ai_client_operation_time_to_first_chunk_seconds_count")  # fmt: skip
_GENAI_NEW = ("gen_ai_client_inference_duration_seconds_count",
              "gen_ai_client_inference_time_per_output_chunk_seconds_bucket",
              "gen_ai_client_inference_time_to_first_chunk_seconds_count",
              "gen_ai_client_inference_usage_input_tokens_total", "gen_ai_client_inference_usage_output_tokens_total",
              "gen_ai_client_inference_usage_cache_read_input_tokens_total",
              "gen_ai_client_inference_usage_cache_write_input_tokens_total",
              "gen_ai_client_inference_usage_reasoning_output_tokens_total",
              "gen_ai_client_inference_operation_input_tokens_bucket",
              "gen_ai_client_inference_operation_output_tokens_count")  # fmt: skip
_GENAI_SERIES = {names.SEMCONV_DEFAULT: (_GENAI_OLD, _GENAI_NEW), names.SEMCONV_LATEST: (_GENAI_NEW, _GENAI_OLD),
                 names.SEMCONV_DUP: (_GENAI_OLD + _GENAI_NEW, ())}  # fmt: skip


@pytest.mark.parametrize("semconv", names.SEMCONV_MODES)
@pytest.mark.parametrize("metric_attributes", [(), ("tenant.id", "user.n")], ids=["plain", "attributes"])
def test_parity_with_prometheus_metric_reader(
    make_pipeline: Any, clock: Clock, metric_attributes: tuple[str, ...], semconv: str
) -> None:
    settings: dict[str, Any] = {"metric_attributes": metric_attributes, "model_label_cap": 3, "semconv": semconv}
    native_reg = CollectorRegistry()
    native = make_pipeline(registry=native_reg, **settings)
    feed(native, clock)
    feed_attributed(native, clock)

    otel_reg = CollectorRegistry()
    reader = PrometheusMetricReader(disable_target_info=True, scope_info_enabled=False, registry=otel_reg)
    mp = MeterProvider(metric_readers=[reader])
    otel = make_pipeline(registry=CollectorRegistry(), meter_provider=mp, prometheus_metrics=False, **settings)
    assert otel.prometheus is None and otel.otel is not None
    feed(otel, clock)
    feed_attributed(otel, clock)

    a, b = series(native_reg), series(otel_reg)
    # the common labels of docs/telemetry.md, and the named attributes, capped (cap 3: true, acme, globex; then _OTHER)
    streams = [dict(labels) for name, labels in a if name == "otelstream_streams_total"]
    assert {"server_address": "127.0.0.1", "server_port": "8080", "gen_ai_response_model": "gpt-test-2025"}.items() \
        <= streams[0].items()
    tenants = {s.get("tenant_id") for s in streams}
    assert tenants == ({None, "acme", "globex", "true", names.MODEL_OTHER} if metric_attributes else {None})
    assert {s.get("user_n") for s in streams} == ({None, "7"} if metric_attributes else {None})
    assert not [s for s in streams if "app_feature" in s]
    assert set(a) == set(b), (sorted(set(a) - set(b))[:5], sorted(set(b) - set(a))[:5])
    for key, value in a.items():
        assert b[key] == pytest.approx(value), key
    names_seen = {name for name, _ in a}
    durations = ("gen_ai_client_operation_duration_seconds_count", "gen_ai_client_inference_duration_seconds_count")
    classes = {dict(labels).get("error_type") for name, labels in a
               if name == "otelstream_streams_total" or name in durations}  # fmt: skip
    assert classes == {None, "cut", "_OTHER", "rate_limited", "overloaded", "server_error"}
    for name in durations:  # each duration family the setting records has every class
        if name in names_seen:
            assert {dict(labels).get("error_type") for n, labels in a if n == name} == classes
    shown, absent = _GENAI_SERIES[semconv]
    assert set(shown) <= names_seen, sorted(set(shown) - names_seen)
    assert names_seen.isdisjoint(absent), sorted(names_seen & set(absent))
    phases = {(dict(labels)["outcome"], dict(labels).get("phase")) for name, labels in a
              if name == "otelstream_streams_total"}  # fmt: skip
    assert phases == {("completed", None), ("cut", "during_output"), ("http_error", "before_output"),
                      ("error", "during_output"), ("error", "before_output")}  # fmt: skip
    for expected in ("otelstream_streams_total", "otelstream_streams_active",
                     "otelstream_streams_stalled", "otelstream_stream_sequence_anomalies_total",
                     "otelstream_stream_time_to_first_output_seconds_bucket"):  # fmt: skip
        assert expected in names_seen
    mp.shutdown()


def test_otel_instrument_names_units_and_attributes(make_pipeline: Any, clock: Clock) -> None:
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    p = make_pipeline(meter_provider=mp, prometheus_metrics=False)
    run_stream(p, clock, {"outcome": names.FAILED, "error_type": "rate_limit_exceeded"})
    assert p.flush(5.0)
    data = reader.get_metrics_data()
    assert data is not None
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    dur = metrics[names.OTEL_OPERATION_DURATION]
    assert dur.unit == "s"
    (pt,) = dur.data.data_points  # type: ignore[union-attr]
    assert dict(pt.attributes or {}) == {
        "gen_ai.provider.name": "openai", "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-test",
        "server.address": "127.0.0.1", "server.port": 8080, "gen_ai.response.model": "gpt-test-2025",
        "error.type": "rate_limited",
    }  # fmt: skip
    assert tuple(pt.explicit_bounds) == names.DURATION_BUCKETS  # type: ignore[attr-defined]
    tok = metrics[names.OTEL_TOKEN_USAGE]
    assert tok.unit == "{token}"
    assert {dict(q.attributes or {})["gen_ai.token.type"] for q in tok.data.data_points} == {"input", "output"}  # type: ignore[union-attr]
    streams = metrics[names.OTEL_STREAMS]
    (sp,) = streams.data.data_points  # type: ignore[union-attr]
    attrs = dict(sp.attributes or {})  # type: ignore[union-attr]
    assert (attrs["outcome"], attrs["error.type"], sp.value) == ("failed", "rate_limited", 1)  # type: ignore[union-attr]
    assert attrs["phase"] == names.PHASE_DURING_OUTPUT  # the report's deltas came before the failure
    # TTFO in TTFD's buckets: the dashboard sets the two quantiles side by side
    ttfo = metrics[names.OTEL_TIME_TO_FIRST_OUTPUT]
    (tp,) = ttfo.data.data_points  # type: ignore[union-attr]
    assert ttfo.unit == "s" and dict(tp.attributes or {})["surface"] == names.RESPONSES
    assert tuple(tp.explicit_bounds) == names.TTFD_BUCKETS and tp.sum == pytest.approx(0.3)  # type: ignore[attr-defined]
    mp.shutdown()


class _AutoConfiguredReader(PrometheusMetricReader):
    """What opentelemetry-instrument configures for OTEL_METRICS_EXPORTER=prometheus: a subclass."""


@pytest.mark.parametrize("reader_class", [PrometheusMetricReader, _AutoConfiguredReader])
def test_collision_with_reader_on_same_registry_warns(
    make_pipeline: Any, clock: Clock, caplog: pytest.LogCaptureFixture, reader_class: type[PrometheusMetricReader]
) -> None:
    shared = CollectorRegistry()
    reader = reader_class(disable_target_info=True, registry=shared)
    mp = MeterProvider(metric_readers=[reader])
    with caplog.at_level(logging.WARNING, logger="otelstream"):
        p = make_pipeline(registry=shared, meter_provider=mp)
    assert p.prometheus is None and p.otel is not None
    assert any("same registry" in r.message for r in caplog.records)
    run_stream(p, clock)
    assert p.flush(5.0)
    from prometheus_client import generate_latest

    text = generate_latest(shared).decode()
    assert text.count("# TYPE otelstream_streams_total counter") == 1
    mp.shutdown()
