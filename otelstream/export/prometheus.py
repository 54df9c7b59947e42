"""The native Prometheus sink (prometheus_client): the series of docs/telemetry.md, exemplars, multiprocess mode.

Families are created once per ``CollectorRegistry`` and cached (weakly), so building the pipeline again
(``uninstrument()`` then ``instrument()``) reuses them instead of raising "Duplicated timeseries". If the names are
already taken by someone else's collector (typically an OTel ``PrometheusMetricReader`` on the same registry) the
sink is disabled with one clear warning rather than crashing the application.

Single-process mode: the live gauges are a custom collector that counts the open streams when scraped (exact at
any moment). Multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``): values live in per-process files, custom collectors
are invisible to the aggregating process, so the gauges are ``livesum`` gauges the watchdog refreshes every tick;
exemplars are skipped (prometheus_client cannot store them there).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values
from prometheus_client.core import GaugeMetricFamily

from otelstream import names
from otelstream.export import multiproc
from otelstream.export._sdk_internals import prometheus_histogram
from otelstream.export._sdk_internals.prometheus_histogram import NoCreated
from otelstream.export.handle import StreamHandle
from otelstream.export.labels import LabelTables
from otelstream.export.points import SPECS, Measures, Schema, Spec, specs_for
from otelstream.export.watchdog import Counts, LiveStreams

logger = logging.getLogger("otelstream")

_Child = tuple[Any, "prometheus_histogram.Parts | None"]  # a labelled series and its histogram parts


def multiprocess_mode() -> bool:
    """prometheus_client picks its value storage at import from ``PROMETHEUS_MULTIPROC_DIR``; ask it, not os.environ."""
    return values.ValueClass is not values.MutexValue


def exemplar_for(handle: StreamHandle) -> dict[str, str] | None:
    ctx = handle.span.get_span_context()
    if not ctx.is_valid or not ctx.trace_flags.sampled:
        return None
    return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}


class _LiveCollector:
    """Computes otelstream_streams_active / _stalled from the open streams of every pipeline on this registry."""

    def __init__(self, schema: Schema) -> None:
        self.sources: weakref.WeakSet[LiveStreams] = weakref.WeakSet()
        self.schema = schema

    def describe(self) -> Iterable[GaugeMetricFamily]:
        # Declaring the names lets the registry refuse a duplicate family instead of exposing it twice.
        labels = list(self.schema.labelnames[names.PROM_STREAMS_ACTIVE])
        return [
            GaugeMetricFamily(names.PROM_STREAMS_ACTIVE, "", labels=labels),
            GaugeMetricFamily(names.PROM_STREAMS_STALLED, "", labels=labels),
        ]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = list(self.schema.labelnames[names.PROM_STREAMS_ACTIVE])
        active_f = GaugeMetricFamily(names.PROM_STREAMS_ACTIVE, _doc(names.PROM_STREAMS_ACTIVE), labels=labels)
        stalled_f = GaugeMetricFamily(names.PROM_STREAMS_STALLED, _doc(names.PROM_STREAMS_STALLED), labels=labels)
        active: Counts = {}
        stalled: Counts = {}
        for source in list(self.sources):
            a, s = source.counts()
            for k, v in a.items():
                active[k] = active.get(k, 0) + v
            for k, v in s.items():
                stalled[k] = stalled.get(k, 0) + v
        for k in sorted(active):
            active_f.add_metric(list(k), active[k])
            stalled_f.add_metric(list(k), stalled.get(k, 0))
        yield active_f
        yield stalled_f


class _Counter(NoCreated, Counter):  # type: ignore[misc]
    pass


class _Histogram(NoCreated, Histogram):  # type: ignore[misc]
    pass


def _doc(family: str) -> str:
    return next(s.doc for s in SPECS if s.prom == family)


class PromFamilies:
    """Every documented family in one registry, plus the label caps shared by all pipelines on it. The label names
    (``schema``: which application attributes are labels) are fixed when the families are created."""

    def __init__(
        self, registry: CollectorRegistry, tables: LabelTables, schema: Schema, semconv: str = names.SEMCONV_DEFAULT
    ) -> None:
        self.registry = registry
        self.tables = tables
        self.schema = schema
        self.multiprocess = multiprocess_mode()
        self.metrics: dict[str, Any] = {}
        self.live: _LiveCollector | None = None
        created: list[Any] = []
        try:
            # Only the chosen conventions' gen_ai.client.* families: a family without samples still shows its name
            # in /metrics, and the switch promises the old names are gone.
            for spec in specs_for(semconv):
                self._create(spec, created)
            if not self.multiprocess:
                self.live = _LiveCollector(schema)
                registry.register(self.live)
                created.append(self.live)
        except ValueError:
            for c in created:  # leave the registry as we found it
                with contextlib.suppress(KeyError):
                    registry.unregister(c)
            raise
        self._gauge_pid = 0
        if self.multiprocess:
            multiproc.sweep()  # a new run: the previous run's exited processes stop counting now
            self.clean_own_gauges()

    def _create(self, spec: Spec, created: list[Any]) -> None:
        labelnames = self.schema.labelnames[spec.prom]
        registry = self.registry
        if spec.kind == "histogram":
            m: Any = _Histogram(spec.prom, spec.doc, labelnames, registry=registry, buckets=spec.buckets)
        elif spec.kind == "counter":
            m = _Counter(spec.prom, spec.doc, labelnames, registry=registry)
        elif spec.kind == "last":
            # the latest value wins, across worker processes too (mostrecent, in multiprocess mode)
            m = Gauge(spec.prom, spec.doc, labelnames, registry=registry, multiprocess_mode="mostrecent")
        elif self.multiprocess:
            # livesum: the sum over live processes (a dead worker's open streams are not open any more).
            m = Gauge(spec.prom, spec.doc, labelnames, registry=registry, multiprocess_mode="livesum")
        else:
            return  # single-process gauges come from the live collector
        created.append(m)
        self.metrics[spec.prom] = m

    def ensure(self, semconv: str) -> None:
        """The families of another ``semconv`` setting, when a later ``instrument()`` on this registry chose it
        (those of the earlier one stay: their series keep their counts)."""
        for spec in specs_for(semconv):
            if spec.prom in self.metrics or spec.kind == "gauge":
                continue
            try:
                self._create(spec, [])
            except ValueError as exc:  # the name is someone else's on this registry: that family is not recorded
                logger.warning("otelstream: Prometheus family %s not created: %s", spec.prom, exc)
                return

    def clean_own_gauges(self) -> None:
        """Once per process (again in a forked child): otelstream's gauge values in this pid's file that this
        process did not write are a previous same-pid process's (a container restarted), so they go to 0."""
        pid = os.getpid()
        if self._gauge_pid == pid:
            return
        self._gauge_pid = pid
        gauges = (names.PROM_STREAMS_ACTIVE, names.PROM_STREAMS_STALLED)
        for family, labels in multiproc.stale_own_gauges(gauges):
            gauge = self.metrics.get(family)
            if gauge is not None and set(labels) == set(self.schema.labelnames[family]):
                gauge.labels(**labels).set(0)


