"""Canaries for otelstream/export/_sdk_internals/: every private name its inventory lists still exists and means
what the package writes into, on the installed opentelemetry-sdk and prometheus_client; the self-checks pass here
and fail (so the public API is used) when a release changes what they check; and no other module touches those
names. A failure here means a new release changed an internal: re-verify the package against it, update the
inventory's versions, or drop the entry."""

from __future__ import annotations

import ast
import math
import pathlib

import pytest
from opentelemetry import metrics as otel_metrics_api
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, Histogram, generate_latest

import otelstream
from otelstream.export import prometheus
from otelstream.export._sdk_internals import otel_aggregations, prometheus_histogram
from otelstream.export._sdk_internals.check_once import SelfCheck

PACKAGE = pathlib.Path(otelstream.__file__).parent
INTERNALS = PACKAGE / "export" / "_sdk_internals"


# --- opentelemetry-sdk -----------------------------------------------------------------------------------------
def test_otel_private_names_are_where_the_inventory_says() -> None:
    from opentelemetry.sdk.metrics._internal._view_instrument_match import _hash_attributes
    from opentelemetry.sdk.metrics._internal.aggregation import _ExplicitBucketHistogramAggregation
    from opentelemetry.sdk.metrics._internal.measurement import Measurement

    assert otel_aggregations._internals() == (_ExplicitBucketHistogramAggregation, _hash_attributes, Measurement)
    assert {"value", "time_unix_nano", "instrument", "context", "attributes"} <= set(Measurement.__dataclass_fields__)

    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    try:
        hist = mp.get_meter("t").create_histogram("h", explicit_bucket_boundaries_advisory=[0.1, 1.0])
        hist.record(0.5, {"a": "b"})
        consumer = hist._measurement_consumer  # type: ignore[attr-defined]
        assert callable(consumer._sdk_config.exemplar_filter.should_sample)
        (storage,) = consumer._reader_storages.values()
        (match,) = storage._instrument_view_instrument_matches[hist]
        assert match._reset_on_collect is False and match._view._attribute_keys is None
        agg = match._attributes_aggregation[_hash_attributes({"a": "b"})]
        assert type(agg) is _ExplicitBucketHistogramAggregation
        assert hasattr(agg._lock, "__enter__") and callable(agg.aggregate) and callable(agg._get_empty_bucket_counts)
        assert agg._boundaries == (0.1, 1.0) or list(agg._boundaries) == [0.1, 1.0]
        assert list(agg._value) == [0, 1, 0] and agg._sum == 0.5 and agg._record_min_max is True
        assert agg._min == agg._max == 0.5
        assert callable(getattr(hist, "_is_enabled", lambda: True))
    finally:
        mp.shutdown()


def test_otel_api_proxy_names_its_real_instrument() -> None:
    proxy = otel_metrics_api.get_meter_provider().get_meter("t").create_histogram("h")
    if type(proxy).__name__.startswith("_Proxy"):
        assert otel_aggregations.proxy_pending(proxy) is (proxy._real_instrument is None)  # type: ignore[attr-defined]


def test_otel_self_check_passes_on_the_installed_sdk() -> None:
    assert otel_aggregations._self_check() is True
    assert otel_aggregations.usable()


