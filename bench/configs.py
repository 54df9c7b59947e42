"""Benchmark configurations: the uninstrumented baseline, otelstream with every sink on, and the peers.

Every configuration gets its own in-memory OTel exporters, and ``check()`` says what telemetry it really produced
(a configuration that records nothing is flagged by the runner, never counted as fast).

Anthropic's own tracing is on by default in anthropic 2.x whenever OpenTelemetry can give a tracer (even the no-op
proxy one). So every configuration builds its Anthropic clients with ``open_telemetry=False`` except
``anthropic-builtin``, which gives it the in-memory tracer provider: each number measures one instrumentation alone.
Anthropic 1.x neither traces itself nor takes the option (``bench/workers/clients.py`` leaves it out there).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

PEERS = ("otel-genai", "otel-botocore", "openllmetry", "openinference", "anthropic-builtin")
OURS = ("otelstream", "otelstream-default")
ALL = ("baseline", *OURS, *PEERS)
# otelstream: every sink on (spans, Prometheus, OTel metrics: instrument(tracer_provider, meter_provider, registry)).
# otelstream-default: spans + Prometheus, OTel metrics off (what instrument(tracer_provider=..., registry=...) does).
# Each peer's instrumentor per SDK: (module, class); an SDK a peer has none for is not measured for it. Google-genai
# has no OpenLLMetry package of its own: its google-generativeai one instruments google-genai (the vertexai one
# instruments the Vertex AI SDK, which is not google-genai). OpenTelemetry's google-genai instrumentation requires
# google-genai < 3: it runs in a venv of its own (run.py --genai2-python), on the newest 2.x it accepts.
INSTRUMENTORS: dict[str, dict[str, tuple[str, str]]] = {
    "otel-genai": {"openai": ("opentelemetry.instrumentation.genai.openai", "OpenAIInstrumentor"),
                   "anthropic": ("opentelemetry.instrumentation.genai.anthropic", "AnthropicInstrumentor"),
                   "google": ("opentelemetry.instrumentation.google_genai", "GoogleGenAiSdkInstrumentor"),
                   "bedrock": ("opentelemetry.instrumentation.genai.bedrock", "BedrockInstrumentor")},
    "otel-botocore": {"bedrock": ("opentelemetry.instrumentation.botocore", "BotocoreInstrumentor")},
    "openllmetry": {"openai": ("opentelemetry.instrumentation.openai", "OpenAIInstrumentor"),
                    "anthropic": ("opentelemetry.instrumentation.anthropic", "AnthropicInstrumentor"),
                    "google": ("opentelemetry.instrumentation.google_generativeai", "GoogleGenerativeAiInstrumentor"),
                    "bedrock": ("opentelemetry.instrumentation.bedrock", "BedrockInstrumentor")},
    "openinference": {"openai": ("openinference.instrumentation.openai", "OpenAIInstrumentor"),
                      "anthropic": ("openinference.instrumentation.anthropic", "AnthropicInstrumentor"),
                      "google": ("openinference.instrumentation.google_genai", "GoogleGenAIInstrumentor"),
                      "bedrock": ("openinference.instrumentation.bedrock", "BedrockInstrumentor")},
}  # fmt: skip
PIP_NAMES = {
    "otel-genai": ("opentelemetry-instrumentation-genai-openai", "opentelemetry-instrumentation-genai-anthropic",
                   "opentelemetry-instrumentation-google-genai", "opentelemetry-instrumentation-genai-bedrock"),
    "otel-botocore": ("opentelemetry-instrumentation-botocore",),
    "openllmetry": ("opentelemetry-instrumentation-openai", "opentelemetry-instrumentation-anthropic",
                    "opentelemetry-instrumentation-google-generativeai", "opentelemetry-instrumentation-bedrock"),
    "openinference": ("openinference-instrumentation-openai", "openinference-instrumentation-anthropic",
                      "openinference-instrumentation-google-genai", "openinference-instrumentation-bedrock"),
    "anthropic-builtin": ("anthropic",),
}  # fmt: skip


def lib_of(surface: str) -> str:
    """The SDK whose client reads the surface; ``http`` for the HTTP-level observer's (a plain client, no SDK)."""
    if surface.startswith("http-"):
        return "http"
    return {"messages": "anthropic", "generate_content": "google", "converse": "bedrock"}.get(surface, "openai")


def available(config: str, surface: str) -> bool:
    """Whether the configuration applies to the surface and its package is importable in this interpreter."""
    if not sdk_installed(surface):
        return False
    if config == "baseline":
        return True
    if config in OURS:
        try:
            import otelstream

            return callable(otelstream.instrument)  # lazily imports the instrumentation module
        except Exception:
            return False
    if lib_of(surface) == "http":
        return False  # the peers instrument the SDKs: a plain HTTP client's stream is none of theirs
    if config == "anthropic-builtin":
        return lib_of(surface) == "anthropic" and anthropic_traces()
    found = INSTRUMENTORS[config].get(lib_of(surface))
    if found is None or not sdk_installed(surface):
        return False
    try:
        return importlib.util.find_spec(found[0]) is not None
    except ModuleNotFoundError:
        return False


