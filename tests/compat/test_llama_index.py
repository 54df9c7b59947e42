"""llama-index's OpenAI LLM (``llama-index-llms-openai``), ``stream_chat`` and ``astream_chat``: the responses and
the exception are the same with otelstream on, and each call is one span with its outcome. Only its 0.1 line
resolves beside openai 3.x (later releases pin ``openai<3``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.compat.harness import CASE_IDS, CASES, Case, Seen, check, need, plain
from tests.support.scripted_server import ScriptedServer

llms_openai = need("llama_index.llms.openai")

from llama_index.core.llms import ChatMessage  # noqa: E402

from otelstream import names  # noqa: E402

VOLATILE = frozenset({"created"})
MSGS = [ChatMessage(role="user", content="hi")]


def _runner(is_async: bool) -> Any:
    def run(base_url: str, early_break: bool) -> Seen:
        seen = Seen()
        llm = llms_openai.OpenAI(model="gpt-4o", api_base=base_url + "/v1", api_key="k", max_retries=0)
        if not is_async:
            try:
                for r in llm.stream_chat(MSGS):
                    seen.items.append(plain(r, VOLATILE))
                    if early_break and r.delta:
                        break
            except Exception as exc:
                seen.raised = plain(exc)
            return seen

        async def go() -> None:
            try:
                async for r in await llm.astream_chat(MSGS):
                    seen.items.append(plain(r, VOLATILE))
                    if early_break and r.delta:
                        break
            except Exception as exc:
                seen.raised = plain(exc)

        asyncio.run(go())
        return seen

    return run


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("is_async", [False, True], ids=["stream_chat", "astream_chat"])
def test_llama_index_openai(scripted: ScriptedServer, is_async: bool, case: Case) -> None:
    check(scripted, names.CHAT_COMPLETIONS, case, _runner(is_async))
