"""The SDK fast path of the OTel metrics sink (otelstream/export/_sdk_internals/otel_aggregations.py) collects
exactly what API calls do, exemplars included, and is really taken."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from prometheus_client import CollectorRegistry

from otelstream import _guard, names
from otelstream.core.report import SequenceStats, Usage
from otelstream.export import otel_metrics
from otelstream.export._sdk_internals import otel_aggregations
from tests.export import harness
from tests.export.harness import Clock, run_stream

CHUNK = "gen_ai.client.operation.time_per_output_chunk"


def all_points(reader: InMemoryMetricReader) -> list[tuple[Any, ...]]:
    """Every point of every instrument, timestamps aside, exemplars included."""
    out = []
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    exemplars = tuple(
                        (e.value, e.span_id, e.trace_id, dict(e.filtered_attributes or {}))
                        for e in getattr(p, "exemplars", None) or ()
                    )
                    if hasattr(p, "bucket_counts"):
                        body: tuple[Any, ...] = (p.count, round(p.sum, 9), tuple(p.bucket_counts), p.min, p.max)
                    else:
                        body = (getattr(p, "value", None), getattr(p, "scale", None))
                    out.append((m.name, dict(p.attributes), body, exemplars))
    return sorted(out, key=repr)


def feed(p: Any, clock: Clock, between: Any = None) -> None:
    def run_stream(*a: Any, **k: Any) -> None:
        # one stream at a time: span ids (caller's thread) and exemplar choices (export thread) draw from one random
        # sequence, so the order of the draws must not depend on thread timing
        harness.run_stream(*a, **k)
        assert p.flush(5.0)

    bounds = names.TIME_PER_CHUNK_BUCKETS
    counts = [0] * (len(bounds) + 1)
    sums = [0] * (len(bounds) + 1)
    counts[0], sums[0] = 150, 120_000_000  # 150 gaps under 1 ms
    counts[1], sums[1] = 40, 80_000_000
    counts[8], sums[8] = 1, 200_000_000
    counts[-1], sums[-1] = 2, 200_000_000_000
    chunks = {"chunk_counts": tuple(counts), "chunk_sums_ns": tuple(sums)}
    for i in range(3):
        run_stream(p, clock, {**chunks, "usage": Usage(10 + i, 5 * i, 2, 0, 1)})
    if between is not None:  # a collection mid-way (a delta reader swaps its aggregations there)
        assert p.flush(5.0)
        between()
    run_stream(p, clock, {"outcome": names.CUT, "sequence": SequenceStats(gaps=1, skipped=2),
                          "anomaly_counts": ((names.ANOM_MISSING_DONE, 1),)})  # fmt: skip
    run_stream(p, clock, {"chunk_counts": (0,) * len(counts), "chunk_sums_ns": (0,) * len(counts)},
               request_model="other-model")  # fmt: skip
    run_stream(p, clock, {"outcome": names.HTTP_ERROR, "time_to_first_event_ns": None,
                          "time_to_first_delta_ns": None, "usage": Usage(), "events": 0},
               provider=names.PROVIDER_ANTHROPIC, surface=names.MESSAGES, request_model="claude-x")  # fmt: skip
    run_stream(p, clock, {**chunks, "usage": Usage(7, 3, None, None, None)})
    assert p.flush(5.0)


def collect(make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch, *, fast: bool,
            **provider_kw: Any) -> list[tuple[Any, ...]]:  # fmt: skip
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(otel_aggregations, "direct", lambda inst: None)
        # The same random sequence in both runs: the same trace and span ids, the same reservoir choices (the
        # self-checks draw too, once per process: before the seed)
        assert otel_aggregations.usable()
        random.seed(20261201)
        reader = InMemoryMetricReader(**provider_kw.pop("reader_kw", {}))
        mp = MeterProvider(metric_readers=[reader], **provider_kw)
        p = make_pipeline(registry=CollectorRegistry(), meter_provider=mp, prometheus_metrics=False)
        first: list[tuple[Any, ...]] = []
        feed(p, clock, lambda: first.extend(all_points(reader)))
        points = first + all_points(reader)
        mp.shutdown()
    return points


def test_self_check_passes_on_the_installed_sdk() -> None:
    assert otel_aggregations.usable()


def test_direct_equals_api(make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = collect(make_pipeline, clock, monkeypatch, fast=False)
    fast = collect(make_pipeline, clock, monkeypatch, fast=True)
    assert fast == slow
    chunk = [p for p in fast if p[0] == CHUNK]
    assert sum(p[2][0] for p in chunk) == (3 + 4) * 193  # every chunk once: at the mid-way collection, at the end
    assert {p[0] for p in fast if not p[3]} == {"otelstream.streams.active", "otelstream.streams.stalled"}  # observed


def test_direct_is_used(make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first stream of a label set, no API call at all: the SDK's record() and add() are skipped."""
    calls: list[str] = []

    def counting(real: Any) -> Any:
        def counted(self: Any, *a: Any, **k: Any) -> None:
            calls.append(self.name)
            real(self, *a, **k)

        return counted

    monkeypatch.setattr(Histogram, "record", counting(Histogram.record))
    monkeypatch.setattr(Counter, "add", counting(Counter.add))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    p = make_pipeline(registry=CollectorRegistry(), meter_provider=mp, prometheus_metrics=False)
    run_stream(p, clock)
    assert p.flush(5.0)
    first = len(calls)
    assert first > 5
    for _ in range(3):
        run_stream(p, clock)
    assert p.flush(5.0)
    assert len(calls) == first
    count = [pt for pt in all_points(reader) if pt[0] == "gen_ai.client.operation.duration"]
    assert [pt[2][0] for pt in count] == [4]
    mp.shutdown()