def sdk_installed(surface: str) -> bool:
    """Whether this interpreter has the surface's SDK (a venv for one SDK only lacks the others)."""
    mods = {"google": ("google.genai",), "bedrock": ("boto3", "botocore")}.get(lib_of(surface), ())
    try:
        return all(importlib.util.find_spec(m) is not None for m in mods)
    except ModuleNotFoundError:
        return False


def anthropic_traces() -> bool:
    """Whether this anthropic release traces itself (2.x: the ``open_telemetry`` client option; 1.x has neither)."""
    try:
        import inspect

        import anthropic

        return "open_telemetry" in inspect.signature(anthropic.Anthropic).parameters
    except Exception:
        return False


@dataclass
class Setup:
    config: str
    anthropic_kwargs: dict[str, Any] = field(default_factory=dict)
    spans: Any = None  # InMemorySpanExporter
    reader: Any = None  # InMemoryMetricReader
    registry: Any = None  # prometheus CollectorRegistry (otelstream)
    tracer_provider: Any = None
    meter_provider: Any = None
    instrument_kwargs: dict[str, Any] = field(default_factory=dict)  # otelstream: what instrument() was given

    def uninstrument(self) -> None:
        """otelstream only: back to the plain SDK in this process (its telemetry flushed first)."""
        import otelstream

        otelstream.flush(timeout=30.0)
        otelstream.uninstrument()

    def reinstrument(self) -> None:
        import otelstream

        otelstream.instrument(**self.instrument_kwargs)

    def flush(self) -> None:
        if self.config in OURS:
            import otelstream

            otelstream.flush(timeout=30.0)

    def finished_spans(self) -> list[Any]:
        return list(self.spans.get_finished_spans()) if self.spans is not None else []

    def check(self) -> dict[str, Any]:
        """What telemetry this configuration produced: span count, span names, metric points."""
        self.flush()
        out: dict[str, Any] = {"spans": 0, "span_names": [], "metric_points": 0, "prom_samples": 0}
        if self.spans is not None:
            spans = self.finished_spans()
            out["spans"] = len(spans)
            out["span_names"] = sorted({s.name for s in spans})[:6]
        if self.reader is not None:
            data = self.reader.get_metrics_data()
            n = 0
            for rm in getattr(data, "resource_metrics", ()) or ():
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        n += len(m.data.data_points)
            out["metric_points"] = n
        if self.registry is not None:
            n = 0
            for fam in self.registry.collect():
                if fam.name.startswith(("otelstream", "gen_ai")):
                    n += sum(1 for s in fam.samples if s.value)
            out["prom_samples"] = n
        return out


def _otel(global_too: bool) -> tuple[Any, Any, Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    if global_too:
        from opentelemetry import metrics, trace

        trace.set_tracer_provider(tp)
        metrics.set_meter_provider(mp)
    return exporter, tp, reader, mp


def setup(config: str, surface: str | list[str], *, tracing: bool = True) -> Setup:
    """Install one configuration in this (fresh) process, for one surface or several (each library instrumented
    once). ``tracing=False`` (otelstream only): no tracer provider, for "memory per open stream, tracing off"."""
    surfaces = [surface] if isinstance(surface, str) else list(surface)
    libs = sorted({lib_of(x) for x in surfaces})
    s = Setup(config, anthropic_kwargs={"open_telemetry": False})
    if config == "baseline":
        return s
    if config in OURS:
        from prometheus_client import CollectorRegistry

        import otelstream

        s.registry = CollectorRegistry()
        if tracing and config == "otelstream-default":
            s.spans, s.tracer_provider, _, _ = _otel(global_too=False)
            s.instrument_kwargs = {"tracer_provider": s.tracer_provider, "registry": s.registry}
        elif tracing:
            s.spans, s.tracer_provider, s.reader, s.meter_provider = _otel(global_too=False)
            s.instrument_kwargs = {"tracer_provider": s.tracer_provider, "meter_provider": s.meter_provider,
                                   "registry": s.registry}  # fmt: skip
        else:
            s.instrument_kwargs = {"registry": s.registry}
        otelstream.instrument(**s.instrument_kwargs)
        return s
    s.spans, s.tracer_provider, s.reader, s.meter_provider = _otel(global_too=True)
    kw = {"tracer_provider": s.tracer_provider, "meter_provider": s.meter_provider, "skip_dep_check": True}
    if config == "anthropic-builtin":
        s.anthropic_kwargs = {"open_telemetry": {"tracer_provider": s.tracer_provider}}
        return s
    for lib in libs:
        _instrumentor(config, lib)().instrument(**kw)
    return s


def _instrumentor(config: str, lib: str):
    if config not in INSTRUMENTORS or lib not in INSTRUMENTORS[config]:
        raise SystemExit(f"no instrumentor of {config!r} for {lib!r}")
    module, cls = INSTRUMENTORS[config][lib]
    return getattr(importlib.import_module(module), cls)
