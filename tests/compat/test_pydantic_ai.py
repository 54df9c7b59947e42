"""pydantic-ai's ``Agent.run_stream`` on its OpenAI (Chat Completions) and Anthropic (Messages) models: the text
deltas, the result (output, usage, messages) and the exception are the same with otelstream on, and each model
request is one span with its outcome."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import SpanKind

from tests.compat.harness import (
    CASE_IDS,
    CASES,
    Case,
    Seen,
    agent_seen,
    beside_pydantic_ai_instrumentation,
    check,
    need,
    script,
)
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
        return agent_seen(pydantic_ai.Agent(_model(provider, base_url)), early_break, VOLATILE)

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
    base_url = script(scripted, surface, Case("complete", names.COMPLETED))
    run = beside_pydantic_ai_instrumentation(lambda: pydantic_ai.Agent(_model(provider, base_url)))
    assert run.texts
    # its span is the CLIENT one (a GenAI peer)
    assert run.parent.kind is SpanKind.CLIENT
    if provider == "openai":  # recognised as the GenAI peer: otelstream nests an INTERNAL child
        assert run.ours.kind is SpanKind.INTERNAL and run.ours.name == names.SPAN_STREAM_INTERNAL
    assert run.ttfd_count == 1, run.ttfd_count
