"""Every surface x outcome through the real SDKs against the fake provider on 127.0.0.1, instrumented with the public
``otelstream.instrument()``: the exact span (name, kind, parent, attributes, events, status) and the exact Prometheus
samples (family, labels, counts) per stream, sync and async. WebSocket mode is in test_websocket_span.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from otelstream import names
from otelstream.demo.provider import FakeProvider
from tests.support.clients import client_for
from tests.support.surfaces import SSE_SURFACES
from tests.telemetry.harness import (
    CUT_AT,
    FAULT_FOR,
    MODELS,
    TOKENS,
    Seen,
    Telemetry,
    consume_async,
    consume_sync,
    key,
    supports,
)

R, CH, CO, M = names.RESPONSES, names.CHAT_COMPLETIONS, names.COMPLETIONS, names.MESSAGES
A = 2  # deltas before the abandoning caller closes (harness.ABANDON_AFTER)


@dataclass(frozen=True)
class Want:
    events: int
    deltas: int
    keepalives: int = 0
    finish: tuple[str, ...] | None = None
    output_tokens: int | None = None  # None: the stream carried no usage
    error_type: str | None = None  # error.type on the span (bad outcomes only): the provider's code, else the class

    @property
    def error_class(self) -> str | None:
        """The class: the provider's codes here are the table's own, a reset mid-body is a connection error."""
        by_code = {"server_error": "server_error", "api_error": "server_error", "overloaded_error": "overloaded"}
        return None if self.error_type is None else by_code.get(self.error_type, self.error_type)

    def phase(self, outcome: str) -> str | None:
        """The failure phase: bad outcomes only; before_output when no delta had reached the caller."""
        if self.error_type is None:
            return None
        return names.PHASE_DURING_OUTPUT if self.deltas and outcome != names.HTTP_ERROR else names.PHASE_BEFORE_OUTPUT


# Derived from the fake provider's bodies (otelstream/demo/bodies.py) with TOKENS=6 words, cut at 3:
# responses: created, in_progress, output_item.added, content_part.added, deltas, then 3 *.done + terminal;
# chat: a role-only chunk, deltas, a finish chunk, the usage chunk; completions: no role chunk;
# messages: message_start, content_block_start, a ping (keepalive), deltas, block_stop, message_delta, message_stop.
# An SDK that raises on an in-band error never yields that event (chat/completions/messages `error`).
WANT: dict[tuple[str, str], Want] = {
    (R, names.COMPLETED): Want(8 + TOKENS, TOKENS, finish=("stop",), output_tokens=TOKENS),
    (R, names.INCOMPLETE): Want(4 + CUT_AT + 4, CUT_AT, finish=("max_output_tokens",), output_tokens=CUT_AT),
    (R, names.FAILED): Want(4 + CUT_AT + 1, CUT_AT, finish=("error",), error_type="server_error"),
    (R, names.ERROR): Want(4 + CUT_AT + 2, CUT_AT, finish=("error",), error_type="server_error"),
    (R, names.CUT): Want(4 + CUT_AT, CUT_AT, error_type="cut"),
    (R, names.ABANDONED): Want(4 + A, A),
    (R, names.TRANSPORT_ERROR): Want(4 + CUT_AT, CUT_AT, error_type="connection"),
    (R, names.HTTP_ERROR): Want(0, 0, error_type="server_error"),
    (CH, names.COMPLETED): Want(1 + TOKENS + 2, TOKENS, finish=("stop",), output_tokens=TOKENS),
    (CH, names.INCOMPLETE): Want(1 + CUT_AT + 2, CUT_AT, finish=("length",), output_tokens=CUT_AT),
    (CH, names.ERROR): Want(1 + CUT_AT, CUT_AT, error_type="server_error"),
    (CH, names.CUT): Want(1 + CUT_AT, CUT_AT, error_type="cut"),
    (CH, names.ABANDONED): Want(1 + A, A),
    (CH, names.TRANSPORT_ERROR): Want(1 + CUT_AT, CUT_AT, error_type="connection"),
    (CH, names.HTTP_ERROR): Want(0, 0, error_type="server_error"),
    (CO, names.COMPLETED): Want(TOKENS + 2, TOKENS, finish=("stop",), output_tokens=TOKENS),
    (CO, names.INCOMPLETE): Want(CUT_AT + 2, CUT_AT, finish=("length",), output_tokens=CUT_AT),
    (CO, names.ERROR): Want(CUT_AT, CUT_AT, error_type="server_error"),
    (CO, names.CUT): Want(CUT_AT, CUT_AT, error_type="cut"),
    (CO, names.ABANDONED): Want(A, A),
    (CO, names.TRANSPORT_ERROR): Want(CUT_AT, CUT_AT, error_type="connection"),
    (CO, names.HTTP_ERROR): Want(0, 0, error_type="server_error"),
    # message_start carries usage (output 1, cumulative, assigned): a stream that never reaches message_delta has it
    (M, names.COMPLETED): Want(5 + TOKENS, TOKENS, 1, ("end_turn",), TOKENS),
    (M, names.INCOMPLETE): Want(5 + CUT_AT, CUT_AT, 1, ("max_tokens",), CUT_AT),
    (M, names.ERROR): Want(2 + CUT_AT, CUT_AT, 1, None, 1, "overloaded_error"),
    (M, names.CUT): Want(2 + CUT_AT, CUT_AT, 1, None, 1, "cut"),
    (M, names.ABANDONED): Want(2 + A, A, 1, None, 1),
    (M, names.TRANSPORT_ERROR): Want(2 + CUT_AT, CUT_AT, 1, None, 1, "connection"),
    (M, names.HTTP_ERROR): Want(0, 0, 0, None, None, "api_error"),
}
CASES = [(s, o) for s in SSE_SURFACES for o in FAULT_FOR if supports(s, o)]
assert sorted(CASES) == sorted(WANT), "every supported surface x outcome has an expectation"

_TIMINGS = {
    names.ATTR_MAX_WAIT, names.ATTR_CONSUMER_TIME, names.ATTR_TIME_TO_FIRST_EVENT, names.ATTR_RESPONSE_TTFC,
    names.ATTR_TIME_TO_FIRST_DELTA, names.ATTR_OUTPUT_TOKENS_PER_SECOND, names.ATTR_TIME_TO_FIRST_OUTPUT,
}  # fmt: skip


def _server_usage(surface: str, seen: Seen) -> int | None:
    """Input tokens as the server reported them, read from what the SDK handed the caller."""
    for item in reversed(seen.items):
        if surface == R and getattr(getattr(item, "response", None), "usage", None) is not None:
            return int(item.response.usage.input_tokens)
        if surface in (CH, CO) and getattr(item, "usage", None) is not None:
            return int(item.usage.prompt_tokens)
        if surface == M and item.type == "message_start":
            u = item.message.usage
            return int(u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0))
    return None


def _response_id(surface: str, seen: Seen) -> str | None:
    if not seen.items:
        return None
    first = seen.items[0]
    if surface == R:
        return str(first.response.id)
    if surface == M:
        return str(first.message.id)
    return str(first.id)


def expected_attributes(
    provider: FakeProvider, surface: str, outcome: str, seen: Seen, request_index: int
) -> dict[str, Any]:
    w = WANT[(surface, outcome)]
    a: dict[str, Any] = {
        names.ATTR_OPERATION_NAME: names.OPERATION_BY_SURFACE[surface],
        names.ATTR_PROVIDER_NAME: names.PROVIDER_ANTHROPIC if surface == M else names.PROVIDER_OPENAI,
        names.ATTR_REQUEST_STREAM: True,
        names.ATTR_REQUEST_MODEL: MODELS[surface],
        names.ATTR_SERVER_ADDRESS: "127.0.0.1",
        names.ATTR_SERVER_PORT: provider.port,
        names.ATTR_SURFACE: surface,
        names.ATTR_OUTCOME: outcome,
        names.ATTR_RETRIES: 0,
        names.ATTR_EVENTS: w.events,
        names.ATTR_DELTAS: w.deltas,
        names.ATTR_KEEPALIVES: w.keepalives,
        names.ATTR_SEQ_GAPS: 0,
        names.ATTR_SEQ_SKIPPED: 0,
        names.ATTR_SEQ_DUPLICATES: 0,
        names.ATTR_SEQ_OUT_OF_ORDER: 0,
    }
    if surface != M:
        a[names.ATTR_OPENAI_API_TYPE] = surface
    a[names.ATTR_REQUEST_ID] = f"req_{request_index:016x}"  # http_error too: the error response names the request
    if outcome != names.HTTP_ERROR:
        a[names.ATTR_RESPONSE_MODEL] = MODELS[surface]
        a[names.ATTR_RESPONSE_ID] = _response_id(surface, seen)
        # what the fake provider sends (otelstream/demo/bodies.py), as the server sent it
        if surface == R:
            a[names.ATTR_OPENAI_SERVICE_TIER] = "default"
        elif surface == CH:
            a[names.ATTR_OPENAI_SYSTEM_FINGERPRINT] = "fp_otelstream"
    if surface == M:
        a[names.ATTR_REQUEST_MAX_TOKENS] = 64  # as the call passed it (harness.request_kwargs)
    if outcome == names.ABANDONED:
        a[names.ATTR_ABANDONED_REASON] = names.ABANDON_CLOSE
    if w.finish is not None:
        a[names.ATTR_RESPONSE_FINISH_REASONS] = w.finish
    if w.error_type is not None:
        a[names.ATTR_ERROR_TYPE] = w.error_type
        a[names.ATTR_ERROR_CLASS] = w.error_class
        a[names.ATTR_FAILURE_PHASE] = w.phase(outcome)
    if w.output_tokens is not None:
        a[names.ATTR_USAGE_INPUT] = _server_usage(surface, seen)
        a[names.ATTR_USAGE_OUTPUT] = w.output_tokens
        a[names.ATTR_USAGE_CACHE_READ] = 0
        if surface == M:
            a[names.ATTR_USAGE_CACHE_WRITE] = 0
        else:
            a[names.ATTR_USAGE_REASONING] = 0
    return a


def expected_samples(surface: str, outcome: str, seen: Seen, port: int, ratelimits: dict[str, str]) -> dict[Any, float]:
    w = WANT[(surface, outcome)]
    live = {
        names.LABEL_PROVIDER: names.PROVIDER_ANTHROPIC if surface == M else names.PROVIDER_OPENAI,
        names.LABEL_OPERATION: names.OPERATION_BY_SURFACE[surface],
        names.LABEL_MODEL: MODELS[surface],
        names.LABEL_SERVER_ADDRESS: "127.0.0.1",
        names.LABEL_SERVER_PORT: str(port),
        names.LABEL_RESPONSE_MODEL: "",  # the live gauges: no response yet
    }
    common = {**live, names.LABEL_RESPONSE_MODEL: "" if outcome == names.HTTP_ERROR else MODELS[surface]}
    s = {**common, names.LABEL_SURFACE: surface}
    klass = w.error_class or ""  # the error_type label: the class, absent for good outcomes
    out: dict[Any, float] = {
        key("otelstream_streams_total", **s, outcome=outcome, error_type=klass, phase=w.phase(outcome) or ""): 1,
        key("gen_ai_client_operation_duration_seconds_count", **common, error_type=klass): 1,
        key("otelstream_streams_active", **live, surface=surface): 0,
        key("otelstream_streams_stalled", **live, surface=surface): 0,
    }
    if w.events:
        out[key("otelstream_stream_time_to_first_event_seconds_count", **s)] = 1
        out[key("otelstream_stream_max_wait_seconds_count", **s)] = 1
    if w.deltas:
        out[key("gen_ai_client_operation_time_to_first_chunk_seconds_count", **common)] = 1
        out[key("otelstream_stream_time_to_first_output_seconds_count", **s)] = 1  # the answer is all output
    if w.deltas > 1:
        out[key("gen_ai_client_operation_time_per_output_chunk_seconds_count", **common)] = w.deltas - 1
    for header, value in ratelimits.items():  # the headroom the answer announced, read at the send
        kind, remaining = names.RATELIMIT_HEADERS[header]
        family = names.PROM_RATELIMIT_REMAINING if remaining else names.PROM_RATELIMIT_LIMIT
        out[key(family, **common, kind=kind)] = float(value)
    if w.output_tokens is not None:
        for token_type, value in (("input", _server_usage(surface, seen)), ("output", w.output_tokens)):
            assert value is not None
            out[key("gen_ai_client_token_usage_count", **common, gen_ai_token_type=token_type)] = 1
            out[key("gen_ai_client_token_usage_sum", **common, gen_ai_token_type=token_type)] = value
    return out


def check(tel: Telemetry, provider: FakeProvider, surface: str, outcome: str, seen: Seen) -> None:
    tel.flush()
    assert provider.wait_idle(5.0)
    rec = provider.requests[-1]
    assert (rec.surface, rec.fault) == (surface, FAULT_FOR[outcome])
    w = WANT[(surface, outcome)]
    assert seen.deltas == w.deltas, "the caller saw what the expectation table assumes"

    spans = tel.ours()
    assert len(spans) == 1, [s.name for s in spans]
    span = spans[0]
    assert span.name == f"{names.OPERATION_BY_SURFACE[surface]} {MODELS[surface]}"
    assert span.kind is SpanKind.CLIENT
    assert seen.parent is not None and span.parent is not None
    assert span.parent.span_id == seen.parent.get_span_context().span_id
    assert span.context.trace_id == seen.parent.get_span_context().trace_id

    attrs = dict(span.attributes or {})
    timings = {k: attrs.pop(k) for k in list(attrs) if k in _TIMINGS}
    attrs = {k: tuple(v) if isinstance(v, tuple | list) else v for k, v in attrs.items()}
    assert attrs == expected_attributes(provider, surface, outcome, seen, rec.index)
    want_timings = {names.ATTR_MAX_WAIT, names.ATTR_CONSUMER_TIME}
    if w.events:
        want_timings.add(names.ATTR_TIME_TO_FIRST_EVENT)
    if w.deltas:
        # no reasoning in the fake provider's answers: the first delta is the first output
        want_timings |= {names.ATTR_RESPONSE_TTFC, names.ATTR_TIME_TO_FIRST_DELTA, names.ATTR_TIME_TO_FIRST_OUTPUT}
    if w.output_tokens:
        want_timings.add(names.ATTR_OUTPUT_TOKENS_PER_SECOND)
    assert set(timings) == want_timings
    duration = (span.end_time - span.start_time) / 1e9  # type: ignore[operator]
    assert all(isinstance(v, float) and v >= 0 for v in timings.values()), timings
    if w.deltas:
        assert 0 < timings[names.ATTR_TIME_TO_FIRST_EVENT] <= timings[names.ATTR_RESPONSE_TTFC] <= duration + 1e-6
        assert timings[names.ATTR_TIME_TO_FIRST_OUTPUT] == timings[names.ATTR_TIME_TO_FIRST_DELTA]
    assert timings[names.ATTR_MAX_WAIT] <= duration + 1e-6

    assert [e.name for e in span.events] == ([names.SPAN_EVENT_FIRST_DELTA] if w.deltas else [])
    if outcome in names.BAD_OUTCOMES:
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == w.error_type
    else:
        assert span.status.status_code is StatusCode.UNSET

    assert tel.samples() == expected_samples(surface, outcome, seen, provider.port, rec.ratelimit_headers)


@pytest.mark.parametrize(("surface", "outcome"), CASES)
def test_sync(tel: Telemetry, provider: FakeProvider, surface: str, outcome: str) -> None:
    client = client_for(provider, surface)
    try:
        seen = consume_sync(client, surface, outcome, tel.tracer)
    finally:
        client.close()
    check(tel, provider, surface, outcome, seen)


@pytest.mark.parametrize(("surface", "outcome"), CASES)
def test_async(tel: Telemetry, provider: FakeProvider, surface: str, outcome: str) -> None:
    async def go() -> Seen:
        client = client_for(provider, surface, is_async=True)
        try:
            return await consume_async(client, surface, outcome, tel.tracer)
        finally:
            await client.close()

    check(tel, provider, surface, outcome, asyncio.run(go()))
