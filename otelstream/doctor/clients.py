"""The installed SDKs' own clients over the mock transport, and one stream opener per surface (the entry points an
application calls: ``responses.create``, ``chat.completions.create``, ``completions.create``, ``messages.create``,
each with ``stream=True``).

Retries are off (each cell is one attempt), the SDK's own tracing is off where it has one (its spans would reach the
application's tracer provider), and every request carries the header that names its cell.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Final

from otelstream import names
from otelstream.doctor.bodies import Served
from otelstream.doctor.transport import CELL_HEADER, handler, http_library

SDK_BY_SURFACE: Final = {
    names.RESPONSES: "openai",
    names.CHAT_COMPLETIONS: "openai",
    names.COMPLETIONS: "openai",
    names.MESSAGES: "anthropic",
    names.GENERATE_CONTENT: "google.genai",
}
_BASE_URL: Final = {"openai": "http://otelstream-doctor.invalid/v1", "anthropic": "http://otelstream-doctor.invalid",
                    "google.genai": "http://otelstream-doctor.invalid"}  # fmt: skip
_PROMPT: Final = [{"role": "user", "content": "x"}]

Opener = Callable[[Any, str], Any]  # (client, cell key) -> the SDK's stream (an awaitable of it on async clients)


def installed(sdk: str) -> bool:
    try:
        return importlib.util.find_spec(sdk) is not None
    except ImportError:  # google.genai without the google namespace package
        return False


class _Genai:
    """google-genai's client as the runner uses the others: ``models`` (the async ones on an async client) and
    ``close()`` (a coroutine on an async client). The client is held: a collected one closes its HTTP clients."""

    def __init__(self, client: Any, is_async: bool, http_client: Any) -> None:
        self.client = client
        self.is_async = is_async
        self.http_client = http_client
        self.models = client.aio.models if is_async else client.models

    def close(self) -> Any:
        if not hasattr(self.client, "close"):  # releases before Client.close(): the mock client is ours to close
            return self.http_client.aclose() if self.is_async else self.http_client.close()
        return self.client.aio.aclose() if self.is_async else self.client.close()


def _genai_library(api: Any, is_async: bool) -> ModuleType:
    """The httpx library the release streams with by default: that of the client it made (httpx2 on 3.x, httpx on
    the older releases [google] allows)."""
    made = api._async_httpx_client if is_async else api._httpx_client
    for cls in type(made).__mro__:
        root = cls.__module__.partition(".")[0]
        if cls.__name__ in ("Client", "AsyncClient") and root in ("httpx", "httpx2"):
            return importlib.import_module(root)
    raise LookupError(f"google-genai's default client {type(made).__name__} derives from no httpx / httpx2 client")


def _genai_client(plans: Mapping[str, Served], is_async: bool) -> _Genai:
    """google-genai over its httpx library's mock transport (the async client then uses it rather than aiohttp:
    aiohttp has no mock transport; the live tests cover it). Releases with the ``httpx_client`` options are handed
    the mock client through them; older ones (1.10) take none, and their client's ``_httpx_client`` /
    ``_async_httpx_client`` is replaced: a release without it fails its cells here ("could not run"), by name."""
    from google import genai
    from google.genai import types

    base: dict[str, Any] = {"base_url": _BASE_URL["google.genai"], "timeout": 5000}
    client = genai.Client(api_key="otelstream-doctor", http_options=types.HttpOptions(**base))
    http = _genai_library(client._api_client, is_async)
    transport = http.MockTransport(handler(http, plans, is_async=is_async))
    http_client: Any = (http.AsyncClient if is_async else http.Client)(transport=transport, trust_env=False)
    key = "httpx_async_client" if is_async else "httpx_client"
    if key in types.HttpOptions.model_fields:
        options = types.HttpOptions(**base, **{key: http_client})
        client = genai.Client(api_key="otelstream-doctor", http_options=options)
    else:
        setattr(client._api_client, f"_{'async_' if is_async else ''}httpx_client", http_client)
    return _Genai(client, is_async, http_client)


def make_client(sdk: str, plans: Mapping[str, Served], *, is_async: bool) -> Any:
    if sdk == "google.genai":
        return _genai_client(plans, is_async)
    module: ModuleType = importlib.import_module(sdk)
    http = http_library(module)
    transport = http.MockTransport(handler(http, plans, is_async=is_async))
    # trust_env off: nothing of the environment (proxies, netrc) may route a doctor request anywhere but the mock
    client_cls = http.AsyncClient if is_async else http.Client
    http_client = client_cls(transport=transport, trust_env=False)
    cls = getattr(module, ("Async" if is_async else "") + ("OpenAI" if sdk == "openai" else "Anthropic"))
    kwargs: dict[str, Any] = {"api_key": "otelstream-doctor", "base_url": _BASE_URL[sdk], "http_client": http_client,
                              "max_retries": 0, "timeout": 5.0}  # fmt: skip
    if "open_telemetry" in inspect.signature(cls.__init__).parameters:  # anthropic 1.14+ traces on its own
        kwargs["open_telemetry"] = False
    return cls(**kwargs)


def _headers(key: str) -> dict[str, str]:
    return {CELL_HEADER: key}


def _responses(client: Any, key: str) -> Any:
    return client.responses.create(model="gpt-doctor", input="x", stream=True, extra_headers=_headers(key))


_USAGE: Final = {"include_usage": True}  # the usage chunk, as applications that count tokens ask for it


def _chat(client: Any, key: str) -> Any:
    return client.chat.completions.create(model="gpt-doctor", messages=_PROMPT, stream=True, stream_options=_USAGE,
                                          extra_headers=_headers(key))  # fmt: skip


def _completions(client: Any, key: str) -> Any:
    return client.completions.create(model="gpt-doctor", prompt="x", stream=True, stream_options=_USAGE,
                                     extra_headers=_headers(key))  # fmt: skip


def _messages(client: Any, key: str) -> Any:
    return client.messages.create(model="claude-doctor", max_tokens=16, messages=_PROMPT, stream=True,
                                  extra_headers=_headers(key))  # fmt: skip


def _generate_content(client: Any, key: str) -> Any:
    from google.genai import types

    config = types.GenerateContentConfig(http_options=types.HttpOptions(headers=_headers(key)))
    return client.models.generate_content_stream(model="gemini-doctor", contents="x", config=config)


OPENERS: Final[Mapping[str, Opener]] = {
    names.RESPONSES: _responses,
    names.CHAT_COMPLETIONS: _chat,
    names.COMPLETIONS: _completions,
    names.MESSAGES: _messages,
    names.GENERATE_CONTENT: _generate_content,
}
