"""litellm with ``model="openai/…"``: litellm drives the openai SDK, so the SDK adapter reports the stream, exactly
once (litellm's own providers, which bypass the SDKs, are the HTTP-level observer's). ``completion`` and
``acompletion``: the chunks and the exception are the same with otelstream on."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat.harness import CASE_IDS, CASES, Case, Seen, check, need, stream_seen
from tests.support.scripted_server import ScriptedServer

litellm = need("litellm")

from otelstream import names  # noqa: E402

VOLATILE = frozenset({"created"})  # litellm stamps each chunk with the wall clock
MSGS = [{"role": "user", "content": "hi"}]


def _text(chunk: Any) -> str:
    return "".join(c.delta.content or "" for c in chunk.choices)


def _runner(is_async: bool) -> Any:
    def run(base_url: str, early_break: bool) -> Seen:
        kw: dict[str, Any] = dict(model="openai/gpt-test", api_base=base_url + "/v1", api_key="k", messages=MSGS,
                                  stream=True, stream_options={"include_usage": True}, max_retries=0)  # fmt: skip
        return stream_seen(lambda: (litellm.acompletion if is_async else litellm.completion)(**kw), is_async,
                           early_break, _text, VOLATILE)  # fmt: skip

    return run


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("is_async", [False, True], ids=["completion", "acompletion"])
def test_litellm_openai_provider(scripted: ScriptedServer, is_async: bool, case: Case) -> None:
    check(scripted, names.CHAT_COMPLETIONS, case, _runner(is_async))
