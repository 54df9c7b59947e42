"""openai-agents' ``Runner.run_streamed`` on its Responses model (the default) and its Chat Completions model: the
stream events, the final output and the exception are the same with otelstream on, and the model call is one span
with its outcome. The early break is the SDK's own ``cancel()``: leaving ``stream_events()`` alone does not stop
the run's background task."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.compat.harness import CASE_IDS, CASES, Case, Seen, check, need, plain
from tests.support.scripted_server import ScriptedServer

agents = need("agents")

import openai  # noqa: E402

from otelstream import names  # noqa: E402

agents.set_tracing_disabled(True)  # the SDK's own tracing would export to the OpenAI platform
VOLATILE = frozenset({"created_at", "created"})


def _event(e: Any) -> Any:
    """A stream event as plain data: the raw wire event, or the run item's raw item (not the Agent objects)."""
    if isinstance(e, agents.RawResponsesStreamEvent):
        return (e.type, plain(e.data, VOLATILE))
    if isinstance(e, agents.RunItemStreamEvent):
        return (e.type, e.name, plain(e.item.raw_item, VOLATILE))
    return (e.type, type(e).__name__)


def _runner(chat: bool) -> Any:
    def run(base_url: str, early_break: bool) -> Seen:
        seen = Seen()
        client = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key="k", max_retries=0)
        model: Any = (agents.OpenAIChatCompletionsModel if chat else agents.OpenAIResponsesModel)("gpt-test", client)
        agent = agents.Agent(name="assistant", model=model)

        async def go() -> None:
            result = agents.Runner.run_streamed(agent, "hi")
            try:
                async for e in result.stream_events():
                    seen.items.append(_event(e))
                    if early_break and isinstance(e, agents.RawResponsesStreamEvent) and "Hel" in repr(e.data):
                        result.cancel()
                        break
                seen.result = plain(result.final_output)
            except Exception as exc:
                seen.raised = plain(exc)

        asyncio.run(go())
        return seen

    return run


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize(("chat", "surface"), [(False, names.RESPONSES), (True, names.CHAT_COMPLETIONS)],
                         ids=["responses", "chat_completions"])  # fmt: skip
def test_openai_agents_run_streamed(scripted: ScriptedServer, chat: bool, surface: str, case: Case) -> None:
    check(scripted, surface, case, _runner(chat))
