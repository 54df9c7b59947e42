"""``import otelstream.auto``: telemetry for every streamed LLM response with nothing else written (DESIGN §5).

On import, configured from ``OTELSTREAM_*`` and the standard ``OTEL_*`` environment:

1. instruments every installed SDK (openai, anthropic; either may be missing);
2. when no SDK ``TracerProvider`` is installed yet and the environment asks for trace export
   (``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), installs one
   with the exporters named there (found through the SDK's ``opentelemetry_traces_exporter`` entry points);
3. turns on ``opentelemetry-instrumentation-httpx``'s ``HTTPX2ClientInstrumentor`` (the HTTP child span of each
   stream span), and its ``HTTPXClientInstrumentor`` when an installed SDK builds on ``httpx`` (openai 2.x), unless
   ``OTELSTREAM_HTTP_SPANS=false``;
4. serves ``/metrics`` when ``OTELSTREAM_PROMETHEUS_PORT`` is set.

When something it needs is missing it logs one warning saying what to install. It never raises into the importing
program.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger("otelstream")

_EXPORT_ENV = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_EXPORTER_PACKAGES = {
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http (pip install 'otelstream[otlp]')",
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "zipkin": "opentelemetry-exporter-zipkin",
}
_OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http"}


def _exporter_names(env: Mapping[str, str]) -> list[str]:
    raw = env.get("OTEL_TRACES_EXPORTER", "").strip()
    if raw:
        names = [n.strip() for n in raw.split(",") if n.strip() and n.strip().lower() != "none"]
    elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        names = ["otlp"]
    else:
        names = []
    return [_otlp_exporter(env) if n == "otlp" else n for n in names]


def _otlp_exporter(env: Mapping[str, str]) -> str:
    """"otlp" names no exporter package: the protocol setting picks one, as the OTel SDK's own configuration does.
    Without one the SDK picks gRPC; here gRPC when it is installed, else HTTP (what ``otelstream[otlp]`` installs,
    and the protocol the OTLP specification makes the default)."""
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "").strip()
    if protocol:
        return _OTLP_BY_PROTOCOL.get(protocol, "otlp_proto_http")
    from importlib.metadata import entry_points

    grpc = entry_points(group="opentelemetry_traces_exporter", name="otlp_proto_grpc")
    return "otlp_proto_grpc" if list(grpc) else "otlp_proto_http"


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
    from importlib.metadata import entry_points

    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    exporters = []
    for name in names:
        found = list(entry_points(group="opentelemetry_traces_exporter", name=name))
        if not found:
            missing.append(_EXPORTER_PACKAGES.get(name, f"the package providing the {name!r} trace exporter"))
            continue
        try:
            exporters.append((name, found[0].load()()))
        except Exception as exc:
            logger.warning("otelstream.auto: could not create the %r trace exporter: %r", name, exc)
    if not exporters:
        return None
    provider = TracerProvider(resource=Resource.create())
    for name, exporter in exporters:
        processor = SimpleSpanProcessor(exporter) if name == "console" else BatchSpanProcessor(exporter)
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def _http_spans(missing: list[str], sdks: list[str]) -> None:
    try:
        from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor
    except ImportError:
        missing.append("opentelemetry-instrumentation-httpx >= 0.66b0 (HTTP child spans)")
        return
    instrumentors: list[Any] = [HTTPX2ClientInstrumentor()]
    if any(_builds_on_httpx(sdk) for sdk in sdks):
        instrumentors.append(HTTPXClientInstrumentor())
    for instrumentor in instrumentors:
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument()


def _builds_on_httpx(sdk: str) -> bool:
    """Whether the installed ``sdk`` makes its requests with httpx (openai 2.x) rather than httpx2, read from what it
    requires (importing it here would cost every importing program the SDK's import time)."""
    try:
        requires = importlib.metadata.requires(sdk) or []
    except importlib.metadata.PackageNotFoundError:
        return False
    return any(re.match(r"httpx(?![\w-])", r) and "extra ==" not in r for r in requires)


def run(env: Mapping[str, str] | None = None) -> None:
    """What importing this module does (callable again for tests). Never raises."""
    try:
        _run(os.environ if env is None else env)
    except Exception as exc:  # the importing program must start whatever happens here
        logger.warning("otelstream.auto: instrumentation not (fully) enabled: %r", exc)


def _run(env: Mapping[str, str]) -> None:
    from otelstream import config
    from otelstream import instrumentation as inst

    settings = config.load(environ=env)
    if not settings.enabled:
        return
    missing: list[str] = []
    sdks = inst.installed_sdks()
    if not sdks:
        missing.append("an LLM SDK to observe: openai >= 2.31 and/or anthropic >= 1.0")
    provider = tracer_provider_from_env(missing, env)
    inst.instrument(tracer_provider=provider)
    if settings.http_spans:
        _http_spans(missing, sdks)
    if settings.prometheus_port is not None:
        try:
            inst.start_metrics_server(settings.prometheus_port, settings.prometheus_addr)
        except Exception as exc:
            logger.warning(
                "otelstream.auto: metrics server not started on %s:%s: %r",
                settings.prometheus_addr,
                settings.prometheus_port,
                exc,
            )
    if missing:
        logger.warning("otelstream.auto: missing %s", "; ".join(missing))


run()
