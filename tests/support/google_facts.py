"""The live canaries of google-genai's inventory facts (``adapters/google/wire.py``, listed in
``adapters/inventory.py``): each checks on the installed release, against the Gemini stand-in, what the adapter
takes from google-genai beyond its public API."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any
from unittest import mock

try:  # the [google] extra: test_inventory runs these canaries only where google-genai is installed
    from google import genai
    from google.genai import errors, models, types
except ModuleNotFoundError:
    genai = errors = models = types = None  # type: ignore[assignment]

from otelstream import adapters
from otelstream.adapters.google import wire
from tests.support.gemini_server import GeminiServer
from tests.support.recording import RecordingListener


def _client(server: GeminiServer, **options: Any) -> genai.Client:
    return genai.Client(api_key="x", http_options=types.HttpOptions(base_url=server.base_url, **options))


def api_client() -> None:
    """A Models knows its client; the client says whether it is Vertex and what its base URL is."""
    with GeminiServer() as server:
        client = _client(server)
        api = client.models._api_client
        assert api is client.aio.models._api_client
        assert api.vertexai is False or api.vertexai is None
        assert api._http_options.base_url.rstrip("/") == server.base_url.rstrip("/")


def chat_model() -> None:
    with GeminiServer() as server:
        client = _client(server)
        config = types.GenerateContentConfig(temperature=0.5)
        chat = client.chats.create(model="completed", config=config)
        assert chat._modules is client.models and chat._model == "completed" and chat._config is config
        achat = client.aio.chats.create(model="completed")
        assert achat._modules is client.aio.models and achat._model == "completed"


def _stream_sync(client: genai.Client, model: str = "completed") -> None:
    for _ in client.models.generate_content_stream(model=model, contents="hi"):
        pass


def _stream_async(client: genai.Client, model: str = "completed") -> None:
    async def go() -> None:
        async for _ in await client.aio.models.generate_content_stream(model=model, contents="hi"):
            pass

    asyncio.run(go())


def send_seen() -> None:
    """On the default transports (httpx2 sync, aiohttp async) the request's send is seen before its answer: every
    stream has its times from the send."""
    listener = RecordingListener()
    adapters.install(listener)
    try:
        with GeminiServer() as server:
            _stream_sync(_client(server))
            _stream_async(_client(server))
    finally:
        adapters.uninstall()
    assert len(listener.reports) == 2
    for report in listener.reports:
        assert report.unobserved == () and report.time_to_first_delta_ns is not None
        assert report.t_request_ns > 0


def chat_runs_models() -> None:
    """A chat's stream calls the models' stream method inside its first pull, not when it is created."""
    with GeminiServer() as server:
        client = _client(server)
        with mock.patch.object(models.Models, "generate_content_stream",
                               autospec=True, side_effect=models.Models.generate_content_stream) as inner:  # fmt: skip
            stream = client.chats.create(model="completed").send_message_stream("hi")
            assert inner.call_count == 0
            next(stream)
            assert inner.call_count == 1
            list(stream)
            assert inner.call_count == 1


def answer_passes_raise_for_response() -> None:
    """Each streamed answer, accepted or not, goes through APIError.raise_for_response (sync) and
    raise_for_async_response (async) once, before the stream yields."""
    calls: list[int] = []

    def spy(original: Callable[..., Any]) -> Callable[..., Any]:
        def run(response: Any) -> Any:
            calls.append(getattr(response, "status_code", None) or getattr(response, "status", 0))
            return original(response)

        return run

    sync_original = errors.APIError.raise_for_response
    async_original = errors.APIError.raise_for_async_response
    with GeminiServer() as server, \
            mock.patch.object(errors.APIError, "raise_for_response", spy(sync_original)), \
            mock.patch.object(errors.APIError, "raise_for_async_response", spy(async_original)):  # fmt: skip
        _stream_sync(_client(server))
        assert calls == [200]
        _stream_async(_client(server))
        assert calls == [200, 200]
        with contextlib.suppress(errors.ClientError):
            _stream_sync(_client(server), "http_429")
        assert calls == [200, 200, 429]


GOOGLE_LIVE: dict[tuple[str, str], Callable[..., None]] = {
    (wire.API_CLIENT.module, wire.API_CLIENT.path): api_client,
    (wire.CHAT_MODEL.module, wire.CHAT_MODEL.path): chat_model,
    (wire.SEND_SEEN.module, wire.SEND_SEEN.path): send_seen,
    ("google.genai.chats", "Chat.send_message_stream pulls Models.generate_content_stream inside its pulls"):
        chat_runs_models,
    ("google.genai._api_client", "each streamed answer passes APIError.raise_for_(async_)response"):
        answer_passes_raise_for_response,
}  # fmt: skip
