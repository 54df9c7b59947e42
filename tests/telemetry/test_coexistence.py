"""Coexistence with Anthropic's built-in tracing and with HTTPX2ClientInstrumentor (research §3 and §7):
exactly one GenAI CLIENT span per call, otelstream's span nested correctly, tokens counted once, a well-formed trace.

Anthropic's tracing is switched on per client (``open_telemetry={"tracer_provider": …}``, the SDK's own option) with
the same SDK TracerProvider otelstream exports to, so no test installs a process-global provider.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from otelstream import names
from otelstream.demo.provider import FakeProvider
from tests.support.clients import client_for
from tests.support.sdk_features import ANTHROPIC_TRACING, OPENAI_HTTP, WITHOUT_ANTHROPIC_TRACING
from tests.telemetry.harness import MODELS, Seen, Telemetry, consume_async, consume_sync

M, R = names.MESSAGES, names.RESPONSES
SDK_SPAN = "anthropic.messages.create"
SDK_SCOPE = "com.anthropic.sdk.python"
HTTP_SCOPE = "opentelemetry.instrumentation.httpx"
with_anthropic_tracing = pytest.mark.skipif(not ANTHROPIC_TRACING, reason=WITHOUT_ANTHROPIC_TRACING)


@pytest.fixture
def http_spans(tel: Telemetry) -> Iterator[None]:
    from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor

    # as otelstream.auto does: the instrumentor of each HTTP library an SDK sends with (httpx under openai 2.x)
    insts = [HTTPX2ClientInstrumentor(), *([HTTPXClientInstrumentor()] if OPENAI_HTTP.__name__ == "httpx" else [])]
    for inst in insts:
        inst.instrument(tracer_provider=tel.tracer_provider)
    try:
        yield
    finally:
        for inst in insts:
            inst.uninstrument()


def _scope(span: ReadableSpan) -> str:
    return span.instrumentation_scope.name if span.instrumentation_scope else ""


def _genai_client_spans(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """CLIENT spans of a GenAI call (the HTTP span is a CLIENT span too, of an HTTP request, not of the call)."""
    return [
        s for s in spans if s.kind is SpanKind.CLIENT and s.attributes and names.ATTR_OPERATION_NAME in s.attributes
    ]


def assert_well_formed(spans: list[ReadableSpan], seen: Seen) -> None:
    """One trace, rooted at the caller's span; every parent is a span of that trace that was exported."""
    assert seen.parent is not None
    root = seen.parent.get_span_context()
    by_id = {s.context.span_id: s for s in spans}
    assert len(by_id) == len(spans), "span ids are unique"
    assert {s.context.trace_id for s in spans} == {root.trace_id}
    roots = [s for s in spans if s.parent is None]
    assert [r.context.span_id for r in roots] == [root.span_id]
    for s in spans:
        if s.parent is not None:
            parent = by_id[s.parent.span_id]
            assert parent.start_time <= s.start_time, (s.name, parent.name)  # type: ignore[operator]


def _run(tel: Telemetry, provider: FakeProvider, surface: str, outcome: str, is_async: bool, **client_kw: Any) -> Seen:
    if not is_async:
        client = client_for(provider, surface, **client_kw)
        try:
            return consume_sync(client, surface, outcome, tel.tracer)
        finally:
            client.close()

    async def go() -> Seen:
        aclient = client_for(provider, surface, is_async=True, **client_kw)
        try:
            return await consume_async(aclient, surface, outcome, tel.tracer)
        finally:
            await aclient.close()

    return asyncio.run(go())


def _anthropic_on(tel: Telemetry) -> dict[str, Any]:
    return {"anthropic_tracing": {"tracer_provider": tel.tracer_provider}}


