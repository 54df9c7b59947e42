"""langchain-google-genai's ChatGoogleGenerativeAI, ``stream`` and ``astream``, against the Gemini stand-in: the
chunks and the exception the caller gets are the same with otelstream on, and each call is one ``generate_content``
span with its outcome.

What it streams through (langchain-google-genai 4.x): google-genai's own client, ``models.generate_content_stream``
for ``stream`` and ``aio.models.generate_content_stream`` for ``astream``, on the transports google-genai picks: with
the compat pins (google-genai 2.34, the newest pydantic-ai allows) httpx for sync (3.x picks httpx2) and aiohttp for
async (installed here by litellm; without it httpx)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat.cloud_harness import CLOUD_CASES, CLOUD_IDS, GEMINI, CloudCase, check_cloud
from tests.compat.harness import Seen, content, need, stream_seen
from tests.support.gemini_server import GeminiServer

langchain_google_genai = need("langchain_google_genai")

VOLATILE = frozenset({"id"})  # langchain's run id (lc_run--<uuid>), new per call


def _model(base_url: str, model: str) -> Any:
    # max_retries=1: one attempt (langchain-google-genai retries 6 times by default; 0 means the SDK's default)
    return langchain_google_genai.ChatGoogleGenerativeAI(model=model, base_url=base_url, google_api_key="k",
                                                         max_retries=1)  # fmt: skip


def _runner(is_async: bool) -> Any:
    def run(base_url: str, model_name: str, early_break: bool) -> Seen:
        model = _model(base_url, model_name)
        return stream_seen(lambda: (model.astream if is_async else model.stream)("hi"), is_async, early_break,
                           content, VOLATILE)  # fmt: skip

    return run


@pytest.mark.parametrize("case", CLOUD_CASES, ids=CLOUD_IDS)
@pytest.mark.parametrize("is_async", [False, True], ids=["stream", "astream"])
def test_langchain_google_genai(gemini: GeminiServer, is_async: bool, case: CloudCase) -> None:
    check_cloud(gemini, GEMINI, case, _runner(is_async))
