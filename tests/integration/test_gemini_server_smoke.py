"""The Gemini stand-in (tests/support/gemini_server.py) as the real google-genai client sees it, with no otelstream
involved: every script, sync and async, on each transport google-genai streams with (httpx2 by default for sync;
aiohttp by default for async when it is installed, httpx2 when an httpx2 client is given; httpx when one is given).
What the live adapter tests of issue 36 rely on the server to do, checked once here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
import httpx2
import pytest
from google import genai
from google.auth.credentials import Credentials
from google.genai import errors, types

from tests.support.gemini_server import SCRIPTS, GeminiServer

READ_TIMEOUT_MS = 1000  # aiohttp gets it as the total timeout: above the 0.4 s pause
TIMEOUTS = (httpx2.ReadTimeout, httpx.ReadTimeout, aiohttp.SocketTimeoutError, asyncio.TimeoutError)
BROKEN = (httpx2.ReadError, httpx2.RemoteProtocolError, httpx.ReadError, httpx.RemoteProtocolError,
          aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError)  # fmt: skip


@dataclass(frozen=True)
class Seen:
    parts: list[tuple[str, bool]]  # (text, thought) of every part with text, in order
    finish: list[str]
    block: str | None
    error: BaseException | None
    model_version: str | None


def _take(chunks: list[types.GenerateContentResponse], error: BaseException | None) -> Seen:
    parts, finish, block, version = [], [], None, None
    for c in chunks:
        version = version or c.model_version
        if c.prompt_feedback and c.prompt_feedback.block_reason:
            block = c.prompt_feedback.block_reason.value
        for cand in c.candidates or []:
            for p in (cand.content.parts or []) if cand.content else []:
                if p.text:
                    parts.append((p.text, bool(p.thought)))
            if cand.finish_reason:
                finish.append(cand.finish_reason.value)
    return Seen(parts, finish, block, error, version)


EXPECT: dict[str, Callable[[Seen], bool]] = {
    "completed": lambda s: s.parts == [("Hel", False), ("lo", False), ("!", False)] and s.finish == ["STOP"],
    "pause": lambda s: s.finish == ["STOP"] and s.error is None,
    "reasoning": lambda s: [t for _, t in s.parts] == [True, True, False, False] and s.finish == ["STOP"],
    "cut": lambda s: s.parts == [("Hel", False), ("lo", False)] and s.finish == [] and s.error is None,
    "error": lambda s: isinstance(s.error, errors.ServerError) and s.error.code == 500 and s.parts == [("Hel", False)],
    "error_exhausted": lambda s: isinstance(s.error, errors.ClientError) and s.error.status == "RESOURCE_EXHAUSTED",
    "max_tokens": lambda s: s.finish == ["MAX_TOKENS"] and s.error is None,
    "safety": lambda s: s.block == "SAFETY" and s.parts == [] and s.error is None,
    "http_429": lambda s: isinstance(s.error, errors.ClientError) and s.error.code == 429 and not s.parts,
    "http_503": lambda s: isinstance(s.error, errors.ServerError) and s.error.status == "UNAVAILABLE",
    "stall": lambda s: isinstance(s.error, TIMEOUTS) and s.parts == [("Hel", False)],
    "reset": lambda s: isinstance(s.error, BROKEN) and s.parts == [("Hel", False)],
}


def test_every_script_has_an_expectation() -> None:
    assert set(EXPECT) == set(SCRIPTS)


@pytest.fixture(scope="module")
def server() -> Any:
    with GeminiServer() as s:
        yield s


def _options(server: GeminiServer, transport: str) -> types.HttpOptions:
    kw: dict[str, Any] = {"base_url": server.base_url, "timeout": READ_TIMEOUT_MS}
    if transport == "httpx":
        kw |= {"httpx_client": httpx.Client(timeout=READ_TIMEOUT_MS / 1000),
               "httpx_async_client": httpx.AsyncClient(timeout=READ_TIMEOUT_MS / 1000)}  # fmt: skip
    elif transport == "httpx2":
        kw |= {"httpx_async_client": httpx2.AsyncClient(timeout=READ_TIMEOUT_MS / 1000)}
    return types.HttpOptions(**kw)


def _sync(client: genai.Client, model: str) -> Seen:
    chunks: list[types.GenerateContentResponse] = []
    try:
        for c in client.models.generate_content_stream(model=model, contents="hi"):
            chunks.append(c)
    except Exception as e:  # the script's failure, judged by EXPECT
        return _take(chunks, e)
    return _take(chunks, None)


async def _async(client: genai.Client, model: str) -> Seen:
    chunks: list[types.GenerateContentResponse] = []
    try:
        async for c in await client.aio.models.generate_content_stream(model=model, contents="hi"):
            chunks.append(c)
    except Exception as e:
        return _take(chunks, e)
    return _take(chunks, None)


@pytest.mark.parametrize("transport", ["httpx2", "httpx"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_sync_client_receives_the_script(server: GeminiServer, script: str, transport: str) -> None:
    client = genai.Client(api_key="x", http_options=_options(server, transport))
    seen = _sync(client, script)
    assert EXPECT[script](seen), seen
    assert server.requests[-1].script == script
    assert ":streamGenerateContent" in server.requests[-1].path


@pytest.mark.parametrize("transport", ["aiohttp", "httpx2", "httpx"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_async_client_receives_the_script(server: GeminiServer, script: str, transport: str) -> None:
    client = genai.Client(api_key="x", http_options=_options(server, transport))
    assert client._api_client._use_aiohttp() == (transport == "aiohttp")  # the transport this case is about
    seen = asyncio.run(_async(client, script))
    assert EXPECT[script](seen), seen


def test_one_request_per_stream_no_sdk_retries(server: GeminiServer) -> None:
    before = len(server.requests)
    _sync(genai.Client(api_key="x", http_options=_options(server, "httpx2")), "http_503")
    assert len(server.requests) == before + 1


def test_vertex_path_and_header_choice(server: GeminiServer) -> None:
    """Vertex AI's path shape is served too, and ``x-script`` overrides the model name."""
    opts = types.HttpOptions(base_url=server.base_url, headers={"x-script": "max_tokens"})
    client = genai.Client(vertexai=True, project="p", location="us-central1", credentials=_StaticToken(),
                          http_options=opts)  # fmt: skip
    seen = _sync(client, "gemini-2.5-flash")
    assert seen.finish == ["MAX_TOKENS"], seen
    assert "/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent" in (
        server.requests[-1].path
    )