@pytest.mark.parametrize(
    "provider_kw",
    [
        # a View keeping only some attribute keys: the direct path must look up the filtered set
        {"views": [View(instrument_name="*", attribute_keys={"gen_ai.request.model"})]},
        # another aggregation: aggregate() is its own, the weighted add declines (per-chunk records)
        {"views": [View(instrument_name=CHUNK, aggregation=ExponentialBucketHistogramAggregation())]},
        # delta temporality swaps the aggregations on collect: the API only
        {"reader_kw": {"preferred_temporality": dict.fromkeys((Histogram, Counter), AggregationTemporality.DELTA)}},
    ],
    ids=["view-attribute-keys", "view-exponential", "delta-temporality"],
)
def test_views_and_temporality_stay_exact(
    make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch, provider_kw: dict[str, Any]
) -> None:
    def kw() -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else list(v)) for k, v in provider_kw.items()}

    slow = collect(make_pipeline, clock, monkeypatch, fast=False, **kw())
    fast = collect(make_pipeline, clock, monkeypatch, fast=True, **kw())
    assert fast == slow and fast


def test_not_an_sdk_instrument() -> None:
    class Foreign:
        def record(self, *a: Any, **k: Any) -> None:
            pass

    assert otel_aggregations.direct(Foreign()) is None


def test_declines_until_the_api_created_the_aggregation_and_for_what_the_api_rejects() -> None:
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()])
    hist = mp.get_meter("t").create_histogram("h")
    direct = otel_aggregations.direct(hist)
    assert direct is not None
    attrs, ctx = {"a": "b"}, trace.set_span_in_context(trace.INVALID_SPAN)
    assert direct.record(0.5, attrs, "a", ctx) is False
    assert direct.add(0.5, 3, attrs, "a") is False
    hist.record(0.5, attrs)
    assert direct.record(0.5, attrs, "a", ctx) is True
    assert direct.add(0.5, 3, attrs, "a") is True
    for bad in (-1.0, math.nan, math.inf):  # the API warns and drops these
        assert direct.record(bad, attrs, "a", ctx) is False
        assert direct.add(bad, 2, attrs, "a") is False
    mp.shutdown()


def test_weighted_add_equals_records() -> None:
    """``add`` alone (no record of the same value before it) gives what ``count`` records give: min, max too."""
    got = []
    for weighted in (False, True):
        reader = InMemoryMetricReader()
        mp = MeterProvider(metric_readers=[reader])
        hist = mp.get_meter("t").create_histogram("h", explicit_bucket_boundaries_advisory=[0.1, 1.0])
        hist.record(0.5, {"a": "b"})
        direct = otel_aggregations.direct(hist)
        assert direct is not None
        for value in (2.0, 0.01):
            if weighted:
                assert direct.add(value, 3, {"a": "b"}, "a")
            else:
                for _ in range(3):
                    hist.record(value, {"a": "b"})
        got.append([p[2] for p in all_points(reader)])
        mp.shutdown()
    assert got[0] == got[1] == [(7, 6.53, (3, 1, 3), 0.01, 2.0)]


def test_a_failing_direct_path_falls_back_to_the_api(
    make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SDK the self-check did not foresee makes ``Direct`` raise: the error is reported, the API records instead
    (the same points), and that instrument stays on the API."""
    expected = collect(make_pipeline, clock, monkeypatch, fast=False)

    def broken(*a: Any, **k: Any) -> bool:
        raise AttributeError("_attributes_aggregation")

    monkeypatch.setattr(otel_aggregations.Direct, "record", broken)
    monkeypatch.setattr(otel_aggregations.Direct, "add", broken)
    monkeypatch.delenv("OTELSTREAM_RAISE_INTERNAL_ERRORS", raising=False)
    errors = len(_guard.errors)
    assert collect(make_pipeline, clock, monkeypatch, fast=True) == expected
    reported = _guard.errors[errors:]
    del _guard.errors[errors:]
    assert reported and {where for where, _ in reported} == {"export.otel_aggregations"}
    assert len(reported) <= len(otel_metrics.SPECS)  # once per instrument, then the API only


def test_every_reader_gets_every_point(make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two readers on one provider (say, Prometheus and OTLP): the direct path feeds each its own aggregation."""
    got = []
    for fast in (False, True):
        with monkeypatch.context() as m:
            if not fast:
                m.setattr(otel_aggregations, "direct", lambda inst: None)
            assert otel_aggregations.usable()
            random.seed(7)
            readers = [InMemoryMetricReader(), InMemoryMetricReader()]
            mp = MeterProvider(metric_readers=readers)
            p = make_pipeline(registry=CollectorRegistry(), meter_provider=mp, prometheus_metrics=False)
            feed(p, clock)
            got.append([all_points(r) for r in readers])
            mp.shutdown()
    assert got[0] == got[1]
    # the same points in both readers (each sum's reservoir picks its own random exemplar)
    assert [p[:3] for p in got[1][0]] == [p[:3] for p in got[1][1]] and got[1][0]
