"""The weighted OTel histogram path (otelstream/export/otel_bulk.py) collects exactly what per-chunk records do."""

from __future__ import annotations

from typing import Any

import pytest
from exporthelpers import Clock, run_stream
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from prometheus_client import CollectorRegistry

from otelstream import names
from otelstream.export import otel_bulk, otel_metrics

CHUNK = "gen_ai.client.operation.time_per_output_chunk"


def chunk_points(reader: InMemoryMetricReader) -> list[tuple[Any, ...]]:
    out = []
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name != CHUNK:
                    continue
                for p in m.data.data_points:
                    buckets = tuple(getattr(p, "bucket_counts", ()))
                    out.append((dict(p.attributes), p.count, round(p.sum, 9), buckets, p.min, p.max))
    return sorted(out, key=repr)


def feed(p: Any, clock: Clock) -> None:
    bounds = names.TIME_PER_CHUNK_BUCKETS
    counts = [0] * (len(bounds) + 1)
    sums = [0] * (len(bounds) + 1)
    counts[0], sums[0] = 150, 120_000_000  # 150 gaps under 1 ms
    counts[1], sums[1] = 40, 80_000_000
    counts[8], sums[8] = 1, 200_000_000
    counts[-1], sums[-1] = 2, 200_000_000_000
    for _ in range(3):
        run_stream(p, clock, {"chunk_counts": tuple(counts), "chunk_sums_ns": tuple(sums)})
    run_stream(p, clock, {"chunk_counts": (0,) * len(counts), "chunk_sums_ns": (0,) * len(counts)},
               request_model="other-model")  # fmt: skip
    assert p.flush(5.0)


def collect(make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch, *, weighted: bool,
            **provider_kw: Any) -> list[tuple[Any, ...]]:  # fmt: skip
    with monkeypatch.context() as m:
        if not weighted:
            m.setattr(otel_metrics, "bulk_adder", lambda hist: None)
        reader = InMemoryMetricReader(**provider_kw.pop("reader_kw", {}))
        mp = MeterProvider(metric_readers=[reader], **provider_kw)
        p = make_pipeline(registry=CollectorRegistry(), meter_provider=mp, prometheus_metrics=False)
        feed(p, clock)
        points = chunk_points(reader)
        mp.shutdown()
    return points


def test_self_check_passes_on_the_installed_sdk() -> None:
    assert otel_bulk.usable()


def test_weighted_equals_per_chunk_records(make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = collect(make_pipeline, clock, monkeypatch, weighted=False)
    fast = collect(make_pipeline, clock, monkeypatch, weighted=True)
    assert fast == slow
    assert sum(p[1] for p in fast) == 3 * 193  # every chunk counted, none twice


def test_weighted_is_used(make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-chunk loop is skipped: one SDK record per non-empty bucket, not one per chunk."""
    calls: list[float] = []
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    p = make_pipeline(registry=CollectorRegistry(), meter_provider=mp, prometheus_metrics=False)
    hist = p.otel.instruments.instruments[names.PROM_TIME_PER_OUTPUT_CHUNK]
    real = hist.record
    monkeypatch.setattr(hist, "record", lambda v, *a, **k: (calls.append(v), real(v, *a, **k)))
    feed(p, clock)
    assert len(calls) == 3 * 4  # four non-empty buckets per stream
    mp.shutdown()


@pytest.mark.parametrize(
    "provider_kw",
    [
        # a View keeping only some attribute keys: the weighted path must look up the filtered set
        {"views": [View(instrument_name=CHUNK, attribute_keys={"gen_ai.request.model"})]},
        # another aggregation: not ours to add to, the per-chunk records are used
        {"views": [View(instrument_name=CHUNK, aggregation=ExponentialBucketHistogramAggregation())]},
        # delta temporality resets on collect
        {"reader_kw": {"preferred_temporality": {Histogram: AggregationTemporality.DELTA}}},
    ],
    ids=["view-attribute-keys", "view-exponential", "delta-temporality"],
)
def test_views_and_temporality_stay_exact(
    make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch, provider_kw: dict[str, Any]
) -> None:
    def kw() -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else list(v)) for k, v in provider_kw.items()}

    slow = collect(make_pipeline, clock, monkeypatch, weighted=False, **kw())
    fast = collect(make_pipeline, clock, monkeypatch, weighted=True, **kw())
    assert fast == slow and fast


def test_not_an_sdk_histogram() -> None:
    class Foreign:
        def record(self, *a: Any, **k: Any) -> None:
            pass

    assert otel_bulk.bulk_adder(Foreign()) is None


def test_no_aggregation_yet_means_no_weighted_add() -> None:
    """Before a real record() created the aggregation, the add declines (the caller records instead)."""
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()])
    hist = mp.get_meter("t").create_histogram("h")
    add = otel_bulk.bulk_adder(hist)
    assert add is not None
    assert add(0.5, 3, {"a": "b"}) is False
    hist.record(0.5, {"a": "b"})
    assert add(0.5, 3, {"a": "b"}) is True
    mp.shutdown()
