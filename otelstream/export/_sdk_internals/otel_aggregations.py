"""Direct and weighted records into the OpenTelemetry SDK's aggregations.

Through the Metrics API one ``record()`` costs the SDK about 50 000 instructions: it cleans the attribute dict into a
new ``Measurement``, walks consumer, reader storage and view match, and sorts and hashes the attributes again to find
the aggregation. A stream's fourteen points cost more than everything else otelstream does for it. Our attribute
sets are few and fixed (capped models, closed enums), so ``Direct`` finds each set's aggregations once, after one
real ``record()`` has created them, and afterwards hands each measurement straight to them: the aggregation's own
``aggregate()`` (its lock, its exemplar reservoir) with the exemplar filter's answer, as the SDK's consumer would.

Time per output chunk is one point per delta, but the tracker keeps it as per-bucket counts, and the API has no
weighted ``record()``: ``Direct.add`` adds a bucket's count to explicit-bucket histograms at once (sum, count,
min, max, bucket), under the aggregation's lock, exactly as ``aggregate()`` would have done it count times.

This reaches into SDK internals, so it is used only after ``_self_check()`` has shown, on the installed SDK, that
both paths collect to the same points (count, sum, buckets, min, max, attributes, exemplars) as plain API calls.
Anything unexpected (another MeterProvider implementation or SDK layout, a reader with delta temporality, which
swaps its aggregations on collect, an attribute set in overflow, a value the API would reject) makes a call return
False having recorded nothing, and the caller uses the API: slower, never different.
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_left
from collections.abc import Hashable, Mapping
from time import time_ns
from typing import Any

from otelstream.export._sdk_internals.check_once import SelfCheck

_Attrs = Mapping[str, str | int]
_NEVER: tuple[()] = ()  # an attribute set this path must leave to the API for good (delta reader)
_new = object.__new__


@functools.cache  # the SDK's layout does not change in a process; the proxy case asks on every record
def _internals() -> tuple[type, Any, type] | None:
    try:
        from opentelemetry.sdk.metrics._internal._view_instrument_match import _hash_attributes
        from opentelemetry.sdk.metrics._internal.aggregation import _ExplicitBucketHistogramAggregation
        from opentelemetry.sdk.metrics._internal.measurement import Measurement
    except Exception:  # another SDK version or layout: plain records
        return None
    return _ExplicitBucketHistogramAggregation, _hash_attributes, Measurement


class Direct:
    """The fast path for one SDK instrument (histogram or counter). Every method returns False, having recorded
    nothing, when the caller has to use the API instead."""

    def __init__(self, instrument: Any, consumer: Any, exemplar_filter: Any, internals: tuple[type, Any, type]):
        self._instrument = instrument
        self._consumer = consumer
        self._filter = exemplar_filter
        self._bucket_type, self._hash, self._measurement = internals
        self._enabled = getattr(instrument, "_is_enabled", None)
        self._storages: Any = None
        self._targets: dict[Hashable, list[Any] | tuple[()]] = {}

    def record(self, value: float, attributes: _Attrs, key: Hashable, context: Any) -> bool:
        """One measurement, as ``record(value, attributes, context=context)`` (or ``add``) would make it."""
        if not 0 <= value < math.inf or (self._enabled is not None and not self._enabled()):
            return False  # the API warns and drops (negative, NaN, infinite) or knows the meter is off
        aggregations = self._aggregations(key, attributes)
        if not aggregations:
            return False
        now = time_ns()
        # A frozen dataclass: its __init__ would set each field through object.__setattr__ and then copy and clean
        # the attributes again (ours are a fixed dict of strings and one port number); its instance dict is written
        # once instead.
        measurement: Any = _new(self._measurement)
        measurement.__dict__.update(
            value=value, time_unix_nano=now, instrument=self._instrument, context=context, attributes=attributes
        )
        sample = self._filter.should_sample(value, now, attributes, context)
        for aggregation in aggregations:
            aggregation.aggregate(measurement, sample)
        return True

    def add(self, value: float, count: int, attributes: _Attrs, key: Hashable) -> bool:
        """``count`` points of ``value`` into explicit-bucket histograms, no exemplar (the caller recorded one)."""
        if not 0 <= value < math.inf or (self._enabled is not None and not self._enabled()):
            return False
        aggregations = self._aggregations(key, attributes)
        if not aggregations or any(type(a) is not self._bucket_type for a in aggregations):
            return False
        total = value * count
        for agg in aggregations:
            with agg._lock:
                if agg._value is None:  # collected (and reset) since the real record() created it
                    agg._value = agg._get_empty_bucket_counts()
                agg._sum += total
                if agg._record_min_max:
                    agg._min = min(agg._min, value)
                    agg._max = max(agg._max, value)
                agg._value[bisect_left(agg._boundaries, value)] += count
        return True

    def _aggregations(self, key: Hashable, attributes: _Attrs) -> list[Any] | tuple[()] | None:
        storages = self._consumer._reader_storages  # replaced, never mutated, when a reader is added or removed
        if storages is not self._storages:
            self._targets = {}
            self._storages = storages
        found = self._targets.get(key)
        if found is None:
            found = self._find(storages, attributes)
            if found is not None:
                self._targets[key] = found
        return found

    def _find(self, storages: Any, attributes: _Attrs) -> list[Any] | tuple[()] | None:
        """Every reader's aggregation for ``attributes``; None while one is missing (a real record creates it)."""
        found = []
        try:
            for storage in storages.values():
                matches = storage._instrument_view_instrument_matches.get(self._instrument)
                if not matches:
                    return None
                for match in matches:
                    if match._reset_on_collect:
                        return _NEVER  # a delta reader replaces its aggregations on collect: only the API is safe
                    keys = match._view._attribute_keys
                    attrs = dict(attributes) if keys is None else {k: v for k, v in attributes.items() if k in keys}
                    agg = match._attributes_aggregation.get(self._hash(attrs))
                    if agg is None:
                        return None
                    found.append(agg)
        except Exception:  # another layout, or a reader changing mid-walk: the API, this time
            return None
        return found or None


