"""langchain-openai (Chat Completions) and langchain-anthropic (Messages), ``stream`` and ``astream``: the chunks
and the exception the caller gets are the same with otelstream on, and each call is one span with its outcome."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat.harness import CASE_IDS, CASES, Case, Seen, check, content, need, stream_seen
from tests.support.scripted_server import ScriptedServer

langchain_openai = need("langchain_openai")
langchain_anthropic = need("langchain_anthropic")

from otelstream import names  # noqa: E402

VOLATILE = frozenset({"id"})  # langchain's run id (lc_run--<uuid>), new per call


def _model(provider: str, base_url: str) -> Any:
    if provider == "openai":
        # stream_usage=True: against a custom base URL langchain-openai does not ask for the usage chunk otherwise
        return langchain_openai.ChatOpenAI(model="gpt-test", base_url=base_url + "/v1", api_key="k", max_retries=0,
                                           stream_usage=True)  # fmt: skip
    return langchain_anthropic.ChatAnthropic(model="claude-test", base_url=base_url, api_key="k", max_retries=0)


def _runner(provider: str, is_async: bool) -> Any:
    def run(base_url: str, early_break: bool) -> Seen:
        model = _model(provider, base_url)
        return stream_seen(lambda: (model.astream if is_async else model.stream)("hi"), is_async, early_break,
                           content, VOLATILE)  # fmt: skip

    return run


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("is_async", [False, True], ids=["stream", "astream"])
@pytest.mark.parametrize(("provider", "surface"), [("openai", names.CHAT_COMPLETIONS), ("anthropic", names.MESSAGES)],
                         ids=["langchain-openai", "langchain-anthropic"])  # fmt: skip
def test_langchain(scripted: ScriptedServer, provider: str, surface: str, is_async: bool, case: Case) -> None:
    check(scripted, surface, case, _runner(provider, is_async))
