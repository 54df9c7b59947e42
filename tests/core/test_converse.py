"""Bedrock ConverseStream events (as botocore yields them): deltas and reasoning, stop reasons, exception messages,
usage from the metadata event after messageStop; invoke streams of Anthropic models read as Messages events, and of
other model families as an unsupported payload whose outcome the transport decides."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otelstream import names
from otelstream.core import bedrock
from otelstream.core.bedrock_reading import BedrockBodyReader
from otelstream.core.client_rules import ClientReader
from otelstream.core.eventstream import EventStreamDecoder
from otelstream.core.protocols.converse import COMPLETE_REASONS, ERROR_REASONS, INCOMPLETE_REASONS
from otelstream.core.report import StreamStart
from otelstream.core.tracker import StreamTracker
from tests.core.harness import MS, FakeClock, counts, run
from tests.support import eventstream as enc

C = names.CONVERSE


def delta(**d: Any) -> dict[str, Any]:
    return {"contentBlockDelta": {"delta": d, "contentBlockIndex": 0}}


START = {"messageStart": {"role": "assistant"}}
BSTART = {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "t1", "name": "f"}}, "contentBlockIndex": 1}}
BSTOP = {"contentBlockStop": {"contentBlockIndex": 0}}
USAGE = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15, "cacheReadInputTokens": 100,
         "cacheWriteInputTokens": 40}  # fmt: skip
META = {"metadata": {"usage": USAGE, "metrics": {"latencyMs": 420}}}


def stop(reason: str) -> dict[str, Any]:
    return {"messageStop": {"stopReason": reason}}


def body(reason: str = "end_turn", *, meta: bool = True) -> list[dict[str, Any]]:
    evs = [START, delta(reasoningContent={"text": "hmm"}), delta(text="Hi"), delta(text=" there"), BSTOP, stop(reason)]
    return [*evs, META] if meta else evs


@pytest.mark.parametrize("reason", sorted(COMPLETE_REASONS))
def test_completed(reason: str) -> None:
    r = run(C, body(reason))
    assert (r.outcome, r.finish_reasons, r.events, r.deltas) == (names.COMPLETED, (reason,), 7, 3)
    assert r.first_output_event == 2 and r.time_to_first_delta_ns < r.time_to_first_output_ns  # type: ignore[operator]
    assert r.usage.to_json() == {"input_tokens": 150, "output_tokens": 5, "cache_read_input_tokens": 100,
                                 "cache_write_input_tokens": 40, "reasoning_output_tokens": None}  # fmt: skip
    assert not r.anomalies and r.error_class is None


@pytest.mark.parametrize("reason", sorted(INCOMPLETE_REASONS))
def test_incomplete(reason: str) -> None:
    r = run(C, body(reason))
    assert (r.outcome, r.finish_reasons, r.error_type) == (names.INCOMPLETE, (reason,), None)


@pytest.mark.parametrize("reason", sorted(ERROR_REASONS))
def test_malformed_output_is_a_server_error(reason: str) -> None:
    r = run(C, body(reason))
    assert (r.outcome, r.error_type, r.error_class) == (names.ERROR, reason, names.EC_SERVER_ERROR)


def test_the_service_latency_as_sent() -> None:
    assert run(C, body()).provider_latency_ms == 420
    assert run(C, body(meta=False)).provider_latency_ms is None


@pytest.mark.parametrize("bad", [None, "420", 4.2, -1, True, 2**63, {"ms": 1}])
def test_a_latency_not_a_count_of_ms_is_left_unknown(bad: object) -> None:
    meta = {"metadata": {"usage": USAGE, "metrics": {"latencyMs": bad}}}
    r = run(C, [*body(meta=False), meta])
    assert r.provider_latency_ms is None and r.outcome == names.COMPLETED and r.usage.input_tokens == 150


def test_missing_metadata_is_usage_missing_not_a_bad_outcome() -> None:
    r = run(C, body(meta=False))
    assert r.outcome == names.COMPLETED and counts(r) == {names.ANOM_USAGE_MISSING: 1}
    assert r.usage.input_tokens is None


def test_no_message_stop_is_cut() -> None:
    r = run(C, body()[:4])
    assert (r.outcome, r.error_class, r.failure_phase) == (names.CUT, "cut", "during_output")


@pytest.mark.parametrize(
    ("exc", "klass"),
    [("throttlingException", "rate_limited"), ("serviceUnavailableException", "overloaded"),
     ("modelTimeoutException", "timeout"), ("validationException", "bad_request"),
     ("internalServerException", "server_error"), ("modelStreamErrorException", "server_error"),
     ("someNewException", "_OTHER")],
)  # fmt: skip
def test_exception_message_is_an_error_of_its_type(exc: str, klass: str) -> None:
    r = run(C, [START, {exc: {"message": "no"}}])
    assert (r.outcome, r.error_type, r.error_class, r.failure_phase) == (names.ERROR, exc, klass, "before_output")


def test_tool_input_and_citation_are_output_signature_is_not() -> None:
    evs = [START, BSTART, delta(toolUse={"input": '{"a":'}), delta(reasoningContent={"signature": "sig"}),
           delta(reasoningContent={"redactedContent": "eA=="}), delta(citation={"title": "t"}), delta(text=""),
           stop("tool_use"), META]  # fmt: skip
    r = run(C, evs)
    assert (r.outcome, r.events, r.deltas, r.first_output_event) == (names.COMPLETED, 9, 2, 2)


def test_model_and_id_are_the_requests() -> None:
    clk = FakeClock()
    start = StreamStart(surface=C, provider=names.PROVIDER_BEDROCK, request_model="anthropic.claude-x", t_request_ns=1)
    t = StreamTracker(start, clock=clk, request_id="req-7")
    for ev in body():
        clk.advance(MS)
        t.event(ev)
    r = t.end("eof")
    assert r is not None and (r.response_model, r.response_id, r.request_id) == ("anthropic.claude-x", "req-7", "req-7")


def test_delta_after_message_stop_is_flagged() -> None:
    r = run(C, [*body(), delta(text="more")])
    assert r.outcome == names.COMPLETED and counts(r) == {names.ANOM_EVENT_AFTER_TERMINAL: 1}


def test_unsupported_invoke_payload_outcome_is_the_transports() -> None:
    chunk = {"chunk": {"bytes": b'{"generation": "hi"}'}}
    r = run(C, [chunk, chunk, chunk])
    assert (r.outcome, r.events, r.deltas) == (names.COMPLETED, 3, 0)
    assert counts(r) == {names.ANOM_UNSUPPORTED_PAYLOAD: 1}  # no deltas are read there: none missed
    assert r.usage.input_tokens is None and r.finish_reasons == ()
    assert run(C, [chunk], how="transport_error").outcome == names.TRANSPORT_ERROR
    assert run(C, [chunk], how="close").outcome == names.ABANDONED
    assert run(C, [chunk, {"throttlingException": {}}]).outcome == names.ERROR


def test_invoke_chunks_of_an_anthropic_model_are_messages_events() -> None:
    """Each chunk's bytes is one Messages event (base64 on the wire, bytes from botocore); the last carries Bedrock's
    invocation metrics, and usage still comes from the Messages events."""
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude-x", "usage": {"input_tokens": 9}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 4}},
        {"type": "message_stop", names.BEDROCK_INVOCATION_METRICS: {"inputTokenCount": 9, "outputTokenCount": 4}},
    ]
    wire = enc.invoke(*events)
    decoded = []
    for msg in EventStreamDecoder().feed(wire):
        body = bedrock.payload_json(msg)
        assert isinstance(body["bytes"], str)  # base64 on the wire
        item = {msg.event_type: body}
        value = bedrock.invoke_event(item)
        assert bedrock.is_messages_event(value)
        decoded.append(value)
    assert decoded == events
    botocore_item = {"chunk": {"bytes": json.dumps(events[1]).encode()}}  # botocore hands the bytes over decoded
    assert bedrock.invoke_event(botocore_item) == events[1]
    r = run(names.MESSAGES, decoded)
    assert (r.outcome, r.deltas, r.usage.input_tokens, r.usage.output_tokens) == (names.COMPLETED, 1, 9, 4)
    assert not r.anomalies


def test_invoke_exception_is_a_messages_error_of_its_type() -> None:
    ev = bedrock.invoke_exception_event("throttlingException", {"message": "slow down"})
    r = run(names.MESSAGES, [ev])
    assert (r.outcome, r.error_type, r.error_class) == (names.ERROR, "throttlingException", "rate_limited")


def test_converse_event_from_a_decoded_message() -> None:
    wire = enc.event("contentBlockDelta", {"delta": {"text": "x"}}) + enc.exception("throttlingException", "m")
    a, b = EventStreamDecoder().feed(wire)
    assert bedrock.converse_event(a) == {"contentBlockDelta": {"delta": {"text": "x"}}}
    assert bedrock.converse_event(b) == {"throttlingException": {"message": "m"}}
    assert bedrock.chunk_bytes({"bytes": base64.b64encode(b"{}").decode()}) == b"{}"
    assert bedrock.chunk_bytes({"bytes": "not base64!"}) is None


JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
        ["messageStart", "contentBlockDelta", "delta", "text", "toolUse", "input", "reasoningContent", "citation",
         "messageStop", "stopReason", "metadata", "usage", "inputTokens", "outputTokens", "throttlingException",
         "chunk"]), c, max_size=3),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(JUNK, max_size=8))
def test_no_input_makes_it_raise(events: list[Any]) -> None:
    r = run(C, events)
    assert r.events == len(events) and r.deltas <= r.events
    assert (r.error_class is None) == (r.outcome not in names.BAD_OUTCOMES)


def test_bedrock_http_error_type_header() -> None:
    assert bedrock.error_type_header("ThrottlingException:urn:scripted") == "ThrottlingException"
    assert bedrock.error_type_header("ValidationException") == "ValidationException"
    assert bedrock.error_type_header("") is None and bedrock.error_type_header(None) is None


def _read(body: bytes, cuts: list[int], *, sdk: bool = True, surface: str = C) -> Any:
    clk = FakeClock()
    t = StreamTracker(StreamStart(surface=surface, t_request_ns=clk()), clock=clk)
    reader = BedrockBodyReader(ClientReader(t, named=False, sdk=sdk))
    points = sorted({c % (len(body) + 1) for c in cuts})
    for a, b in zip([0, *points], [*points, len(body)], strict=True):
        clk.advance(MS)
        reader.feed(body[a:b])
    reader.finish()
    return t.end("eof") or t.final_report()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5_000), max_size=10))
def test_body_reader_gives_one_report_whatever_the_reads(cuts: list[int]) -> None:
    raw = enc.converse(*[(k, v) for ev in body() for k, v in ev.items()])
    r = _read(raw, cuts)
    assert (r.outcome, r.events, r.deltas, r.usage.input_tokens) == (names.COMPLETED, 7, 3, 150)


def test_body_reader_exception_stops_an_sdk_but_not_another_client() -> None:
    body = enc.converse(("messageStart", {}), ("contentBlockDelta", {"delta": {"text": "a"}}))
    body += enc.exception("throttlingException") + enc.converse(("contentBlockDelta", {"delta": {"text": "b"}}))
    sdk = _read(body, [])
    assert (sdk.outcome, sdk.error_class, sdk.events, sdk.deltas) == (names.ERROR, "rate_limited", 3, 1)
    other = _read(body, [], sdk=False)  # a client that reads on: the delta after the error is seen, and flagged
    assert (other.outcome, other.events, other.deltas) == (names.ERROR, 4, 2)
    assert counts(other) == {names.ANOM_EVENT_AFTER_TERMINAL: 1}


def test_body_reader_bad_crc_is_protocol() -> None:
    raw = bytearray(enc.converse(*[(k, v) for ev in body() for k, v in ev.items()]))
    raw[40] ^= 0xFF
    r = _read(bytes(raw), [])
    assert (r.outcome, r.error_class) == (names.TRANSPORT_ERROR, names.EC_PROTOCOL)
