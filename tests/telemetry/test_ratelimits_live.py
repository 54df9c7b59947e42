"""Rate-limit headroom live: the real openai / anthropic clients, sync and async, against a scripted server on
127.0.0.1 that answers with OpenAI-style (``x-ratelimit-*``) and Anthropic-style (``anthropic-ratelimit-*``)
headers. The numbers reach the report (``StreamReport.ratelimits``) and the gauges ``otelstream_ratelimit_remaining``
/ ``_limit`` by ``kind`` on both metric paths: the native Prometheus registry and the OTel meter provider read
through ``PrometheusMetricReader``. Nothing but those numbers is kept of the headers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry

import otelstream
from otelstream import names
from otelstream.core.report import RateLimit
from tests.support import bodies
from tests.support.scripted_server import ScriptedServer
from tests.support.sdk_features import ANTHROPIC_HTTP, OPENAI_HTTP
from tests.telemetry.harness import Telemetry

MSGS: Any = [{"role": "user", "content": "x"}]

OPENAI_HEADERS = {
    "x-ratelimit-limit-requests": "5000",
    "x-ratelimit-remaining-requests": "4999",
    "x-ratelimit-limit-tokens": "160000",
    "x-ratelimit-remaining-tokens": "159850",
    "x-ratelimit-reset-requests": "12ms",  # not a number of the headroom: never read
    "x-ratelimit-reset-tokens": "56ms",
}
ANTHROPIC_HEADERS = {
    "anthropic-ratelimit-requests-limit": "50",
    "anthropic-ratelimit-requests-remaining": "3",
    "anthropic-ratelimit-tokens-limit": "90000",
    "anthropic-ratelimit-tokens-remaining": "81000",
    "anthropic-ratelimit-input-tokens-limit": "40000",
    "anthropic-ratelimit-input-tokens-remaining": "39990",
    "anthropic-ratelimit-output-tokens-limit": "8000",
    "anthropic-ratelimit-output-tokens-remaining": "7998",
    "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:00Z",
}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer().start()
    try:
        yield s
    finally:
        s.close()


@dataclass
class Both:
    tel: Telemetry
    otel_registry: CollectorRegistry


@pytest.fixture
def both() -> Iterator[Both]:
    otelstream.uninstrument()
    tel = Telemetry.new()
    otel_registry = CollectorRegistry()
    reader = PrometheusMetricReader(disable_target_info=True, scope_info_enabled=False, registry=otel_registry)
    mp = MeterProvider(metric_readers=[reader])
    otelstream.instrument(tracer_provider=tel.tracer_provider, registry=tel.registry, meter_provider=mp)
    try:
        yield Both(tel, otel_registry)
    finally:
        otelstream.uninstrument()
        tel.tracer_provider.shutdown()
        mp.shutdown()


def _gauges(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    """(family, kind) -> value of the rate-limit gauges; every series also carries the common labels."""
    out = {}
    for fam in registry.collect():
        for s in fam.samples:
            if s.name in (names.PROM_RATELIMIT_REMAINING, names.PROM_RATELIMIT_LIMIT):
                assert s.labels[names.LABEL_PROVIDER] in (names.PROVIDER_OPENAI, names.PROVIDER_ANTHROPIC)
                assert s.labels[names.LABEL_SERVER_ADDRESS] == "127.0.0.1"
                out[(s.name, s.labels[names.LABEL_KIND])] = s.value
    return out


def _expected(limits: dict[str, tuple[float, float]]) -> dict[tuple[str, str], float]:
    out = {}
    for kind, (remaining, limit) in limits.items():
        out[(names.PROM_RATELIMIT_REMAINING, kind)] = remaining
        out[(names.PROM_RATELIMIT_LIMIT, kind)] = limit
    return out


def _openai_stream(server: ScriptedServer, headers: dict[str, str], *, status: int = 200,
                   steps: list[bytes] | None = None, is_async: bool = False) -> Any:  # fmt: skip
    ctype = "text/event-stream" if status == 200 else "application/json"
    key = server.add(steps or bodies.chat("ok"), status=status, headers={"content-type": ctype, **headers})
    kwargs: Any = {"model": "gpt-x", "messages": MSGS, "stream": True, "extra_headers": {"x-script": key},
                   "stream_options": {"include_usage": True}}  # fmt: skip
    if is_async:

        async def run() -> Any:
            async with OPENAI_HTTP.AsyncClient() as http:
                client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url + "/v1", max_retries=0,
                                            http_client=http)  # fmt: skip
                stream = await client.chat.completions.create(**kwargs)
                async for _ in stream:
                    pass
                return stream

        return asyncio.run(run())
    with OPENAI_HTTP.Client() as http:
        client = openai.OpenAI(api_key="k", base_url=server.base_url + "/v1", max_retries=0, http_client=http)
        try:
            stream = client.chat.completions.create(**kwargs)
        except openai.APIStatusError:
            return None
        for _ in stream:
            pass
        return stream


def _anthropic_stream(server: ScriptedServer, headers: dict[str, str], *, is_async: bool) -> Any:
    key = server.add(bodies.messages("ok"), headers={"content-type": "text/event-stream", **headers})
    kwargs: Any = {"model": "claude-x", "max_tokens": 5, "messages": MSGS, "stream": True,
                   "extra_headers": {"x-script": key}}  # fmt: skip
    if is_async:

        async def run() -> Any:
            async with ANTHROPIC_HTTP.AsyncClient() as http:
                client = anthropic.AsyncAnthropic(api_key="k", base_url=server.base_url, max_retries=0,
                                                  http_client=http)  # fmt: skip
                stream = await client.messages.create(**kwargs)
                async for _ in stream:
                    pass
                return stream

        return asyncio.run(run())
    with ANTHROPIC_HTTP.Client() as http:
        client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0, http_client=http)
        stream = client.messages.create(**kwargs)
        for _ in stream:
            pass
        return stream


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_openai_style_headers(server: ScriptedServer, both: Both, is_async: bool) -> None:
    stream = _openai_stream(server, OPENAI_HEADERS, is_async=is_async)
    both.tel.flush()
    report = otelstream.report_of(stream)
    assert report is not None and report.outcome == names.COMPLETED
    assert sorted(report.ratelimits, key=lambda r: r.kind) == [
        RateLimit(names.RL_REQUESTS, 4999, 5000), RateLimit(names.RL_TOKENS, 159850, 160000)]  # fmt: skip
    want = _expected({names.RL_REQUESTS: (4999, 5000), names.RL_TOKENS: (159850, 160000)})
    assert _gauges(both.tel.registry) == want
    assert _gauges(both.otel_registry) == want


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_anthropic_style_headers(server: ScriptedServer, both: Both, is_async: bool) -> None:
    stream = _anthropic_stream(server, ANTHROPIC_HEADERS, is_async=is_async)
    both.tel.flush()
    report = otelstream.report_of(stream)
    assert report is not None and report.outcome == names.COMPLETED
    want = _expected({names.RL_REQUESTS: (3, 50), names.RL_TOKENS: (81000, 90000),
                      names.RL_INPUT_TOKENS: (39990, 40000), names.RL_OUTPUT_TOKENS: (7998, 8000)})  # fmt: skip
    assert _gauges(both.tel.registry) == want
    assert _gauges(both.otel_registry) == want


def test_a_429_carries_the_exhausted_headroom(server: ScriptedServer, both: Both) -> None:
    """The storm is seen where it starts: the refused request's own headers say 0 left."""
    body = b'{"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}'
    headers = {"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0"}
    assert _openai_stream(server, headers, status=429, steps=[body]) is None
    both.tel.flush()
    (span,) = both.tel.ours()
    assert (span.attributes or {})[names.ATTR_OUTCOME] == names.HTTP_ERROR
    assert _gauges(both.tel.registry) == _expected({names.RL_REQUESTS: (0, 60)})


def test_the_latest_answer_wins_and_only_numbers_are_kept(server: ScriptedServer, both: Both) -> None:
    _openai_stream(server, {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "40"})
    # a later answer: fewer left; its token headers are not numbers (or not sane ones) and are dropped
    junk = {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "39",
            "x-ratelimit-limit-tokens": "lots", "x-ratelimit-remaining-tokens": "-5"}  # fmt: skip
    stream = _openai_stream(server, junk)
    both.tel.flush()
    assert _gauges(both.tel.registry) == _expected({names.RL_REQUESTS: (39, 100)})
    report = otelstream.report_of(stream)
    assert report is not None and report.ratelimits == (RateLimit(names.RL_REQUESTS, 39, 100),)


def test_no_headers_no_series(server: ScriptedServer, both: Both) -> None:
    stream = _openai_stream(server, {})
    both.tel.flush()
    report = otelstream.report_of(stream)
    assert report is not None and report.ratelimits == ()
    assert _gauges(both.tel.registry) == {} and _gauges(both.otel_registry) == {}
