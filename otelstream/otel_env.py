"""The OpenTelemetry SDK providers the standard ``OTEL_*`` environment asks for: a ``TracerProvider`` with the
exporters ``OTEL_TRACES_EXPORTER`` / an OTLP endpoint name, a ``MeterProvider`` when metrics export is asked for.
``otelstream.auto`` and ``otelstream probe`` both install them this way (the probe cannot import ``otelstream.auto``:
importing it instruments)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from otelstream.distribution import install_hint

logger = logging.getLogger("otelstream")

_EXPORT_ENV = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_METRICS_ENDPOINT_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
# the exporter package, and the otelstream extra that installs it (if any)
_EXPORTER_PACKAGES = {
    "otlp_proto_http": ("opentelemetry-exporter-otlp-proto-http", "otlp"),
    "otlp_proto_grpc": ("opentelemetry-exporter-otlp-proto-grpc", "otlp-grpc"),
    "prometheus": ("opentelemetry-exporter-prometheus", "prometheus-otel"),
    "zipkin": ("opentelemetry-exporter-zipkin", None),
}
_OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http"}


def _exporter_names(env: Mapping[str, str], signal: str = "traces") -> list[str]:
    """The exporters ``OTEL_{TRACES,METRICS}_EXPORTER`` names (an OTLP endpoint alone means ``otlp`` for traces)."""
    raw = env.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip()
    if raw:
        names = [n.strip() for n in raw.split(",") if n.strip() and n.strip().lower() != "none"]
    elif signal == "traces" and any(env.get(k) for k in _EXPORT_ENV[1:]):
        names = ["otlp"]
    else:
        names = []
    return [_otlp_exporter(env, signal) if n == "otlp" else n for n in names]


def _otlp_exporter(env: Mapping[str, str], signal: str = "traces") -> str:
    """"otlp" names no exporter package: the protocol setting picks one, as the OTel SDK's own configuration does.
    Without one the SDK picks gRPC; here gRPC when it is installed, else HTTP (what ``otelstream[otlp]`` installs,
    and the protocol the OTLP specification makes the default)."""
    protocol = (env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "").strip()  # fmt: skip
    if protocol:
        return _OTLP_BY_PROTOCOL.get(protocol, "otlp_proto_http")
    from importlib.metadata import entry_points

    grpc = entry_points(group=f"opentelemetry_{signal}_exporter", name="otlp_proto_grpc")
    return "otlp_proto_grpc" if list(grpc) else "otlp_proto_http"


def _missing_exporter(name: str, what: str) -> str:
    """What to install for an exporter that is not installed: its package, and how to get it with otelstream."""
    package, extra = _EXPORTER_PACKAGES.get(name, (None, None))
    if package is None:
        return f"the package providing the {name!r} {what} exporter"
    return package if extra is None else f"{package} ({install_hint(extra)})"


def _load_exporters(names: list[str], group: str, what: str, missing: list[str]) -> list[tuple[str, Any]]:
    """Each named exporter made from the SDK's entry points; a missing package goes to ``missing``."""
    from importlib.metadata import entry_points

    made = []
    for name in names:
        found = list(entry_points(group=group, name=name))
        if not found:
            missing.append(_missing_exporter(name, what))
            continue
        try:
            made.append((name, found[0].load()()))
        except Exception as exc:
            logger.warning("otelstream: could not create the %r %s exporter: %r", name, what, exc)
    return made


def _sdk_provider_installed() -> bool:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    return isinstance(trace.get_tracer_provider(), TracerProvider)


def tracer_provider_from_env(missing: list[str], env: Mapping[str, str] | None = None) -> Any:
    """Install (globally) and return an SDK TracerProvider when the environment asks for export and none is set."""
    env = os.environ if env is None else env
    if not any(env.get(k) for k in _EXPORT_ENV) or _sdk_provider_installed():
        return None
    names = _exporter_names(env)
    if not names:
        return None
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    exporters = _load_exporters(names, "opentelemetry_traces_exporter", "trace", missing)
    if not exporters:
        return None
    provider = TracerProvider(resource=Resource.create())
    for name, exporter in exporters:
        processor = SimpleSpanProcessor(exporter) if name == "console" else BatchSpanProcessor(exporter)
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def meter_provider_from_env(missing: list[str], otel_metrics: bool, env: Mapping[str, str] | None = None) -> Any:
    """Install (globally) and return an SDK MeterProvider when the environment asks for metrics export and none is
    set: ``OTEL_METRICS_EXPORTER`` names exporters, or ``otel_metrics`` (``OTELSTREAM_OTEL_METRICS=true``) is on with
    an OTLP endpoint. The OTLP exporters push on the SDK's interval (``OTEL_METRIC_EXPORT_INTERVAL``) and once more
    when the process exits."""
    env = os.environ if env is None else env
    names = _exporter_names(env, "metrics")
    if not names and otel_metrics and not env.get("OTEL_METRICS_EXPORTER", "").strip():
        names = [_otlp_exporter(env, "metrics")] if any(env.get(k) for k in _METRICS_ENDPOINT_ENV) else []
    if not names:
        return None
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    if isinstance(metrics.get_meter_provider(), MeterProvider):
        return None  # the application's own: instrument() records through it when asked to
    made = _load_exporters(names, "opentelemetry_metrics_exporter", "metric", missing)
    # an entry point gives an exporter to push, or (prometheus) a reader of its own
    readers = [m if isinstance(m, MetricReader) else PeriodicExportingMetricReader(m) for _, m in made]
    if not readers:
        return None
    provider = MeterProvider(metric_readers=readers, resource=Resource.create())
    metrics.set_meter_provider(provider)
    return provider
