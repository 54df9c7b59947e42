"""Real SDK clients over their HTTP library's MockTransport (httpx2; httpx for openai 2.x) serving whatever body
the test sets, in seeded chunks, and what the caller saw of it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai

from otelstream import names
from tests.support.sdk_features import OPENAI_HTTP, http_of


def surface_of(path: Path) -> str | None:
    """The surface a corpus body was recorded on (captures by folder, fixtures by name prefix)."""
    if not path.name.endswith(".sse"):
        return None
    parts = set(path.parts)
    name = path.name
    if "responses" in parts or name.startswith("responses-"):
        return names.RESPONSES
    if "chat-completions" in parts or name.startswith("chat-"):
        return names.CHAT_COMPLETIONS
    if "completions" in parts or name.startswith("completions-"):
        return names.COMPLETIONS
    if "messages" in parts or name.startswith("messages-"):
        return names.MESSAGES
    return None  # anthropic/complete is out of scope


@dataclass(frozen=True)
class Seen:
    """What the caller saw: every item (by repr) and the exception that ended the stream, if any."""

    items: tuple[str, ...]
    error: tuple[str, str] | None

    @property
    def short(self) -> str:
        return f"{len(self.items)} items, error={self.error}"


def _chunks(body: bytes, seed: int) -> list[bytes]:
    """The body split at seeded positions: half-written lines and events reach the SDK's decoder."""
    rng = random.Random(seed)
    out: list[bytes] = []
    i = 0
    while i < len(body):
        n = rng.choice((1, 7, 64, 1000, 16384))
        out.append(body[i : i + n])
        i += n
    return out


class Bodies:
    """A MockTransport handler serving ``body`` (in seeded chunks) for the next request."""

    def __init__(self) -> None:
        self.body = b""
        self.seed = 0
        self.status = 200

    def __call__(self, request: Any) -> Any:
        headers = {"content-type": "text/event-stream", "x-request-id": "req_mock"}
        return http_of(request).Response(self.status, headers=headers, content=iter(_chunks(self.body, self.seed)))


class AsyncBodies(Bodies):
    def __call__(self, request: Any) -> Any:
        chunks = _chunks(self.body, self.seed)

        async def gen() -> AsyncIterator[bytes]:
            for c in chunks:
                yield c

        return http_of(request).Response(self.status, headers={"content-type": "text/event-stream"}, content=gen())


class Clients:
    def __init__(self, handler: Bodies) -> None:
        self.handler = handler
        http = httpx2.Client(transport=httpx2.MockTransport(handler))
        oa_http = OPENAI_HTTP.Client(transport=OPENAI_HTTP.MockTransport(handler))
        self.oa = openai.OpenAI(api_key="sk-test", base_url="http://mock.test/v1", http_client=oa_http, max_retries=0)
        self.an = anthropic.Anthropic(api_key="sk-test", base_url="http://mock.test", http_client=http, max_retries=0)

    def open(self, surface: str, model: str) -> Any:
        msgs = [{"role": "user", "content": "x"}]
        if surface == names.RESPONSES:
            return self.oa.responses.create(model=model, input="x", stream=True)
        if surface == names.CHAT_COMPLETIONS:
            return self.oa.chat.completions.create(model=model, messages=msgs, stream=True)  # type: ignore[arg-type]
        if surface == names.COMPLETIONS:
            return self.oa.completions.create(model=model, prompt="x", stream=True)
        return self.an.messages.create(model=model, max_tokens=5, messages=msgs, stream=True)  # type: ignore[arg-type]

    def consume(self, surface: str, body: bytes, model: str, seed: int = 0) -> Seen:
        self.handler.body, self.handler.seed = body, seed
        items: list[str] = []
        try:
            with self.open(surface, model) as stream:
                for item in stream:
                    items.append(repr(item))
        except Exception as exc:
            return Seen(tuple(items), (type(exc).__name__, str(exc)[:200]))
        return Seen(tuple(items), None)


class AsyncClients:
    def __init__(self, handler: AsyncBodies) -> None:
        self.handler = handler
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        oa_http = OPENAI_HTTP.AsyncClient(transport=OPENAI_HTTP.MockTransport(handler))
        self.oa = openai.AsyncOpenAI(api_key="sk-test", base_url="http://mock.test/v1", http_client=oa_http,
                                     max_retries=0)  # fmt: skip
        self.an = anthropic.AsyncAnthropic(api_key="sk-test", base_url="http://mock.test", http_client=http,
                                           max_retries=0)  # fmt: skip

    async def open(self, surface: str, model: str) -> Any:
        msgs = [{"role": "user", "content": "x"}]
        if surface == names.RESPONSES:
            return await self.oa.responses.create(model=model, input="x", stream=True)
        if surface == names.CHAT_COMPLETIONS:
            return await self.oa.chat.completions.create(model=model, messages=msgs, stream=True)  # type: ignore[arg-type]
        if surface == names.COMPLETIONS:
            return await self.oa.completions.create(model=model, prompt="x", stream=True)
        return await self.an.messages.create(model=model, max_tokens=5, messages=msgs, stream=True)  # type: ignore[arg-type]

    async def consume(self, surface: str, body: bytes, model: str, seed: int = 0) -> Seen:
        self.handler.body, self.handler.seed = body, seed
        items: list[str] = []
        try:
            stream = await self.open(surface, model)
            async with stream:
                async for item in stream:
                    items.append(repr(item))
        except Exception as exc:
            return Seen(tuple(items), (type(exc).__name__, str(exc)[:200]))
        return Seen(tuple(items), None)


def run_async(coro: Any) -> Any:
    return asyncio.run(coro)
