"""What a measured process streams through: a real SDK client (or, for the HTTP-level observer's surfaces, a plain
HTTP client) over the HTTP library's MockTransport replaying a canned body, and the caller's loop that reads it.

The worker's commands (``bench/workers/main.py``) and the diagnostics in ``bench/tools/`` build their streams here.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

from bench import canned, configs

PROMPT = [{"role": "user", "content": "Say something"}]


BASE = "http://bench.invalid"


def http_module(surface: str) -> ModuleType:
    """The HTTP client library the surface is read through: the SDK's own (httpx2; httpx for openai 2.x). The
    HTTP-level observer's surfaces take the one this SDK set's openai reads with: a plain client of the same library
    (httpx is also what litellm's own providers use). google-genai: the library of the client it is handed (httpx2
    in every release the bench runs); boto3 / aiobotocore: botocore itself (urllib3 / aiohttp), whose send is answered
    in-process (``bench/workers/cloud.py``)."""
    lib = configs.lib_of(surface)
    if lib in ("google", "bedrock"):
        from bench.workers import cloud

        return cloud.http_module(surface)
    sdk = importlib.import_module("anthropic" if lib == "anthropic" else "openai")
    for cls in sdk.DefaultHttpxClient.__mro__:
        root = cls.__module__.partition(".")[0]
        if root in ("httpx", "httpx2"):
            return importlib.import_module(root)
    raise SystemExit(f"{sdk.__name__} {sdk.__version__}: its client is neither httpx's nor httpx2's")


def make_client(surface: str, mode: str, setup: configs.Setup, frames_fn: Callable[[Any], Iterable[bytes]],
                **http_kwargs: Any) -> Any:  # fmt: skip
    """A real SDK client whose transport replays the canned body (``frames_fn(request)`` -> list of frames); for the
    HTTP-level observer's surfaces the plain HTTP client itself."""
    if configs.lib_of(surface) in ("google", "bedrock"):
        from bench.workers import cloud

        return cloud.make_client(surface, mode, frames_fn, **http_kwargs)
    httpx = http_module(surface)
    if surface in canned.HTTP_SURFACES:
        http_kwargs["base_url"] = BASE
    http = mock_http(httpx, mode, frames_fn, **http_kwargs)
    if surface in canned.HTTP_SURFACES:
        return http
    return _sdk_client(surface, mode, setup, http)


def mock_http(httpx: ModuleType, mode: str, frames_fn: Callable[[Any], Iterable[bytes]], **http_kwargs: Any) -> Any:
    """A client of the HTTP library ``httpx`` (httpx or httpx2) whose MockTransport answers every request with the
    frames of ``frames_fn(request)``, a 200 SSE body pulled frame by frame as from a socket."""
    headers = {"content-type": "text/event-stream", "x-request-id": "req_bench"}
    if mode == "sync":

        def handler(request):
            return httpx.Response(200, headers=headers, content=iter(frames_fn(request)))

        return httpx.Client(transport=httpx.MockTransport(handler), **http_kwargs)

    def ahandler(request):
        frames = frames_fn(request)

        async def body():
            for f in frames:
                yield f

        return httpx.Response(200, headers=headers, content=body())

    return httpx.AsyncClient(transport=httpx.MockTransport(ahandler), **http_kwargs)


def _sdk_client(surface: str, mode: str, setup: configs.Setup, http: Any) -> Any:
    if configs.lib_of(surface) == "anthropic":
        import anthropic

        cls = anthropic.Anthropic if mode == "sync" else anthropic.AsyncAnthropic
        options = setup.anthropic_kwargs
        if not configs.anthropic_traces():  # anthropic 1.x: no tracing of its own, no option to turn it off
            options = {k: v for k, v in options.items() if k != "open_telemetry"}
        return cls(api_key="sk-ant-bench", base_url=BASE, max_retries=0, http_client=http, **options)
    import openai

    cls = openai.OpenAI if mode == "sync" else openai.AsyncOpenAI
    return cls(api_key="sk-bench", base_url=BASE + "/v1", max_retries=0, http_client=http)


# the HTTP-level observer's surfaces: (path, JSON body, headers) of the request a caller sends without an SDK
_HTTP_REQUESTS = {
    "http-chat": ("/v1/chat/completions", {"model": canned.MODEL_OA, "messages": PROMPT, "stream": True,
                                           "stream_options": {"include_usage": True}}, {}),
    "http-messages": ("/v1/messages", {"model": canned.MODEL_AN, "max_tokens": 1024, "messages": PROMPT,
                                       "stream": True}, {"anthropic-version": "2023-06-01"}),
}  # fmt: skip


def _http_events(client: Any, surface: str, extra_headers: dict) -> Iterator[Any]:
    """A caller's own SSE reading over a plain client, as litellm's providers do: ``iter_lines()``, every ``data:``
    payload but ``[DONE]`` parsed, to the end of the body."""
    path, body, headers = _HTTP_REQUESTS[surface]
    with client.stream("POST", path, json=body, headers={**headers, **extra_headers}) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                yield json.loads(line[6:])


async def _http_aevents(client: Any, surface: str, extra_headers: dict) -> AsyncIterator[Any]:
    path, body, headers = _HTTP_REQUESTS[surface]
    async with client.stream("POST", path, json=body, headers={**headers, **extra_headers}) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                yield json.loads(line[6:])


async def _ready(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    return events


def open_stream(client: Any, surface: str, extra_headers: dict | None = None) -> Any:
    """The create(stream=True) call (a coroutine for async clients); on a plain HTTP client, the caller's own read."""
    eh = extra_headers or {}
    if surface in canned.CLOUD_SURFACES:
        from bench.workers import cloud

        return cloud.open_stream(client, surface, eh)
    if surface in canned.HTTP_SURFACES:
        if isinstance(client, sys.modules[type(client).__module__.partition(".")[0]].AsyncClient):
            return _ready(_http_aevents(client, surface, eh))
        return _http_events(client, surface, eh)
    if surface == "responses":
        return client.responses.create(model=canned.MODEL_OA, input="Say something", stream=True, extra_headers=eh)
    if surface == "chat":
        return client.chat.completions.create(model=canned.MODEL_OA, messages=PROMPT, stream=True,
                                              stream_options={"include_usage": True}, extra_headers=eh)  # fmt: skip
    if surface == "completions":
        return client.completions.create(model="gpt-3.5-turbo-instruct", prompt="Say something", stream=True,
                                         stream_options={"include_usage": True}, extra_headers=eh)  # fmt: skip
    return client.messages.create(model=canned.MODEL_AN, max_tokens=1024, messages=PROMPT, stream=True,
                                  extra_headers=eh)  # fmt: skip


def run_sync(client, surface: str) -> int:
    n = 0
    for _ in open_stream(client, surface):
        n += 1
    return n


async def run_async(client, surface: str) -> int:
    n = 0
    stream = await open_stream(client, surface)
    async for _ in stream:
        n += 1
    return n
