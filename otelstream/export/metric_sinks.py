"""Which metric sinks a pipeline records into, and under which label tables: otelstream's own Prometheus registry,
the OTel instruments of a meter provider, or both, with the label names and caps they share.

One set of label tables per registry and per meter provider is kept across ``instrument()`` cycles (each cycle
would otherwise admit ``cap`` new values into the same series); the settings of the newest pipeline apply to them.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry.metrics import MeterProvider
from prometheus_client import CollectorRegistry

from otelstream.config import Settings
from otelstream.export import prometheus as prom
from otelstream.export._sdk_internals import otel_readers
from otelstream.export.labels import JointTables, LabelTables
from otelstream.export.otel_metrics import OtelMetricsSink, instruments_for
from otelstream.export.points import Schema
from otelstream.export.watchdog import LiveStreams

logger = logging.getLogger("otelstream")


class MetricSinks:
    """The sinks of one pipeline (None where off) and the label tables and schema they record under."""

    def __init__(
        self, settings: Settings, registry: CollectorRegistry, meter_provider: MeterProvider | None, live: LiveStreams
    ) -> None:
        self.prometheus: prom.PrometheusSink | None = None
        self.otel: OtelMetricsSink | None = None
        label_settings = (settings.model_label_cap, settings.model_allowlist, settings.model_label_max_length)
        tables_now = LabelTables(*label_settings)
        schema = Schema(_metric_keys(settings.metric_attributes))

        otel_on = settings.otel_metrics or meter_provider is not None
        prom_on = settings.prometheus_metrics
        if prom_on and otel_on and _reader_exports_into(meter_provider, registry):
            logger.warning(
                "otelstream: the meter provider's PrometheusMetricReader exports into the same registry as "
                "otelstream's native Prometheus metrics; keeping the OTel path only (same series names). Pass "
                "prometheus_metrics=False to silence this, or a separate registry to keep both."
            )
            prom_on = False

        # One set of label tables per registry and per meter provider, kept across instrument() cycles (each would
        # otherwise admit `cap` new values into the same series); this pipeline's settings apply to them.
        tables: list[LabelTables] = []
        if prom_on:
            families = prom.families_for(registry, tables_now, schema, settings.semconv)
            if families is not None:
                tables.append(families.tables)
                if families.schema.attribute_keys != schema.attribute_keys:
                    # the registry's families were made with other label names: they cannot change now
                    logger.warning(
                        "otelstream: metric_attributes=%s ignored: this registry's series already have the labels of "
                        "metric_attributes=%s (one set per registry and process)",
                        ",".join(schema.attribute_keys),
                        ",".join(families.schema.attribute_keys),
                    )
                    schema = families.schema
                self.prometheus = prom.PrometheusSink(families, live)
        self.schema = schema
        live.schema = schema
        if otel_on:
            instruments = instruments_for(meter_provider, tables[0] if tables else tables_now)
            if instruments.tables not in tables:
                tables.append(instruments.tables)
            self.otel = OtelMetricsSink(instruments, live, schema)
        for table in tables:
            if table is not tables_now:
                table.configure(*label_settings)
        self.labels: LabelTables | JointTables = tables[0] if tables else tables_now
        if len(tables) > 1:  # a registry and a meter provider first used apart: both caps must hold
            self.labels = JointTables(tables)


def _metric_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The ``metric_attributes`` keys that can be labels (the others warned about, once per pipeline)."""
    from otelstream.attribution import valid_keys

    kept, refused = Schema.usable(valid_keys(keys, "metric_attributes"))
    for key, why in refused:
        logger.warning("otelstream: metric_attributes: ignoring %r (%s)", key, why)
    return kept


def default_registry() -> CollectorRegistry:
    import prometheus_client

    return prometheus_client.REGISTRY


def _reader_exports_into(meter_provider: MeterProvider | None, registry: CollectorRegistry) -> bool:
    """Does ``meter_provider`` (or the global one) have an OTel PrometheusMetricReader writing into ``registry``?"""
    provider = meter_provider if meter_provider is not None else _global_meter_provider()
    return otel_readers.reader_exports_into(provider, registry)


def _global_meter_provider() -> Any:
    from opentelemetry import metrics

    return metrics.get_meter_provider()