def direct(instrument: Any) -> Direct | None:
    """The fast path for ``instrument`` (an SDK histogram or counter, or the API's proxy for one), or None."""
    if not usable():
        return None
    return _direct(instrument)


def _direct(instrument: Any) -> Direct | None:
    internals = _internals()
    if internals is None:
        return None
    real = getattr(instrument, "_real_instrument", None) or instrument  # the API's proxy, once a provider is set
    consumer = getattr(real, "_measurement_consumer", None)
    exemplar_filter = getattr(getattr(consumer, "_sdk_config", None), "exemplar_filter", None)
    if exemplar_filter is None or not hasattr(consumer, "_reader_storages"):
        return None
    return Direct(real, consumer, exemplar_filter, internals)


def _self_check() -> bool:
    """A histogram and a counter, each through the API and through ``Direct``, inside a sampled span: the
    collected points must be equal, exemplars included (their timestamps aside)."""
    from opentelemetry import trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    span = trace.NonRecordingSpan(
        trace.SpanContext(0x1F, 0x2F, is_remote=False, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    )
    ctx = trace.set_span_in_context(span)
    attrs = {"k": "v"}
    plan = [(0.0005, 3), (0.05, 1), (0.07, 4), (2.0, 2)]
    collected = []
    for fast in (False, True):
        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)  # no atexit hook kept per check
        try:
            meter = provider.get_meter("otelstream.selfcheck")
            hist = meter.create_histogram("h", explicit_bucket_boundaries_advisory=[0.001, 0.01, 0.1])
            counter = meter.create_counter("c")
            d_hist, d_counter = (_direct(hist), _direct(counter)) if fast else (None, None)
            if fast and (d_hist is None or d_counter is None):
                return False
            for i, (value, count) in enumerate(plan):
                first = i == 0  # the first records go through the API (they create the aggregations)
                if d_hist is None or first:
                    hist.record(value, attrs, context=ctx)
                elif not d_hist.record(value, attrs, "k", ctx):
                    return False
                if d_hist is None:
                    for _ in range(count - 1):
                        hist.record(value, attrs)
                elif not d_hist.add(value, count - 1, attrs, "k"):
                    return False
                if d_counter is None or first:
                    counter.add(count, attrs, context=ctx)
                elif not d_counter.record(count, attrs, "k", ctx):
                    return False
            data = reader.get_metrics_data()
            metrics = data.resource_metrics[0].scope_metrics[0].metrics  # type: ignore[union-attr]
            collected.append(sorted((m.name, _point(m.data.data_points[0])) for m in metrics))  # type: ignore[union-attr]
        finally:
            provider.shutdown()
    total = sum(c for _, c in plan)
    hist_point = dict(collected[0])["h"]
    return collected[0] == collected[1] and hist_point[0] == total and bool(hist_point[-1])


def _point(p: Any) -> tuple[Any, ...]:
    # A sum's reservoir keeps a random one of its measurements: compare which span it came from, not its value.
    histogram = hasattr(p, "bucket_counts")
    exemplars = tuple(
        (e.value if histogram else None, e.span_id, e.trace_id, dict(e.filtered_attributes or {}))
        for e in getattr(p, "exemplars", None) or ()
    )
    if histogram:
        return (p.count, p.sum, tuple(p.bucket_counts), p.min, p.max, dict(p.attributes or {}), exemplars)
    return (p.value, dict(p.attributes or {}), exemplars)


def proxy_pending(instrument: Any) -> bool:
    """True for the API's proxy instrument while no global MeterProvider has given it an SDK instrument (ask
    ``direct()`` again later)."""
    return getattr(instrument, "_real_instrument", 0) is None


# whether the direct paths give what the API gives on the installed SDK (checked once per process)
usable = SelfCheck(_self_check)
