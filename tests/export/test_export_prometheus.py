"""Prometheus sink: exact series, buckets, chunk merge, exemplars, model cap, live gauges, drops, re-creation."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from otelstream import names
from otelstream.core.report import SequenceStats, Usage
from otelstream.export._sdk_internals import prometheus_histogram
from tests.export.harness import (
    COMMON_LABELS,
    LIVE_LABELS,
    Clock,
    Ended,
    FakeTracker,
    make_report,
    make_start,
    run_stream,
)

COMMON = COMMON_LABELS


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    # the live gauges and drops carry no response model (the report has not come yet)
    live = name.startswith(("otelstream_streams_active", "otelstream_streams_stalled", "otelstream_reports_dropped"))
    return registry.get_sample_value(name, {**(LIVE_LABELS if live else COMMON), **labels})


def chunk_report_fields(gaps_s: list[float]) -> dict[str, Any]:
    """Local buckets as the tracker keeps them, for the given gaps between deltas."""
    bounds = names.TIME_PER_CHUNK_BUCKETS
    counts = [0] * (len(bounds) + 1)
    sums = [0] * (len(bounds) + 1)
    for g in gaps_s:
        ns = round(g * 1e9)
        i = next((k for k, b in enumerate(bounds) if ns <= round(b * 1e9)), len(bounds))
        counts[i] += 1
        sums[i] += ns
    return {"chunk_counts": tuple(counts), "chunk_sums_ns": tuple(sums)}


def test_completed_stream_series(make_pipeline: Any, clock: Clock, registry: CollectorRegistry) -> None:
    p = make_pipeline()
    run_stream(p, clock)
    assert p.flush(5.0)
    r = registry
    assert sample(r, "otelstream_streams_total", surface="responses", outcome="completed", error_type="", phase="") == 1
    assert sample(r, "gen_ai_client_operation_duration_seconds_count", error_type="") == 1
    assert sample(r, "gen_ai_client_operation_duration_seconds_sum", error_type="") == 1.5
    assert sample(r, "gen_ai_client_operation_duration_seconds_bucket", error_type="", le="1.28") == 0
    assert sample(r, "gen_ai_client_operation_duration_seconds_bucket", error_type="", le="2.56") == 1
    assert sample(r, "gen_ai_client_token_usage_sum", gen_ai_token_type="input") == 10
    assert sample(r, "gen_ai_client_token_usage_sum", gen_ai_token_type="output") == 5
    assert sample(r, "gen_ai_client_token_usage_bucket", gen_ai_token_type="output", le="16.0") == 1
    assert sample(r, "gen_ai_client_token_usage_bucket", gen_ai_token_type="output", le="4.0") == 0
    # TTFT of 0.2 s lands in le=0.32, not le=0.16 (the acceptance check)
    assert sample(r, "gen_ai_client_operation_time_to_first_chunk_seconds_bucket", le="0.16") == 0
    assert sample(r, "gen_ai_client_operation_time_to_first_chunk_seconds_bucket", le="0.32") == 1
    assert sample(r, "otelstream_stream_time_to_first_event_seconds_count", surface="responses") == 1
    # TTFO, in TTFD's buckets (the panel compares the two): 0.3 s, the report's, in (0.25, 0.32]
    assert sample(r, "otelstream_stream_time_to_first_output_seconds_count", surface="responses") == 1
    assert sample(r, "otelstream_stream_time_to_first_output_seconds_bucket", surface="responses", le="0.25") == 0
    assert sample(r, "otelstream_stream_time_to_first_output_seconds_bucket", surface="responses", le="0.32") == 1
    assert sample(r, "otelstream_stream_max_wait_seconds_sum", surface="responses") == 0.2
    assert sample(r, "otelstream_streams_active", surface="responses") == 0
    assert sample(r, "otelstream_streams_stalled", surface="responses") == 0


def test_bad_outcome_error_type_label_and_no_ttft(
    make_pipeline: Any, clock: Clock, registry: CollectorRegistry
) -> None:
    p = make_pipeline()
    no_ttfd = {"time_to_first_delta_ns": None, "time_to_first_output_ns": None}
    run_stream(p, clock, {"outcome": names.ERROR, "error_type": "server_error", **no_ttfd})
    run_stream(
        p, clock,
        {"outcome": names.HTTP_ERROR, "error_type": "529", "time_to_first_event_ns": None, **no_ttfd,
         "usage": Usage(), "events": 0},
    )  # fmt: skip
    run_stream(p, clock, {"outcome": names.ERROR, "error_type": "tool_use_failed", **no_ttfd})
    assert p.flush(5.0)
    r = registry
    # error_type takes the error class (a closed set), never the provider's code nor the outcome
    assert sample(r, "gen_ai_client_operation_duration_seconds_count", error_type="server_error") == 1
    assert sample(r, "gen_ai_client_operation_duration_seconds_count", error_type="overloaded") == 1
    assert sample(r, "gen_ai_client_operation_duration_seconds_count", error_type="_OTHER") == 1
    for value in ("error", "http_error", "529", "tool_use_failed"):
        assert sample(r, "gen_ai_client_operation_duration_seconds_count", error_type=value) is None
    # the same label on the streams counter
    # and the failure phase beside it: the error came after the report's deltas, an http_error before any output
    assert sample(r, "otelstream_streams_total", surface="responses", outcome="error", error_type="server_error",
                  phase="during_output") == 1  # fmt: skip
    assert sample(r, "otelstream_streams_total", surface="responses", outcome="http_error",
                  error_type="overloaded", phase="before_output") == 1  # fmt: skip
    assert sample(r, "gen_ai_client_operation_time_to_first_chunk_seconds_count") is None
    assert sample(r, "otelstream_stream_time_to_first_output_seconds_count", surface="responses") is None
    assert sample(r, "otelstream_stream_max_wait_seconds_count", surface="responses") == 2  # not the http_error
    assert sample(r, "gen_ai_client_token_usage_count", gen_ai_token_type="input") == 2


def test_resumed_stream_stays_out_of_ttft(make_pipeline: Any, clock: Clock, registry: CollectorRegistry) -> None:
    p = make_pipeline()
    run_stream(p, clock, resumed=True)
    assert p.flush(5.0)
    assert sample(registry, "gen_ai_client_operation_time_to_first_chunk_seconds_count") is None
    assert sample(registry, "otelstream_stream_time_to_first_output_seconds_count", surface="responses") is None
    assert sample(registry, "otelstream_streams_total", surface="responses", outcome="completed", error_type="",
                  phase="") == 1  # fmt: skip


def test_anomaly_counters(make_pipeline: Any, clock: Clock, registry: CollectorRegistry) -> None:
    p = make_pipeline()
    seq = SequenceStats(first=0, last=20, gaps=2, skipped=5, duplicates=1, bad_start=True)
    counts = ((names.ANOM_TRAILING_DONE, 1), (names.ANOM_UNKNOWN_EVENT, 3), (names.ANOM_SEQUENCE_GAP, 2))
    run_stream(p, clock, {"sequence": seq, "anomaly_counts": counts})
    assert p.flush(5.0)
    r = registry
    seq_name = "otelstream_stream_sequence_anomalies_total"
    assert sample(r, seq_name, surface="responses", kind="gap") == 2
    assert sample(r, seq_name, surface="responses", kind="duplicate") == 1
    assert sample(r, seq_name, surface="responses", kind="bad_start") == 1
    assert sample(r, seq_name, surface="responses", kind="out_of_order") is None
    an = "otelstream_stream_anomalies_total"
    assert sample(r, an, surface="responses", kind="trailing_done") == 1
    assert sample(r, an, surface="responses", kind="unknown_event") == 3
    assert sample(r, an, surface="responses", kind="sequence_gap") is None  # has its own family


def test_time_per_chunk_merge_is_exact(make_pipeline: Any, clock: Clock, registry: CollectorRegistry) -> None:
    gaps = [0.0005, 0.001, 0.002, 0.0025, 0.03, 0.03, 0.05, 0.2, 0.32, 100.0]
    p = make_pipeline()
    run_stream(p, clock, chunk_report_fields(gaps))
    assert p.flush(5.0)
    name = "gen_ai_client_operation_time_per_output_chunk_seconds"
    assert sample(registry, name + "_count") == len(gaps)
    assert sample(registry, name + "_sum") == pytest.approx(sum(gaps))
    expect = {"0.001": 2, "0.0025": 4, "0.005": 4, "0.02": 4, "0.04": 6, "0.08": 7, "0.16": 7, "0.32": 9,
              "81.92": 9, "+Inf": 10}  # fmt: skip
    for le, n in expect.items():
        assert sample(registry, name + "_bucket", le=le) == n, le


def test_exemplars_in_openmetrics_and_both_parsers(
    make_pipeline: Any, clock: Clock, registry: CollectorRegistry
) -> None:
    p = make_pipeline()
    handle, _, _ = run_stream(p, clock, chunk_report_fields([0.01, 0.02]))
    assert p.flush(5.0)
    ctx = handle.span.get_span_context()
    om = generate_openmetrics(registry).decode()
    exemplars = [s.exemplar for fam in parse_openmetrics(om) for s in fam.samples if s.exemplar is not None]
    assert exemplars, "no exemplars in the OpenMetrics exposition"
    for ex in exemplars:
        assert ex.labels == {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}
    fams = {f.name for f in parse_openmetrics(om)}
    text = {f.name for f in parse_text(generate_latest(registry).decode())}
    for fam in ("gen_ai_client_operation_duration_seconds", "otelstream_streams", "otelstream_streams_active"):
        assert fam in fams and fam in text
    by_name = {f.name: f for f in parse_openmetrics(om)}
    assert any(s.exemplar is not None for s in by_name["gen_ai_client_operation_time_per_output_chunk_seconds"].samples)


def test_no_exemplar_when_not_sampled(clock: Clock, registry: CollectorRegistry, make_pipeline: Any) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    p = make_pipeline(tracer_provider=TracerProvider(sampler=ALWAYS_OFF))
    run_stream(p, clock)
    assert p.flush(5.0)
    om = generate_openmetrics(registry).decode()
    assert "trace_id" not in om


def test_model_cap_allowlist_and_length(make_pipeline: Any, clock: Clock, registry: CollectorRegistry) -> None:
    p = make_pipeline(model_label_cap=2, model_allowlist="pinned", model_label_max_length=8)
    for model in ("m1", "m2", "m3", "m4", "pinned", "m1", "a-very-long-model-name"):
        run_stream(p, clock, request_model=model)
    run_stream(p, clock, request_model=None)
    assert p.flush(5.0)
    per_model: dict[str, float] = {}
    for fam in registry.collect():
        if fam.name == "otelstream_streams":
            for s in fam.samples:
                if s.name.endswith("_total"):
                    m = s.labels[names.LABEL_MODEL]
                    per_model[m] = per_model.get(m, 0) + s.value
    assert per_model == {"m1": 2, "m2": 1, names.MODEL_OTHER: 3, "pinned": 1, names.MODEL_UNKNOWN: 1}


def test_no_created_series_and_the_applications_metrics_keep_theirs(
    make_pipeline: Any, clock: Clock, registry: CollectorRegistry
) -> None:
    """The OTel exporter makes no `_created` series, so neither does the native sink; prometheus_client's switch is
    process-wide, so it is left alone: an application counter in the same registry keeps its `_created`."""
    mine = Counter("app_requests", "the application's own", registry=registry)
    mine.inc()
    p = make_pipeline()
    run_stream(p, clock)
    assert p.flush(5.0)
    text = generate_latest(registry).decode()
    assert "otelstream_streams_total{" in text
    created = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if "_created" in line.split(" ")[0]}
    assert created == {"app_requests_created"}


def test_pipeline_twice_same_registry(make_pipeline: Any, clock: Clock, registry: CollectorRegistry) -> None:
    p1 = make_pipeline()
    run_stream(p1, clock)
    p1.shutdown()
    p2 = make_pipeline()
    run_stream(p2, clock)
    assert p2.flush(5.0)
    assert sample(registry, "otelstream_streams_total", surface="responses", outcome="completed", error_type="",
                  phase="") == 2  # fmt: skip


def test_pipeline_again_on_the_same_registry_takes_its_model_settings(
    make_pipeline: Any, clock: Clock, registry: CollectorRegistry
) -> None:
    """The registry keeps one cap (its series stay bounded); a later pipeline's allow-list and cap apply to it."""
    p1 = make_pipeline(model_label_cap=0)
    run_stream(p1, clock, request_model="m1")
    p1.shutdown()
    p2 = make_pipeline(model_label_cap=1, model_allowlist="pinned")
    for model in ("pinned", "m2", "m3"):
        run_stream(p2, clock, request_model=model)
    assert p2.flush(5.0)
    streams = next(f for f in registry.collect() if f.name == "otelstream_streams")
    models = {s.labels[names.LABEL_MODEL] for s in streams.samples}
    assert models == {names.MODEL_OTHER, "pinned", "m2"}


