"""Real SDK clients for the tests: over httpx2.MockTransport serving the canned bodies (``bodies.Server``), or on
the demo's fake provider."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import openai

from otelstream import names
from otelstream.demo.provider import FakeProvider
from tests.support.bodies import Server
from tests.support.sdk_features import ANTHROPIC_TRACING, OPENAI_HTTP


def openai_client(server: Server | None = None, **kwargs: object) -> openai.OpenAI:
    server = server or Server(is_async=False, http=OPENAI_HTTP)
    http = OPENAI_HTTP.Client(transport=OPENAI_HTTP.MockTransport(server))
    return openai.OpenAI(api_key="sk-test", base_url="http://mock.test/v1", http_client=http,
                         max_retries=kwargs.pop("max_retries", 0), **kwargs)  # type: ignore[arg-type]


def async_openai_client(server: Server | None = None, **kwargs: object) -> openai.AsyncOpenAI:
    server = server or Server(is_async=True, http=OPENAI_HTTP)
    http = OPENAI_HTTP.AsyncClient(transport=OPENAI_HTTP.MockTransport(server))
    return openai.AsyncOpenAI(api_key="sk-test", base_url="http://mock.test/v1", http_client=http,
                              max_retries=kwargs.pop("max_retries", 0), **kwargs)  # type: ignore[arg-type]


def anthropic_client(server: Server | None = None, **kwargs: object) -> anthropic.Anthropic:
    server = server or Server(is_async=False)
    http = httpx2.Client(transport=httpx2.MockTransport(server))
    return anthropic.Anthropic(api_key="sk-test", base_url="http://mock.test", http_client=http,
                               max_retries=kwargs.pop("max_retries", 0), **kwargs)  # type: ignore[arg-type]


def async_anthropic_client(server: Server | None = None, **kwargs: object) -> anthropic.AsyncAnthropic:
    server = server or Server(is_async=True)
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    return anthropic.AsyncAnthropic(api_key="sk-test", base_url="http://mock.test", http_client=http,
                                    max_retries=kwargs.pop("max_retries", 0), **kwargs)  # type: ignore[arg-type]


def client_for(provider: FakeProvider, surface: str, *, is_async: bool = False, anthropic_tracing: Any = False,
               **kw: Any) -> Any:  # fmt: skip
    """A real SDK client on the fake provider. Anthropic's own tracing is off unless asked for: with a global SDK
    TracerProvider installed by some other test it would otherwise make otelstream nest an INTERNAL span."""
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 10.0)
    if surface == names.MESSAGES:
        cls: Any = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        if anthropic_tracing or ANTHROPIC_TRACING:  # anthropic 1.0-1.13 have no tracing to switch off
            kw["open_telemetry"] = anthropic_tracing
        return cls(**provider.anthropic_kwargs(**kw))
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(**provider.openai_kwargs(**kw))
