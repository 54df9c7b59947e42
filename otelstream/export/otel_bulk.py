"""Weighted records into the OpenTelemetry SDK's explicit-bucket histograms.

Time per output chunk is one point per delta, but the tracker keeps it as per-bucket counts, and the OTel Metrics API
has no weighted ``record()``: through the API a 200-delta stream costs 200 SDK records, about 13 µs each (attribute
cleaning, hashing, exemplar filter). With the SDK's own ``MeterProvider`` the same effect is reached at O(buckets):
one real ``record()`` per non-empty bucket (it creates the aggregation and offers the exemplar), then the bucket's
remaining count added to each reader's aggregation directly, under the aggregation's own lock, exactly as
``aggregate()`` would have done it count times.

That reaches into SDK internals, so it is used only after ``_self_check()`` has shown, on the installed SDK, that
the weighted path and plain ``record()`` calls collect to identical points (count, sum, buckets, min, max). Any
mismatch, a missing attribute, another MeterProvider implementation, a View with another aggregation, an attribute
set in overflow: the caller falls back to plain ``record()`` calls, slower but exact.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Mapping
from typing import Any

_Attrs = Mapping[str, str]
# add(value, count, attributes) -> True when all of ``count`` was recorded
BulkAdd = Callable[[float, int, _Attrs], bool]

_checked: list[bool] = []  # [result] once the self-check ran (per process)
_check_lock = threading.Lock()


def _internals() -> tuple[type, Callable[[Any], Any]] | None:
    try:
        from opentelemetry.sdk.metrics._internal._view_instrument_match import _hash_attributes
        from opentelemetry.sdk.metrics._internal.aggregation import _ExplicitBucketHistogramAggregation
    except Exception:  # another SDK version or layout: plain records
        return None
    return _ExplicitBucketHistogramAggregation, _hash_attributes


def bulk_adder(histogram: Any) -> BulkAdd | None:
    """A weighted add for ``histogram`` (an SDK histogram, or the API's proxy for one), or None to use ``record()``.

    The returned function adds ``count`` points of ``value`` for ``attributes`` to the aggregations that already
    exist for them; it returns False (having added nothing) when any reader lacks one, so the caller records the
    points itself. Call ``histogram.record(value, attributes)`` once first: that creates the aggregations."""
    if not usable():
        return None
    return _adder(histogram)


def _adder(histogram: Any) -> BulkAdd | None:
    found = _internals()
    if found is None:
        return None
    agg_type, hash_attributes = found
    hist = getattr(histogram, "_real_instrument", None) or histogram  # the API's proxy, once a provider is set
    consumer = getattr(hist, "_measurement_consumer", None)
    if consumer is None or not hasattr(consumer, "_reader_storages"):
        return None

    def add(value: float, count: int, attributes: _Attrs) -> bool:
        targets: list[Any] = []
        try:  # find every aggregation first: nothing is added unless all of them can take it
            for storage in consumer._reader_storages.values():
                for match in storage._instrument_view_instrument_matches.get(hist, ()):
                    keys = match._view._attribute_keys
                    attrs = dict(attributes) if keys is None else {k: v for k, v in attributes.items() if k in keys}
                    agg = match._attributes_aggregation.get(hash_attributes(attrs))
                    if type(agg) is not agg_type or getattr(match, "_reset_on_collect", False):
                        return False  # not (yet) an explicit-bucket aggregation we can add to: the caller records
                    targets.append(agg)
        except Exception:  # a reader added or changed mid-walk, another layout: the caller records
            return False
        if not targets:
            return False
        total = value * count
        for agg in targets:
            with agg._lock:
                if agg._value is None:  # collected (and reset) since the real record() created it
                    agg._value = agg._get_empty_bucket_counts()
                agg._sum += total
                if agg._record_min_max:
                    agg._min = min(agg._min, value)
                    agg._max = max(agg._max, value)
                agg._value[bisect_left(agg._boundaries, value)] += count
        return True

    return add


def usable() -> bool:
    """Whether the weighted path matches plain records on the installed SDK (checked once per process)."""
    if not _checked:
        with _check_lock:
            if not _checked:
                try:
                    ok = _self_check()
                except Exception:
                    ok = False
                _checked.append(ok)
    return _checked[0]


def _self_check() -> bool:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    bounds = [0.001, 0.01, 0.1]
    attrs = {"k": "v"}
    plan = [(0.0005, 3), (0.05, 1), (0.07, 4), (2.0, 2)]
    points = []
    for weighted in (False, True):
        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)  # no atexit hook kept per check
        try:
            hist = provider.get_meter("otelstream.selfcheck").create_histogram(
                "h", explicit_bucket_boundaries_advisory=bounds
            )
            add = _adder(hist) if weighted else None
            if weighted and add is None:
                return False
            for value, count in plan:
                hist.record(value, attrs)
                if add is None:
                    for _ in range(count - 1):
                        hist.record(value, attrs)
                elif not add(value, count - 1, attrs):
                    return False
            data = reader.get_metrics_data()
            p: Any = data.resource_metrics[0].scope_metrics[0].metrics[0].data.data_points[0]  # type: ignore[union-attr]
            points.append((p.count, p.sum, tuple(p.bucket_counts), p.min, p.max, dict(p.attributes or {})))
        finally:
            provider.shutdown()
    return points[0] == points[1] and points[0][0] == sum(c for _, c in plan)
