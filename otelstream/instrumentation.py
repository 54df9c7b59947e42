"""The public switch: ``instrument()`` / ``uninstrument()`` / ``flush()`` / ``start_metrics_server()`` and the
``OtelStreamInstrumentor`` that ``opentelemetry-instrument`` finds through the ``opentelemetry_instrumentor`` entry
point.

``instrument()`` is idempotent: a second call while instrumented changes nothing (call ``uninstrument()`` first to
change providers or settings). ``uninstrument()`` restores the SDKs' original functions exactly and shuts the
export pipeline down after flushing it, within its timeout (outside the lock: a hung exporter never holds up the
next ``instrument()``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import sys
import threading
import time
import weakref
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from otelstream import _guard, config
from otelstream.core.report import StreamReport

logger = logging.getLogger("otelstream")

_lock = threading.RLock()
_pipeline: Any = None
_retiring: weakref.WeakSet[Any] = weakref.WeakSet()  # uninstrumented pipelines that still have open streams

# "any of": the instrumentor works with either SDK alone (the dependency check below is ours, not BaseInstrumentor's)
# lower bounds: the oldest releases CI tests (.ci/sdk-matrix.sh)
# (google-genai's import name is google.genai; google-genai >= 1.10 streams over httpx, older ones over requests)
_SDKS = {"openai": "openai >= 2.31", "anthropic": "anthropic >= 1.0", "google.genai": "google-genai >= 1.10",
         "botocore": "botocore >= 1.43", "aiobotocore": "aiobotocore >= 3.10"}


def installed_sdks() -> list[str]:
    return [name for name in _SDKS if _installed(name)]


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # google.genai without the google namespace package: its parent is looked up first
        return False


def instrument(
    tracer_provider: Any = None, meter_provider: Any = None, registry: Any = None, **settings: Any
) -> None:
    """Observe every stream the installed openai / anthropic / google-genai / botocore / aiobotocore SDKs consume
    (before or after they are imported).

    ``settings`` are the keyword forms of the ``OTELSTREAM_*`` table in ``otelstream.config`` (unknown names raise
    ``TypeError``). ``enabled=False`` (or ``OTELSTREAM_ENABLED=false``) makes this a no-op."""
    global _pipeline
    cfg = config.load(settings)
    if not cfg.enabled:
        logger.debug("otelstream: disabled (OTELSTREAM_ENABLED=false)")
        return
    with _lock:
        if _pipeline is not None:
            return
        from otelstream import adapters
        from otelstream.export import build_pipeline

        pipeline = build_pipeline(
            cfg, tracer_provider=tracer_provider, meter_provider=meter_provider, registry=registry
        )
        adapters.install(
            pipeline,
            stall_threshold_s=cfg.stall_threshold_s,
            baggage_attributes=cfg.baggage_attributes,
            http_streams=cfg.http_streams,
        )
        _pipeline = pipeline
        if cfg.self_check:  # docs/api.md: the doctor's small matrix, once, in the background
            from otelstream.doctor import runtime_check
            from otelstream.export import self_check_gauge

            runtime_check.start(self_check_gauge.publish)


def uninstrument(timeout: float = 5.0) -> None:
    """Undo ``instrument()``: original SDK functions back (identity), pending telemetry flushed; streams still open
    keep reporting until they end, then the pipeline stops. Returns within ``timeout`` seconds overall, also when an
    exporter hangs; ``instrument()`` can run again meanwhile (the lock is held only to swap the patches)."""
    global _pipeline
    deadline = time.monotonic() + max(0.0, timeout)
    runtime_check = sys.modules.get("otelstream.doctor.runtime_check")
    if runtime_check is not None:  # a run in progress ends between two cells; its thread is joined
        runtime_check.stop(min(2.0, max(0.0, timeout)))
    with _lock:
        pipeline = _pipeline
        _pipeline = None
        from otelstream import adapters

        adapters.uninstall()
        if pipeline is not None:
            # streams still open finish with the pipeline they started with: it shuts down after the last one
            _retiring.add(pipeline)
        # earlier pipelines still draining: their finished streams are recorded too
        earlier = [p for p in _retiring if p is not pipeline]
    for old in earlier:  # metrics first, everywhere: one pipeline's hung span export must not cost another's
        old.flush_metrics(deadline)
    if pipeline is not None:
        pipeline.retire_until(deadline)
    for old in earlier:
        old.flush_spans(deadline)


def is_instrumented() -> bool:
    return _pipeline is not None


def flush(timeout: float = 5.0) -> bool:
    """Wait until every finished stream's telemetry is recorded (also of streams that outlived an
    ``uninstrument()``); False on timeout, which bounds the whole call, however many pipelines there are."""
    deadline = time.monotonic() + max(0.0, timeout)
    pipelines = [p for p in (_pipeline, *_retiring) if p is not None]
    # every pipeline's metrics before any span flush: those are quick unless a metric sink itself hangs
    metrics = [bool(p.flush_metrics(deadline)) for p in pipelines]
    spans = [bool(p.flush_spans(deadline)) for p in pipelines]
    return all(metrics) and all(spans)


def start_metrics_server(port: int = 9464, addr: str = "127.0.0.1", **tls: Any) -> Any:
    """Serve ``/metrics`` for the registry otelstream records into (TLS/mTLS keyword options as prometheus_client's
    ``start_http_server`` takes them). Instruments first (with defaults) when not yet instrumented."""
    with _lock:
        if _pipeline is None:
            instrument()
        pipeline = _pipeline
    if pipeline is None:  # disabled
        return None
    return pipeline.start_metrics_server(port, addr, **tls)


def report_of(stream: object) -> StreamReport | None:
    """The ``StreamReport`` of an SDK stream object (what ``create(stream=True)`` or a ``.stream()`` helper gave the
    caller) once its stream has ended — completed, cut, abandoned, failed —, else None (still open, not a stream
    otelstream observed, or a WebSocket connection: its responses have no object of their own). O(1): the report is
    kept on the stream's own bookkeeping, which lives exactly as long as the stream object."""
    calls = sys.modules.get("otelstream.adapters.calls")
    if calls is None:  # no adapter was ever loaded: no stream was observed
        return None
    report: StreamReport | None = None
    with _guard.guard("report_of"):
        report = calls.report_of(stream)
    return report


class OtelStreamInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """``opentelemetry-instrument`` entry point. Keyword arguments are those of ``instrument()``."""

    def instrumentation_dependencies(self) -> Collection[str]:
        # BaseInstrumentor requires *all* listed packages; we need any one of the SDKs, so list only those present
        # (when neither is, list both so the check reports what to install).
        present = installed_sdks()
        return [_SDKS[name] for name in present[:1]] if present else list(_SDKS.values())

    # BaseInstrumentor keeps its own on/off flag; otelstream's state is the one that counts, whichever API changed
    # it (otelstream.uninstrument() then this instrument() must instrument again, and the reverse).
    @property
    def _is_instrumented_by_opentelemetry(self) -> bool:
        return is_instrumented()

    @_is_instrumented_by_opentelemetry.setter
    def _is_instrumented_by_opentelemetry(self, value: bool) -> None:
        pass

    def _instrument(self, **kwargs: Any) -> None:
        """Under ``opentelemetry-instrument``: metrics as well as spans. The OTel instruments go through
        the global MeterProvider when it is an SDK one (the distro configured OTLP metrics), ``/metrics`` is served
        when ``OTELSTREAM_PROMETHEUS_PORT`` is set, as ``otelstream.auto`` does, and a missing SDK TracerProvider
        (nothing would export the spans) is said once, with what to set."""
        known = {f.name for f in dataclasses.fields(config.Settings)}
        settings = {k: v for k, v in kwargs.items() if k in known}  # BaseInstrumentor passes its own options too
        tracer_provider = kwargs.get("tracer_provider")
        meter_provider = kwargs.get("meter_provider")
        if meter_provider is None:
            meter_provider = _global_sdk_meter_provider()
        if tracer_provider is None and not _global_sdk_tracer_provider():
            _warn_no_tracer_provider()
        instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, registry=kwargs.get("registry"),
                   **settings)  # fmt: skip
        cfg = config.load(settings)
        if cfg.enabled and cfg.prometheus_port is not None:
            try:
                start_metrics_server(cfg.prometheus_port, cfg.prometheus_addr)
            except Exception as exc:  # the instrumented program must start whatever happens here
                logger.warning("otelstream: metrics server not started on %s:%s: %r", cfg.prometheus_addr,
                               cfg.prometheus_port, exc)  # fmt: skip

    def _uninstrument(self, **kwargs: Any) -> None:
        uninstrument()


_warned_no_tracer_provider = False


def _global_sdk_tracer_provider() -> bool:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    return isinstance(trace.get_tracer_provider(), TracerProvider)


def _global_sdk_meter_provider() -> Any:
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider

    provider = metrics.get_meter_provider()
    return provider if isinstance(provider, MeterProvider) else None


def _warn_no_tracer_provider() -> None:
    global _warned_no_tracer_provider
    if _warned_no_tracer_provider:
        return
    _warned_no_tracer_provider = True
    from otelstream.distribution import install_hint

    logger.warning(
        "otelstream: no OpenTelemetry SDK TracerProvider is installed, so otelstream's spans go nowhere. Under "
        f"opentelemetry-instrument: pip install opentelemetry-distro, install otelstream's otlp extra "
        f"({install_hint('otlp')}) and set "
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://<collector>:4318 OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf "
        "OTEL_SERVICE_NAME=<service>; in code: pass tracer_provider= or set the global one first."
    )


__all__ = ["OtelStreamInstrumentor", "flush", "instrument", "report_of", "start_metrics_server", "uninstrument"]