def test_collision_warns_instead_of_crashing(
    make_pipeline: Any, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    taken = CollectorRegistry()
    Counter(names.PROM_STREAMS, "someone else's", registry=taken)
    with caplog.at_level(logging.WARNING, logger="otelstream"):
        p = make_pipeline(registry=taken)
    assert p.prometheus is None
    assert any("Prometheus metrics disabled" in r.message for r in caplog.records)
    run_stream(p, clock)  # spans still work
    assert p.flush(5.0)
    # nothing of ours was left half-registered
    assert taken.get_sample_value("gen_ai_client_operation_duration_seconds_count") is None


def test_live_gauges_right_at_any_moment(make_pipeline: Any, clock: Clock, registry: CollectorRegistry) -> None:
    p = make_pipeline(stall_threshold_s=30)
    starts = [make_start(t_request_ns=clock()) for _ in range(3)]
    trackers = [FakeTracker(s, clock) for s in starts]
    handles = [p.stream_started(s, t) for s, t in zip(starts, trackers, strict=True)]
    active = ("otelstream_streams_active", {"surface": "responses"})
    stalled = ("otelstream_streams_stalled", {"surface": "responses"})
    assert sample(registry, active[0], **active[1]) == 3
    assert sample(registry, stalled[0], **stalled[1]) == 0
    trackers[0].t_pull = clock()  # waiting inside the SDK
    trackers[1].t_pull = 0  # not pulling: backpressure, never a stall
    clock.advance(31)
    assert sample(registry, stalled[0], **stalled[1]) == 1
    trackers[0].t_pull = 0  # the event arrived
    assert sample(registry, stalled[0], **stalled[1]) == 0
    trackers[2].ended = True
    p.stream_finished(Ended(make_report(starts[2], t_end_ns=clock())), handles[2])
    assert sample(registry, active[0], **active[1]) == 2  # before any flush: the gauge does not wait for export


def test_full_queue_counts_dropped(
    make_pipeline: Any, clock: Clock, registry: CollectorRegistry, span_exporter: InMemorySpanExporter
) -> None:
    import threading

    p = make_pipeline(queue_size=2)
    release = threading.Event()
    original = p.spans.finish

    def blocked(report: Any, handle: Any) -> None:
        release.wait(10)
        original(report, handle)

    p.spans.finish = blocked  # type: ignore[method-assign]
    for _ in range(10):
        run_stream(p, clock)
        # each report recorded before the next: a queue of 2 may otherwise overflow on the caller's side as well
        assert p.flush_metrics(time.monotonic() + 5.0)
    assert not p.flush(0.2)  # the span queue is stuck
    # a blocked span export costs spans only: every stream counted, the spans beyond the queue counted as dropped
    done = sample(registry, "otelstream_streams_total", surface="responses", outcome="completed", error_type="",
                  phase="")  # fmt: skip
    dropped = sample(registry, "otelstream_reports_dropped_total")
    assert done == 10
    assert dropped is not None and 7 <= dropped <= 8  # one span in hand (maybe not yet taken), two queued
    release.set()
    assert p.flush(5.0)
    assert len(span_exporter.get_finished_spans()) + dropped == 10


@pytest.mark.parametrize("with_exemplar", [False, True])
def test_direct_observe_equals_prometheus_client_observe(with_exemplar: bool) -> None:
    """The sink writes histogram observations into the child's bucket values itself (no linear scan, no exemplar
    re-validation): the exposition must equal what ``Histogram.observe`` produces, on and around every bound."""
    bounds = names.DURATION_BUCKETS
    values = [0.0, -1.0, 1e-12, 1e9, math.inf, math.nan, *bounds, *(math.nextafter(b, math.inf) for b in bounds)]
    values += [math.nextafter(b, 0.0) for b in bounds]
    exemplar = {"trace_id": "1" * 32, "span_id": "2" * 16} if with_exemplar else None
    out = []
    for direct in (True, False):
        registry = CollectorRegistry()
        child = Histogram("h", "h", ["model"], registry=registry, buckets=bounds).labels("m")
        parts = prometheus_histogram.parts(child)
        assert parts is not None  # the installed prometheus_client has the internals the sink writes into
        for v in values:
            if direct:
                prometheus_histogram.observe(child, parts, v, exemplar, 1_700_000_000.0)
            else:
                child.observe(v, exemplar)
        # the exemplar timestamps differ (now vs time.time()): compare everything else
        text = generate_openmetrics(registry).decode()
        out.append([line.split(" # ")[0] + (" # " + line.split(" # ")[1].rsplit(" ", 1)[0] if " # " in line else "")
                    for line in text.splitlines() if not line.startswith("h_created")])  # fmt: skip
    assert out[0] == out[1]
    assert (" # {" in "\n".join(out[0])) is with_exemplar


def test_direct_observe_falls_back_without_the_internals() -> None:
    changed = Histogram("h", "h", ["model"], registry=CollectorRegistry()).labels("m")
    changed._buckets = ()  # as if prometheus_client had changed: not a list of values
    assert prometheus_histogram.parts(changed) is None
    registry = CollectorRegistry()
    prometheus_histogram.observe(Histogram("g", "g", registry=registry), None, 0.5, None, 0.0)
    assert registry.get_sample_value("g_count") == 1
    assert registry.get_sample_value("g_bucket", {"le": "0.5"}) == 1
