"""The two cloud SDKs' clients over canned bodies, for the worker's commands: google-genai (``generate_content``) over
an httpx2 client with a MockTransport, as the OpenAI and Anthropic clients are; boto3 (sync) and aiobotocore (async)
(``converse``) answered in-process by a handler on botocore's public ``before-send`` event (a handler that returns a
response is sent nothing: how moto serves botocore), whose body botocore pulls frame by frame as from a socket.

The ``before-send`` handler is registered with ``register_last``: whatever an instrumentation registers on the same
event (otelstream takes the send time of the attempt there; peers may too) runs first, as it would before a real send.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

from bench import canned

BASE = "http://bench.invalid"
PROMPT_GEMINI = "Say something"
PROMPT_BEDROCK = [{"role": "user", "content": [{"text": "Say something"}]}]
_BEDROCK_HEADERS = {"x-amzn-requestid": "bench-bedrock-request", "content-type": "application/vnd.amazon.eventstream"}


def http_module(surface: str) -> ModuleType:
    """What the row's ``http`` says the surface is read with: httpx2 for google-genai (the client it is handed here,
    its default since 3.x), botocore (urllib3 sync, aiohttp async: never sent to here) for Bedrock."""
    if surface == "generate_content":
        import httpx2

        return httpx2
    import botocore

    return botocore


# --- google-genai -----------------------------------------------------------------------------------------------
class Gemini:
    """The genai client (held: a collected one closes its HTTP clients) and the models API of the mode."""

    def __init__(self, client: Any, mode: str) -> None:
        self.client = client
        self.mode = mode
        self.models = client.aio.models if mode == "async" else client.models


def _gemini_client(mode: str, frames_fn: Callable[[Any], Iterable[bytes]], **http_kwargs: Any) -> Gemini:
    import httpx2
    from google import genai
    from google.genai import types

    from bench.workers.clients import mock_http

    http = mock_http(httpx2, mode, frames_fn, **http_kwargs)
    key = "httpx_async_client" if mode == "async" else "httpx_client"
    options = types.HttpOptions(base_url=BASE, **{key: http})
    return Gemini(genai.Client(api_key="bench-gemini-key", http_options=options), mode)


def _gemini_stream(client: Gemini, extra_headers: dict) -> Any:
    kwargs: dict[str, Any] = {}
    if extra_headers:
        from google.genai import types

        kwargs["config"] = types.GenerateContentConfig(http_options=types.HttpOptions(headers=extra_headers))
    return client.models.generate_content_stream(model=canned.MODEL_GEMINI, contents=PROMPT_GEMINI, **kwargs)


# --- boto3 / aiobotocore ----------------------------------------------------------------------------------------
class _SyncRaw:
    """What botocore reads an event stream from: ``stream()`` yields the body's chunks (here: one frame each)."""

    def __init__(self, frames: Iterable[bytes]) -> None:
        self.frames = frames

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        yield from self.frames

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        return b"".join(self.frames)

    def close(self) -> None:
        pass


class _AsyncContent:
    def __init__(self, frames: Iterable[bytes]) -> None:
        self.frames = frames

    async def iter_chunks(self) -> AsyncIterator[tuple[bytes, bool]]:
        for chunk in self.frames:
            yield chunk, True


class _AsyncRaw:
    """aiobotocore's side: ``content.iter_chunks()`` as aiohttp's StreamReader offers it."""

    def __init__(self, frames: Iterable[bytes]) -> None:
        self.content = _AsyncContent(frames)
        self.frames = frames

    async def read(self) -> bytes:
        return b"".join(self.frames)

    def close(self) -> None:
        pass


def _client_kwargs() -> dict[str, Any]:
    from botocore.config import Config

    return {"service_name": "bedrock-runtime", "endpoint_url": BASE, "region_name": "us-east-1",
            "aws_access_key_id": "bench", "aws_secret_access_key": "bench",
            "config": Config(retries={"total_max_attempts": 1})}  # fmt: skip


def _serve(events: Any, mode: str, frames_fn: Callable[[Any], Iterable[bytes]]) -> None:
    def before_send(request: Any, **kwargs: Any) -> Any:
        frames = frames_fn(request)
        if mode == "async":
            from aiobotocore.awsrequest import AioAWSResponse

            return AioAWSResponse(request.url, 200, _BEDROCK_HEADERS, _AsyncRaw(frames))
        from botocore.awsrequest import AWSResponse

        return AWSResponse(request.url, 200, _BEDROCK_HEADERS, _SyncRaw(frames))

    events.register_last("before-send.bedrock-runtime", before_send, unique_id="bench-send")


class AioBedrock:
    """An aiobotocore client, created inside the first event loop that asks for it (its HTTP session binds to a
    loop; nothing is ever sent through it here) and kept for the process."""

    def __init__(self, frames_fn: Callable[[Any], Iterable[bytes]]) -> None:
        self.frames_fn = frames_fn
        self.client: Any = None

    async def get(self) -> Any:
        if self.client is None:
            from aiobotocore.session import get_session

            self.client = await get_session().create_client(**_client_kwargs()).__aenter__()
            _serve(self.client.meta.events, "async", self.frames_fn)
        return self.client


def _bedrock_client(mode: str, frames_fn: Callable[[Any], Iterable[bytes]]) -> Any:
    if mode == "async":
        return AioBedrock(frames_fn)
    import boto3

    client = boto3.client(**_client_kwargs())
    _serve(client.meta.events, "sync", frames_fn)
    return client


async def _aio_converse(holder: AioBedrock) -> Any:
    client = await holder.get()
    response = await client.converse_stream(modelId=canned.MODEL_BEDROCK, messages=PROMPT_BEDROCK,
                                            inferenceConfig={"maxTokens": 1024})  # fmt: skip
    return response["stream"]


# --- the worker's entry points ----------------------------------------------------------------------------------
def make_client(surface: str, mode: str, frames_fn: Callable[[Any], Iterable[bytes]], **http_kwargs: Any) -> Any:
    if surface == "generate_content":
        return _gemini_client(mode, frames_fn, **http_kwargs)
    return _bedrock_client(mode, frames_fn)


def open_stream(client: Any, surface: str, extra_headers: dict) -> Any:
    """The SDK's stream (sync) or an awaitable of it (async), as the caller opens it."""
    if surface == "generate_content":
        return _gemini_stream(client, extra_headers)
    if isinstance(client, AioBedrock):
        return _aio_converse(client)
    response = client.converse_stream(modelId=canned.MODEL_BEDROCK, messages=PROMPT_BEDROCK,
                                      inferenceConfig={"maxTokens": 1024})  # fmt: skip
    return response["stream"]

