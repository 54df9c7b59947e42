"""pydantic-ai's ``Agent.run_stream`` on its OpenAI (Chat Completions) and Anthropic (Messages) models: the text
deltas, the result (output, usage, messages) and the exception are the same with otelstream on, and each model
request is one span with its outcome."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.compat.harness import CASE_IDS, CASES, Case, Seen, check, need, plain
from tests.support.scripted_server import ScriptedServer

pydantic_ai = need("pydantic_ai")
need("pydantic_ai.models.openai")
need("pydantic_ai.models.anthropic")

from pydantic_ai.models.anthropic import AnthropicModel  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.anthropic import AnthropicProvider  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from otelstream import names  # noqa: E402

VOLATILE = frozenset({"timestamp", "run_id", "conversation_id"})  # wall-clock stamps, fresh ids per run


def _model(provider: str, base_url: str) -> Any:
    if provider == "openai":
        return OpenAIChatModel("gpt-test", provider=OpenAIProvider(base_url=base_url + "/v1", api_key="k"))
    return AnthropicModel("claude-test", provider=AnthropicProvider(base_url=base_url, api_key="k"))


def _runner(provider: str) -> Any:
    def run(base_url: str, early_break: bool) -> Seen:
        seen = Seen()
        agent = pydantic_ai.Agent(_model(provider, base_url))

        async def go() -> None:
            # debounce_by=None: each delta as it comes (pydantic-ai groups those within 0.1 s by default, so what
            # the caller gets would depend on the machine's load, not on the stream)
            try:
                async with agent.run_stream("hi") as result:
                    async for text in result.stream_text(delta=True, debounce_by=None):
                        seen.items.append(text)
                        if early_break:
                            break
                    seen.result = plain(
                        {"usage": result.usage, "messages": result.all_messages()}, VOLATILE)  # fmt: skip
            except Exception as exc:
                seen.raised = plain(exc)

        asyncio.run(go())
        return seen

    return run


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize(("provider", "surface"), [("openai", names.CHAT_COMPLETIONS), ("anthropic", names.MESSAGES)],
                         ids=["openai", "anthropic"])  # fmt: skip
def test_pydantic_ai_run_stream(scripted: ScriptedServer, provider: str, surface: str, case: Case) -> None:
    check(scripted, surface, case, _runner(provider))


@pytest.mark.parametrize(("provider", "surface"), [("openai", names.CHAT_COMPLETIONS), ("anthropic", names.MESSAGES)],
                         ids=["openai", "anthropic"])  # fmt: skip
def test_ttfd_stays_in_prometheus_with_pydantic_ais_instrumentation(
    scripted: ScriptedServer, provider: str, surface: str
) -> None:
    """pydantic-ai's own instrumentation on, on the providers otelstream uses: its span owns the model request, and
    otelstream's own Prometheus registry, which pydantic-ai does not write, still counts the stream's TTFD (the
    shipped TTFD panels would lose these calls otherwise)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind
    from prometheus_client import CollectorRegistry
    from pydantic_ai.models.instrumented import InstrumentationSettings

    import otelstream
    from tests.compat.harness import script

    otelstream.uninstrument()
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    registry = CollectorRegistry()
    otelstream.instrument(tracer_provider=tp, meter_provider=mp, registry=registry)
    try:
        base_url = script(scripted, surface, Case("complete", names.COMPLETED))
        agent = pydantic_ai.Agent(_model(provider, base_url))
        agent.instrument = InstrumentationSettings(tracer_provider=tp, meter_provider=mp)

        async def go() -> list[str]:
            async with agent.run_stream("hi") as result:
                return [text async for text in result.stream_text(delta=True, debounce_by=None)]

        assert asyncio.run(go())
        assert otelstream.flush(10.0)
        ours = [s for s in exporter.get_finished_spans() if s.instrumentation_scope and
                s.instrumentation_scope.name == names.TRACER_NAME]  # fmt: skip
        assert len(ours) == 1 and ours[0].parent is not None  # under pydantic-ai's span
        # its span is the CLIENT one (a GenAI peer): otelstream nests an INTERNAL child
        parent = {s.context.span_id: s for s in exporter.get_finished_spans()}[ours[0].parent.span_id]
        assert parent.instrumentation_scope is not None and parent.instrumentation_scope.name == "pydantic-ai"
        assert parent.kind is SpanKind.CLIENT
        if provider == "openai":  # recognised as the GenAI peer: otelstream nests an INTERNAL child
            assert ours[0].kind is SpanKind.INTERNAL and ours[0].name == names.SPAN_STREAM_INTERNAL
        ttfd = [s.value for m in registry.collect() for s in m.samples
                if s.name == names.PROM_TIME_TO_FIRST_CHUNK + "_count"]  # fmt: skip
        assert sum(ttfd) == 1, ttfd
    finally:
        otelstream.uninstrument()
        mp.shutdown()
        tp.shutdown()