_families: weakref.WeakKeyDictionary[CollectorRegistry, PromFamilies] = weakref.WeakKeyDictionary()
_families_lock = threading.Lock()


def families_for(
    registry: CollectorRegistry, tables: LabelTables, schema: Schema, semconv: str = names.SEMCONV_DEFAULT
) -> PromFamilies | None:
    """The cached families of ``registry`` (``tables`` and ``schema`` are for families created now: existing ones
    keep theirs; those ``semconv`` needs are added); None (after one warning) when its names are taken by someone
    else."""
    with _families_lock:
        fam = _families.get(registry)
        if fam is not None:
            fam.ensure(semconv)
        else:
            try:
                fam = PromFamilies(registry, tables, schema, semconv)
            except ValueError as exc:
                logger.warning(
                    "otelstream: Prometheus metrics disabled: the registry already has a family with one of "
                    "otelstream's names (%s). Is an OpenTelemetry PrometheusMetricReader exporting otelstream's "
                    "OTel metrics into the same registry? Use one path: prometheus_metrics=False, or pass a separate "
                    "registry.",
                    exc,
                )
                return None
            _families[registry] = fam
        return fam


class PrometheusSink:
    def __init__(self, families: PromFamilies, live: LiveStreams) -> None:
        self.families = families
        self._m = families.metrics
        self._exemplars = not families.multiprocess
        # labels() validates and hashes its arguments on every call; the label sets are bounded (capped models,
        # closed enums), so the children are kept here: per common label set (looked up once per report), then by
        # family and own label values (a short tuple). Only the export thread uses this.
        self._children: dict[tuple[str, ...], dict[tuple[str, tuple[str, ...]], _Child]] = {}
        if families.live is not None:
            families.live.sources.add(live)
        self._live = live

    def close(self) -> None:
        if self.families.live is not None:
            self.families.live.sources.discard(self._live)

    def record(self, measures: Measures, handle: StreamHandle, common: tuple[str, ...]) -> None:
        """One report's ``measures`` under the stream's ``common`` label values."""
        exemplar = exemplar_for(handle) if self._exemplars else None
        now = time.time()
        m = self._m
        children = self._children.get(common)
        if children is None:
            children = self._children[common] = {}
        for family, own, value in measures.points:
            found = children.get((family, own))
            if found is None:
                if family not in m:
                    continue  # a family this registry could not create (its name taken): warned when it was tried
                found = children[(family, own)] = self._new_child(family, (*common, *own))
            child, parts = found
            if family in _COUNTERS:
                child.inc(value)
            else:
                prometheus_histogram.observe(child, parts, value, exemplar, now)
        for family, own, value in measures.last:
            found = children.get((family, own))
            if found is None:
                found = children[(family, own)] = self._new_child(family, (*common, *own))
            found[0].set(value)
        for family in measures.chunk_families:
            if family in m:
                self._merge_chunks(measures, family, children, common, exemplar, now)

    def _merge_chunks(
        self, measures: Measures, family: str, children: dict[tuple[str, tuple[str, ...]], _Child],
        common: tuple[str, ...], exemplar: dict[str, str] | None, now: float,
    ) -> None:  # fmt: skip
        found = children.get((family, ()))
        if found is None:
            found = children[(family, ())] = self._new_child(family, common)
        child, parts = found
        if parts is not None and len(parts[1]) != len(names.TIME_PER_CHUNK_BUCKETS) + 1:
            parts = None  # not the buckets the tracker counted in: one observe() per chunk
        # Each local bucket's count and the exact sum added at once: O(buckets) instead of O(chunks).
        prometheus_histogram.add_buckets(child, parts, measures.merge, exemplar, now)

    def _new_child(self, family: str, label_values: tuple[str, ...]) -> _Child:
        child = self._m[family].labels(*label_values)
        return (child, prometheus_histogram.parts(child))

    def count_drop(self, common: tuple[str, ...]) -> None:
        self._m[names.PROM_REPORTS_DROPPED].labels(*common).inc()

    def set_gauges(self, active: Counts, stalled: Counts) -> None:
        """Multiprocess mode only: the watchdog's tick writes the live counts into the livesum gauges."""
        ga = self._m.get(names.PROM_STREAMS_ACTIVE)
        gs = self._m.get(names.PROM_STREAMS_STALLED)
        if ga is None or gs is None:
            return
        self.families.clean_own_gauges()
        multiproc.sweep(force=False)  # every few seconds, so an application's own /metrics drops dead workers too
        for key, n in active.items():
            ga.labels(*key).set(n)
            gs.labels(*key).set(stalled.get(key, 0))


