"""The OTel metrics sink: the same instruments through the OTel Metrics API (cumulative, explicit buckets).

Semantics come from ``points.py``, shared with the Prometheus sink, so an OTel ``PrometheusMetricReader`` (or an
OTLP pipeline into a Collector's Prometheus exporter) yields the same series the native sink does. Attribute keys
are the dotted names of ``names.OTEL_ATTR_BY_LABEL``; an empty label value means the attribute is absent.

Instruments are created once per MeterProvider and cached: the SDK warns about a second registration of the same
instrument, and the observable gauges' callback reads the open streams of every pipeline attached to it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from otelstream import __version__, _guard, names
from otelstream.export._sdk_internals import otel_aggregations
from otelstream.export.handle import StreamHandle
from otelstream.export.labels import LabelTables
from otelstream.export.points import DEFAULT_SCHEMA, SPECS, Measures, Schema
from otelstream.export.watchdog import LiveStreams

_PORT = names.LABEL_SERVER_PORT


def attributes(
    family: str, label_values: tuple[str, ...], schema: Schema = DEFAULT_SCHEMA
) -> dict[str, str | int]:
    """The OTel attributes of one label tuple: dotted keys, empty values absent, ``server.port`` an int (the
    semantic conventions' type; the Prometheus exporter writes it as the same text)."""
    keys = schema.otel_keys
    return {
        keys[k]: int(v) if k == _PORT else v
        for k, v in zip(schema.labelnames[family], label_values, strict=True)
        if v != ""
    }


class OtelInstruments:
    """A meter provider's instruments, and its label tables shared by every pipeline that records into it."""

    def __init__(self, meter_provider: MeterProvider | None, tables: LabelTables) -> None:
        meter = metrics.get_meter(names.TRACER_NAME, __version__, meter_provider=meter_provider)
        self.tables = tables
        self.sources: weakref.WeakSet[LiveStreams] = weakref.WeakSet()
        self.instruments: dict[str, Any] = {}
        for spec in SPECS:
            if spec.kind == "histogram":
                inst: Any = meter.create_histogram(
                    spec.otel, unit=spec.unit, description=spec.doc,
                    explicit_bucket_boundaries_advisory=list(spec.buckets),
                )  # fmt: skip
            elif spec.kind == "counter":
                inst = meter.create_counter(spec.otel, unit=spec.unit, description=spec.doc)
            elif spec.kind == "last":
                inst = meter.create_gauge(spec.otel, unit=spec.unit, description=spec.doc)
            else:
                # An up-down count observed at collection time: exact at any moment, like the native gauge.
                inst = meter.create_observable_up_down_counter(
                    spec.otel, callbacks=[self._callback(spec.prom)], unit=spec.unit, description=spec.doc
                )
            self.instruments[spec.prom] = inst

    def _callback(self, family: str) -> Any:
        stalled = family == names.PROM_STREAMS_STALLED
        ref = weakref.ref(self)

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            me = ref()
            if me is None:
                return []
            # summed per attribute set: each pipeline's label tuples are in its own schema (metric_attributes may
            # differ between instrument() calls on one meter provider)
            total: dict[frozenset[tuple[str, str | int]], tuple[dict[str, str | int], int]] = {}
            for source in list(me.sources):
                counts = source.counts()[1 if stalled else 0]
                for k, v in counts.items():
                    attrs = attributes(family, k, source.schema)
                    key = frozenset(attrs.items())
                    total[key] = (attrs, total[key][1] + v if key in total else v)
            return [Observation(v, attrs) for attrs, v in total.values()]

        return observe


_instruments: weakref.WeakKeyDictionary[Any, OtelInstruments] = weakref.WeakKeyDictionary()
_global_instruments: list[OtelInstruments] = []
_lock = threading.Lock()


def instruments_for(meter_provider: MeterProvider | None, tables: LabelTables) -> OtelInstruments:
    """The cached instruments of ``meter_provider`` (None: the global one); ``tables`` are the label tables of
    instruments created now, an existing provider keeps its own."""
    with _lock:
        if meter_provider is None:
            if not _global_instruments:
                _global_instruments.append(OtelInstruments(None, tables))
            return _global_instruments[0]
        inst = _instruments.get(meter_provider)
        if inst is None:
            inst = _instruments[meter_provider] = OtelInstruments(meter_provider, tables)
        return inst


class OtelMetricsSink:
    def __init__(self, instruments: OtelInstruments, live: LiveStreams, schema: Schema = DEFAULT_SCHEMA) -> None:
        self.instruments = instruments
        self.schema = schema
        self._i = instruments.instruments
        instruments.sources.add(live)
        self._live = live
        # Per instrument, the SDK fast path (_sdk_internals.otel_aggregations), or None where only the API may be used.
        self._direct: dict[str, otel_aggregations.Direct | None] = {}
        # The label sets are bounded (capped models, closed enums): each one's attribute dict is built once and then
        # shared by every record (the SDK only reads it). Only the export thread uses this.
        self._attrs: dict[tuple[str, tuple[str, ...]], dict[str, str | int]] = {}
        # per common label set, (family, own label values) -> the series' key: built once, not per report
        self._keys: dict[tuple[str, ...], dict[tuple[str, tuple[str, ...]], tuple[str, tuple[str, ...]]]] = {}

    def close(self) -> None:
        self.instruments.sources.discard(self._live)

    def record(self, measures: Measures, handle: StreamHandle, common: tuple[str, ...]) -> None:
        """One report's ``measures`` under the stream's ``common`` label values."""
        # Recording under the stream span's context lets the SDK's trace-based exemplar filter link the span.
        ctx = trace.set_span_in_context(handle.span)
        keys = self._keys.get(common)
        if keys is None:
            keys = self._keys[common] = {}
        for family, own, value in measures.points:
            key = keys.get((family, own))
            if key is None:
                key = keys[(family, own)] = (family, (*common, *own))
            self._record(family, key, int(value) if family in _COUNTERS else value, ctx)
        for family, own, value in measures.last:
            self._i[family].set(value, self._attributes((family, (*common, *own))), context=ctx)
        for family in measures.chunk_families:
            key = (family, common)
            # Each bucket's mean, count times (exact placement, count and sum): one record (it carries the exemplar
            # context), then the rest weighted when the SDK allows it (otel_aggregations), else one record each.
            for _, count, _, mean in measures.merge:
                self._record(family, key, mean, ctx)
                if count > 1 and not self._add(family, key, mean, count - 1):
                    for _ in range(count - 1):
                        self._i[family].record(mean, self._attributes(key))

    def _record(self, family: str, key: tuple[str, tuple[str, ...]], value: float, ctx: Any) -> None:
        attrs = self._attributes(key)
        direct = self._fast(family)
        if direct is not None:
            try:
                if direct.record(value, attrs, key, ctx):
                    return
            except Exception as exc:
                self._direct_failed(family, exc)
        if family in _COUNTERS:
            self._i[family].add(value, attrs, context=ctx)
        else:
            self._i[family].record(value, attrs, context=ctx)

    def _add(self, family: str, key: tuple[str, tuple[str, ...]], value: float, count: int) -> bool:
        direct = self._fast(family)
        if direct is None:
            return False
        try:
            return direct.add(value, count, self._attributes(key), key)
        except Exception as exc:
            self._direct_failed(family, exc)
            return False

    def _direct_failed(self, family: str, exc: Exception) -> None:
        # not the SDK the self-check saw: the API from now on for this instrument
        self._direct[family] = None
        _guard.report("export.otel_aggregations", exc)

    def _attributes(self, key: tuple[str, tuple[str, ...]]) -> dict[str, str | int]:
        attrs = self._attrs.get(key)
        if attrs is None:
            attrs = self._attrs[key] = attributes(*key, self.schema)
        return attrs

    def _fast(self, family: str) -> otel_aggregations.Direct | None:
        try:
            return self._direct[family]
        except KeyError:
            pass
        inst = self._i[family]
        direct = otel_aggregations.direct(inst)
        # the API's proxy instrument gets its SDK instrument only once a global provider is set: ask again later
        if direct is not None or not otel_aggregations.proxy_pending(inst):
            self._direct[family] = direct
        return direct

    def count_drop(self, common: tuple[str, ...]) -> None:
        self._i[names.PROM_REPORTS_DROPPED].add(1, attributes(names.PROM_REPORTS_DROPPED, common, self.schema))


_COUNTERS = frozenset(s.prom for s in SPECS if s.kind == "counter")