@with_anthropic_tracing
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("outcome", [names.COMPLETED, names.CUT, names.ABANDONED, names.ERROR])
def test_anthropic_tracing_one_client_span(
    tel: Telemetry, provider: FakeProvider, outcome: str, is_async: bool
) -> None:
    seen = _run(tel, provider, M, outcome, is_async, **_anthropic_on(tel))
    tel.flush()
    spans = tel.spans()
    [sdk] = [s for s in spans if _scope(s) == SDK_SCOPE]
    [ours] = tel.ours()
    assert _genai_client_spans(spans) == [sdk], "exactly one CLIENT span per call: the SDK's"
    assert (sdk.name, sdk.kind) == (SDK_SPAN, SpanKind.CLIENT)
    assert (ours.name, ours.kind) == (names.SPAN_STREAM_INTERNAL, SpanKind.INTERNAL)
    assert ours.parent is not None and ours.parent.span_id == sdk.context.span_id
    assert sdk.parent is not None and sdk.parent.span_id == seen.parent.get_span_context().span_id  # type: ignore[union-attr]

    a = dict(ours.attributes or {})
    # no double-counted tokens, and TTFT once: usage and time-to-first-chunk only on the SDK's span
    assert not [k for k in a if k.startswith("gen_ai.usage.")]
    assert names.ATTR_RESPONSE_TTFC not in a
    assert a[names.ATTR_OUTCOME] == outcome and a[names.ATTR_SURFACE] == M
    assert a[names.ATTR_REQUEST_MODEL] == MODELS[M]
    # otelstream's own TTFD is on the INTERNAL child too: the one a trace query can rely on whichever span is CLIENT
    ttfd = a[names.ATTR_TIME_TO_FIRST_DELTA]
    assert isinstance(ttfd, float) and 0 < ttfd <= (ours.end_time - ours.start_time) / 1e9  # type: ignore[operator]
    assert a[names.ATTR_REQUEST_MAX_TOKENS] == 64  # the request parameters as the call passed them
    if outcome != names.ABANDONED:  # the SDK records usage when it saw the stream's message events
        assert "gen_ai.usage.input_tokens" in (sdk.attributes or {})
    if outcome in names.BAD_OUTCOMES:
        assert ours.status.status_code is StatusCode.ERROR
    else:
        assert ours.status.status_code is StatusCode.UNSET
    assert_well_formed(spans, seen)

    # the metrics count the stream once (the SDK emits none)
    streams = {k: v for k, v in tel.samples().items() if k[0] == "otelstream_streams_total"}
    assert list(streams.values()) == [1]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("surface", [R, names.CHAT_COMPLETIONS, names.COMPLETIONS, M])
def test_http_span_nests_under_stream_span(
    tel: Telemetry, provider: FakeProvider, http_spans: None, surface: str, is_async: bool
) -> None:
    """HTTPX2ClientInstrumentor on, the SDKs' default transport: the HTTP span is a child of otelstream's span."""
    seen = _run(tel, provider, surface, names.COMPLETED, is_async)
    tel.flush()
    spans = tel.spans()
    [ours] = tel.ours()
    [http] = [s for s in spans if _scope(s) == HTTP_SCOPE]
    assert _genai_client_spans(spans) == [ours] and ours.kind is SpanKind.CLIENT
    assert http.parent is not None and http.parent.span_id == ours.context.span_id
    assert http.kind is SpanKind.CLIENT
    # the HTTP span ends at the response headers; the stream span at the end of the stream
    assert ours.start_time <= http.start_time and http.end_time <= ours.end_time  # type: ignore[operator]
    assert len(spans) == 3  # caller, stream, HTTP
    assert_well_formed(spans, seen)


@with_anthropic_tracing
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_anthropic_tracing_and_http_spans(
    tel: Telemetry, provider: FakeProvider, http_spans: None, is_async: bool
) -> None:
    seen = _run(tel, provider, M, names.COMPLETED, is_async, **_anthropic_on(tel))
    tel.flush()
    spans = tel.spans()
    [sdk] = [s for s in spans if _scope(s) == SDK_SCOPE]
    [ours] = tel.ours()
    [http] = [s for s in spans if _scope(s) == HTTP_SCOPE]
    assert _genai_client_spans(spans) == [sdk]
    assert ours.kind is SpanKind.INTERNAL and ours.parent.span_id == sdk.context.span_id  # type: ignore[union-attr]
    # otelstream's span is current during the send, so the HTTP span is its child (inside the SDK's call span)
    assert http.parent is not None and http.parent.span_id == ours.context.span_id
    assert not [k for k in (ours.attributes or {}) if k.startswith("gen_ai.usage.")]
    assert len(spans) == 4
    assert_well_formed(spans, seen)


@with_anthropic_tracing
def test_openai_and_anthropic_side_by_side(tel: Telemetry, provider: FakeProvider, http_spans: None) -> None:
    """Both SDKs in one trace, both integrations on: one GenAI CLIENT span per call, nothing orphaned."""
    with tel.tracer.start_as_current_span("caller") as parent:
        seen = Seen(parent=parent)
        for surface, kw in ((R, {}), (M, _anthropic_on(tel))):
            client = client_for(provider, surface, **kw)
            try:
                consume_sync(client, surface, names.COMPLETED)
            finally:
                client.close()
    tel.flush()
    spans = tel.spans()
    genai = _genai_client_spans(spans)
    assert sorted(s.name for s in genai) == sorted([SDK_SPAN, f"chat {MODELS[R]}"])
    assert sorted(s.name for s in tel.ours()) == sorted([names.SPAN_STREAM_INTERNAL, f"chat {MODELS[R]}"])
    assert len([s for s in spans if _scope(s) == HTTP_SCOPE]) == 2
    assert_well_formed(spans, seen)
