"""docs/frameworks.md's usage tip, held to the pinned releases: on Chat Completions the server reports token usage
only when the request asks (``stream_options.include_usage``), and these frameworks ask against a custom base URL
only when told to. Each is checked both ways on what reached the server, and with the setting the span carries the
usage the server sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from otelstream import names
from tests.compat.harness import instrumented, need
from tests.support import bodies
from tests.support.scripted_server import ScriptedServer

langchain_openai = need("langchain_openai")
agents = need("agents")
litellm = need("litellm")
llms_openai = need("llama_index.llms.openai")
pydantic_ai = need("pydantic_ai")
need("pydantic_ai.models.openai")

import openai  # noqa: E402
from llama_index.core.llms import ChatMessage  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

agents.set_tracing_disabled(True)
MSGS = [{"role": "user", "content": "hi"}]


def _langchain(url: str, tip: bool) -> None:
    kw: dict[str, Any] = {"stream_usage": True} if tip else {}
    list(langchain_openai.ChatOpenAI(model="gpt-test", base_url=url, api_key="k", **kw).stream("hi"))


def _agents(url: str, tip: bool) -> None:
    settings = agents.ModelSettings(include_usage=True) if tip else agents.ModelSettings()
    model = agents.OpenAIChatCompletionsModel("gpt-test", openai.AsyncOpenAI(base_url=url, api_key="k"))
    agent = agents.Agent(name="assistant", model=model, model_settings=settings)

    async def go() -> None:
        async for _ in agents.Runner.run_streamed(agent, "hi").stream_events():
            pass

    asyncio.run(go())


def _litellm(url: str, tip: bool) -> None:
    kw: dict[str, Any] = {"stream_options": {"include_usage": True}} if tip else {}
    list(litellm.completion(model="openai/gpt-test", api_base=url, api_key="k", messages=MSGS, stream=True, **kw))


def _llama_index(url: str, tip: bool) -> None:
    kw: dict[str, Any] = {"additional_kwargs": {"stream_options": {"include_usage": True}}} if tip else {}
    llm = llms_openai.OpenAI(model="gpt-4o", api_base=url, api_key="k", **kw)
    list(llm.stream_chat([ChatMessage(role="user", content="hi")]))


def _pydantic_ai(url: str, tip: bool) -> None:
    agent = pydantic_ai.Agent(OpenAIChatModel("gpt-test", provider=OpenAIProvider(base_url=url, api_key="k")))

    async def go() -> None:
        async with agent.run_stream("hi") as result:
            await result.get_output()

    asyncio.run(go())


# framework -> (stream once, whether it asks for usage without the tip)
FRAMEWORKS: dict[str, tuple[Callable[[str, bool], None], bool]] = {
    "langchain-openai": (_langchain, False),
    "openai-agents": (_agents, False),
    "litellm": (_litellm, False),
    "llama-index": (_llama_index, False),
    "pydantic-ai": (_pydantic_ai, True),
}


@pytest.mark.parametrize("tip", [False, True], ids=["default", "with_tip"])
@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_usage_requested(scripted: ScriptedServer, framework: str, tip: bool) -> None:
    stream, by_default = FRAMEWORKS[framework]
    key = scripted.add(bodies.chat("ok"))
    with instrumented() as tel:
        stream(scripted.url_for(key) + "/v1", tip)
        spans = tel.spans()
    (sent,) = scripted.bodies(key)
    asked = (json.loads(sent).get("stream_options") or {}).get("include_usage") is True
    assert asked == (tip or by_default), json.loads(sent)
    assert len(spans) == 1
    if asked:
        assert (spans[0].attributes or {}).get(names.ATTR_USAGE_OUTPUT) == 2