def test_otel_self_check_fails_when_the_aggregation_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if a release counted buckets differently: the check says no, so only the API would be used."""
    monkeypatch.setattr(otel_aggregations, "bisect_left", lambda bounds, v: 0)
    assert otel_aggregations._self_check() is False


# --- prometheus_client -----------------------------------------------------------------------------------------
def test_prometheus_private_names_are_where_the_inventory_says() -> None:
    registry = CollectorRegistry()
    child = Histogram("h", "h", ["k"], registry=registry, buckets=(0.1, 1.0)).labels("v")
    assert child._upper_bounds == [0.1, 1.0, math.inf]
    assert len(child._buckets) == 3 and all(callable(b.inc) and callable(b.set_exemplar) for b in child._buckets)
    assert callable(child._sum.inc) and callable(child._child_samples)
    child.observe(0.5)
    assert [b.get() for b in child._buckets] == [0, 1, 0] and child._sum.get() == 0.5
    assert prometheus_histogram.parts(child) == (child._upper_bounds, child._buckets, child._sum)


def test_prometheus_no_created_sample_through_child_samples() -> None:
    registry = CollectorRegistry()
    prometheus._Histogram("h", "h", ["k"], registry=registry, buckets=(1.0,)).labels("v").observe(0.5)
    prometheus._Counter("c", "c", ["k"], registry=registry).labels("v").inc()
    text = generate_latest(registry).decode()
    assert "h_bucket" in text and "c_total" in text and "_created" not in text


def test_prometheus_self_check_passes_on_the_installed_client() -> None:
    assert prometheus_histogram._self_check() is True
    assert prometheus_histogram.usable()


def test_prometheus_self_check_fails_when_the_buckets_change(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prometheus_histogram, "bisect_left", lambda bounds, v: len(bounds) - 1)
    assert prometheus_histogram._self_check() is False


def test_prometheus_failed_self_check_means_the_public_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prometheus_histogram, "usable", SelfCheck(lambda: False))
    registry = CollectorRegistry()
    child = Histogram("h", "h", ["k"], registry=registry, buckets=(0.1, 1.0)).labels("v")
    found = prometheus_histogram.parts(child)
    assert found is None
    prometheus_histogram.observe(child, found, 0.5, None, 0.0)
    prometheus_histogram.add_buckets(child, found, [(0, 2, 0.1, 0.05), (2, 1, 3.0, 3.0)], None, 0.0)
    sample = registry.get_sample_value
    assert sample("h_count", {"k": "v"}) == 4 and sample("h_bucket", {"k": "v", "le": "0.1"}) == 2
    assert sample("h_sum", {"k": "v"}) == pytest.approx(3.6)


# --- the run-once check --------------------------------------------------------------------------------------
def test_self_check_runs_once_and_a_raising_check_means_no() -> None:
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        return True

    ok = SelfCheck(check)
    assert ok() and ok() and calls == [1]
    ok.disable()
    assert not ok() and calls == [1]

    def broken() -> bool:
        raise ImportError("another SDK layout")

    assert SelfCheck(broken)() is False


# --- nothing else touches them ---------------------------------------------------------------------------------
def _inventory_names() -> set[str]:
    """The private attribute names this package touches on other libraries' objects, read from its own source."""
    found: set[str] = set()
    for path in INTERNALS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    found.add(node.attr)
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr"):
                arg = node.args[1] if len(node.args) > 1 else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("_"):
                    found.add(arg.value)
    return found - {"_parts", "_direct", "_internals", "_self_check", "_find", "_aggregations"}


def test_inventory_lists_every_private_name_the_package_touches() -> None:
    doc = (INTERNALS / "__init__.py").read_text()
    missing = sorted(n for n in _inventory_names() if n not in doc)
    assert not missing, f"private names touched but not in the inventory: {missing}"


def test_no_other_module_touches_those_private_names() -> None:
    # ("_lock" is too common a name: otelstream's own objects have one; span_direct's names stay out for good)
    names = (_inventory_names() - {"_lock"}) | {"_attributes", "_dict", "_immutable", "_end_time"}
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if INTERNALS in path.parents:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith(("opentelemetry.", "prometheus_client"))
                and any(part.startswith("_") for part in node.module.split("."))
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} from {node.module}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr", "setattr"):
                arg = node.args[1] if len(node.args) > 1 else None
                if isinstance(arg, ast.Constant) and arg.value in names:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {arg.value!r}")
            if not (isinstance(node, ast.Attribute) and node.attr in names):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} .{node.attr}")
    assert not offenders, offenders


def test_the_package_is_where_the_pipeline_gets_them() -> None:
    """The sinks use these paths: a stream through a real pipeline takes them (else the canaries guard nothing)."""
    assert prometheus.prometheus_histogram is prometheus_histogram
    from otelstream.export import otel_metrics

    assert otel_metrics.otel_aggregations is otel_aggregations
    assert not (PACKAGE / "export" / "span_direct.py").exists() and not (PACKAGE / "export" / "otel_direct.py").exists()


def test_otel_readers_are_where_the_inventory_says() -> None:
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    from otelstream.export._sdk_internals import otel_readers

    registry = CollectorRegistry()
    reader = PrometheusMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    try:
        readers = getattr(mp, "_metric_readers", None) or mp._sdk_config.metric_readers
        assert list(readers) == [reader]
        assert reader._registry is not None  # type: ignore[attr-defined]
        assert otel_readers.reader_exports_into(mp, reader._registry) is True  # type: ignore[attr-defined]
        assert otel_readers.reader_exports_into(mp, registry) is False
    finally:
        mp.shutdown()
