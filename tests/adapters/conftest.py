"""Fixtures: adapters installed with a recording listener; real SDK clients over httpx2.MockTransport."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx2
import openai
import pytest

from otelstream import adapters
from tests.adapters.bodies import Server
from tests.adapters.recording import RecordingListener
from tests.sdk_features import OPENAI_HTTP


@pytest.fixture
def rec() -> Iterator[RecordingListener]:
    listener = RecordingListener()
    adapters.install(listener)
    try:
        yield listener
    finally:
        adapters.uninstall()


def iterator_kind(stream: object) -> str:
    """Which generator feeds an SDK stream: "observed" (ours around the SDK's), or "sdk" (not observed)."""
    it = stream.__dict__.get("_iterator")
    code = getattr(it, "gi_code", None) or getattr(it, "ag_code", None)
    name = getattr(code, "co_name", "")
    return "observed" if name.startswith("observe_") else "sdk"


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