def test_pause_reaches_the_caller_after_the_pause(server: GeminiServer) -> None:
    """Headers come at once; the first chunk only after the scripted pause (the server flushes every step)."""
    import time

    client = genai.Client(api_key="x", http_options=_options(server, "httpx2"))
    t0 = time.monotonic()
    it = iter(client.models.generate_content_stream(model="pause", contents="hi"))
    next(it)
    assert time.monotonic() - t0 >= 0.4
    list(it)


class _StaticToken(Credentials):  # type: ignore[misc]
    """A bearer token that never needs Google: what a Vertex client pointed at the stand-in sends."""

    def refresh(self, request: Any) -> None:
        self.token = "x"


def test_chat_send_message_stream_sync_and_async(server: GeminiServer) -> None:
    """``chats`` streams through the same request: the stand-in serves it by the chat's model."""
    client = genai.Client(api_key="x", http_options=_options(server, "httpx2"))
    texts = [c.text for c in client.chats.create(model="completed").send_message_stream("hi")]
    assert texts == ["Hel", "lo", "!"]

    async def go() -> list[str | None]:
        chat = client.aio.chats.create(model="max_tokens")
        return [c.candidates[0].finish_reason.value if c.candidates and c.candidates[0].finish_reason else None
                async for c in await chat.send_message_stream("hi")]  # fmt: skip

    assert asyncio.run(go()) == [None, "MAX_TOKENS"]
