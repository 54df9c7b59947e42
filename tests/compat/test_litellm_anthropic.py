"""litellm against the scripted server on 127.0.0.1: its own Anthropic provider (its ``httpx`` client, its own SSE
parsing: only the HTTP-level observer sees it) and its OpenAI provider (the openai SDK: the SDK adapter's, once).
One span and one ``otelstream_streams_total`` sample per streamed request, with the right outcome, TTFD and usage."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.harness import need

litellm = need("litellm")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

from otelstream import adapters, names  # noqa: E402
from otelstream.export import Pipeline  # noqa: E402
from tests.support import bodies  # noqa: E402
from tests.support.scripted_server import SCRIPT_HEADER, Pause, ScriptedServer, Step  # noqa: E402

MSGS = [{"role": "user", "content": "x"}]
ERROR = b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}\n\n'


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def is_async(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def pipeline(make_pipeline: Any) -> Iterator[Pipeline]:
    p: Pipeline = make_pipeline()
    adapters.install(p)
    try:
        yield p
    finally:
        adapters.uninstall()


def stream(model: str, base: str, key: str, is_async: bool) -> tuple[list[Any], BaseException | None]:
    kw: dict[str, Any] = {"model": model, "messages": MSGS, "stream": True, "api_base": base, "api_key": "k",
                          "extra_headers": {SCRIPT_HEADER: key}, "max_tokens": 5, "num_retries": 0}  # fmt: skip
    items: list[Any] = []
    if not is_async:
        try:
            for chunk in litellm.completion(**kw):
                items.append(chunk)
        except Exception as exc:
            return items, exc
        return items, None

    async def go() -> tuple[list[Any], BaseException | None]:
        try:
            async for chunk in await litellm.acompletion(**kw):
                items.append(chunk)
        except Exception as exc:
            return items, exc
        return items, None

    return asyncio.run(go())


def samples(registry: CollectorRegistry) -> list[tuple[dict[str, str], float]]:
    return [(s.labels, s.value) for m in registry.collect() for s in m.samples if s.name == "otelstream_streams_total"]


def anthropic_case(scripted: ScriptedServer, steps: list[Step], is_async: bool) -> tuple[list[Any], Any]:
    return stream("anthropic/claude-test", scripted.base_url, scripted.add(steps), is_async)


@pytest.mark.parametrize(
    ("case", "outcome"),
    [("complete", names.COMPLETED), ("cut", names.CUT), ("error", names.ERROR), ("http_500", names.HTTP_ERROR)],
)
def test_litellm_anthropic_provider(pipeline: Pipeline, span_exporter: InMemorySpanExporter,
                                    registry: CollectorRegistry, scripted: ScriptedServer, is_async: bool,
                                    case: str, outcome: str) -> None:  # fmt: skip
    frames = bodies.messages("ok")
    if case == "http_500":
        key = scripted.add([b'{"type":"error","error":{"type":"api_error","message":"down"}}'], status=500,
                           headers={"content-type": "application/json"})  # fmt: skip
        items, exc = stream("anthropic/claude-test", scripted.base_url, key, is_async)
    else:
        steps: list[Step] = {
            "complete": [*frames[:2], Pause(0.4), *frames[2:]],
            "cut": frames[:4],
            "error": [*frames[:3], ERROR],
        }[case]
        items, exc = anthropic_case(scripted, steps, is_async)
    assert pipeline.flush()
    (span,) = span_exporter.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert span.name == "chat claude-test"
    assert attrs[names.ATTR_OUTCOME] == outcome and attrs[names.ATTR_SURFACE] == names.MESSAGES
    assert attrs[names.ATTR_PROVIDER_NAME] == names.PROVIDER_ANTHROPIC
    ((labels, value),) = samples(registry)
    assert (labels["outcome"], value) == (outcome, 1.0)
    if case == "complete":
        assert exc is None and items
        assert attrs[names.ATTR_RESPONSE_TTFC] >= 0.4  # type: ignore[operator]
        assert (attrs[names.ATTR_USAGE_INPUT], attrs[names.ATTR_USAGE_OUTPUT]) == (16, 2)  # 10 + 4 cache read + 2 write
    if case == "http_500":
        assert exc is not None and attrs[names.ATTR_ERROR_TYPE] == "500"


def test_litellm_openai_provider_reported_once(pipeline: Pipeline, span_exporter: InMemorySpanExporter,
                                               registry: CollectorRegistry, scripted: ScriptedServer,
                                               is_async: bool) -> None:  # fmt: skip
    """litellm's OpenAI provider drives the openai SDK: the SDK adapter's one report, not a second at the HTTP level."""
    items, exc = stream("openai/gpt-test", scripted.base_url + "/v1", scripted.add(bodies.chat("ok")), is_async)
    assert exc is None and items
    assert pipeline.flush()
    (span,) = span_exporter.get_finished_spans()
    assert span.name == "chat gpt-test"
    ((labels, value),) = samples(registry)
    assert (labels["surface"], value) == (names.CHAT_COMPLETIONS, 1.0)
