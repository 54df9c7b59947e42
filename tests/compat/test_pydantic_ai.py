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
