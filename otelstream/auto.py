"""``import otelstream.auto``: telemetry for every streamed LLM response with nothing else written.

On import, configured from ``OTELSTREAM_*`` and the standard ``OTEL_*`` environment:

1. instruments every installed SDK (openai, anthropic, google-genai; any may be missing);
2. when no SDK ``TracerProvider`` is installed yet and the environment asks for trace export
   (``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), installs one
   with the exporters named there (found through the SDK's ``opentelemetry_traces_exporter`` entry points); likewise
   an SDK ``MeterProvider`` when metrics export is asked for (``OTEL_METRICS_EXPORTER``, or
   ``OTELSTREAM_OTEL_METRICS=true`` with an OTLP endpoint), which otelstream's OTel instruments then record through;
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

from otelstream.otel_env import meter_provider_from_env, tracer_provider_from_env

logger = logging.getLogger("otelstream")


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
        missing.append(
            "an LLM SDK to observe: openai >= 2.31, anthropic >= 1.0, google-genai >= 1.10, botocore >= 1.43 or"
            " aiobotocore >= 3.10"
        )
    provider = tracer_provider_from_env(missing, env)
    meter_provider = meter_provider_from_env(missing, settings.otel_metrics, env)
    inst.instrument(tracer_provider=provider, meter_provider=meter_provider)
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