_COUNTERS = frozenset(s.prom for s in SPECS if s.kind == "counter")


_port_warned = False


class _SweptMultiProcessCollector:
    """prometheus_client's MultiProcessCollector, after removing the live gauges of processes that are gone."""

    def __init__(self) -> None:
        from prometheus_client import multiprocess

        self._inner = multiprocess.MultiProcessCollector(None)  # type: ignore[no-untyped-call]

    def collect(self) -> Any:
        with contextlib.suppress(Exception):  # a failed sweep must not cost the scrape
            multiproc.sweep()
        return self._inner.collect()  # type: ignore[no-untyped-call]


def _standby(port: int, addr: str, served: CollectorRegistry, tls_kwargs: dict[str, Any]) -> None:
    """A worker that lost the race for the port takes it over when the serving worker dies (else /metrics would be
    gone with it until a restart)."""
    while True:
        time.sleep(multiproc.SWEEP_EVERY_S)
        try:
            prometheus_client.start_http_server(port, addr, registry=served, **tls_kwargs)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                continue
            logger.warning("otelstream: metrics port %s:%d could not be taken over: %r", addr, port, exc)
            return
        logger.info("otelstream: now serving the metrics port %s:%d (its previous server exited)", addr, port)
        return


def start_metrics_server(
    port: int, addr: str = "127.0.0.1", registry: CollectorRegistry | None = None, **tls_kwargs: Any
) -> Any:
    """Serve ``/metrics``; TLS/mTLS keyword arguments as ``prometheus_client.start_http_server`` takes them.

    In multiprocess mode the served registry aggregates every process's files (after sweeping the live gauges of
    exited processes), and a worker that finds the port taken (another worker serves it) logs once, returns None
    instead of failing, and takes the port over if that worker exits.
    """
    global _port_warned
    if multiprocess_mode():
        served = CollectorRegistry()
        served.register(_SweptMultiProcessCollector())  # type: ignore[arg-type]
    else:
        served = registry if registry is not None else prometheus_client.REGISTRY
    try:
        return prometheus_client.start_http_server(port, addr, registry=served, **tls_kwargs)
    except OSError as exc:
        if multiprocess_mode() and exc.errno == errno.EADDRINUSE:
            if not _port_warned:
                _port_warned = True
                logger.info("otelstream: metrics port %s:%d is served by another process", addr, port)
                threading.Thread(target=_standby, args=(port, addr, served, tls_kwargs), daemon=True,
                                 name="otelstream-metrics-standby").start()  # fmt: skip
            return None
        raise
