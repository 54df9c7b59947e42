"""`otelstream check` on Gemini `.sse` bodies as sent (CRLF) and Bedrock `.eventstream` bodies as sent (binary,
CRCs checked): outcomes, finish reasons, counts, usage, id and model, the `--json` keys, and `--surface auto`
telling the wires apart. The bodies are built by hand here; the event-stream ones framed by the test encoder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otelstream import names, offline
from tests.support import eventstream as enc

DESIGN_KEYS = {"file", "surface", "provider", "outcome", "finish_reasons", "error_type", "error_class", "events",
               "deltas", "keepalives", "done_sentinel", "sequence", "usage", "response_id", "response_model",
               "anomalies"}  # fmt: skip


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    rc = offline.main(["--json", *argv])
    out, _ = capsys.readouterr()
    return rc, json.loads(out) if out else None


# --- Gemini ------------------------------------------------------------------------------------------------
def gemini_body(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def cand(text: str | None = None, finish: str | None = None, thought: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {"text": text} if text is not None else {}
    if thought:
        part["thought"] = True
    c: dict[str, Any] = {"content": {"role": "model", "parts": [part] if part else []}, "index": 0}
    if finish:
        c["finishReason"] = finish
    return {"candidates": [c], "modelVersion": "gemini-2.5-flash", "responseId": "resp-g1"}


GEMINI_USAGE = {"promptTokenCount": 8, "candidatesTokenCount": 6, "thoughtsTokenCount": 20, "totalTokenCount": 34}


def test_gemini_completed_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "gemini.sse"
    last = {**cand("!", "STOP"), "usageMetadata": GEMINI_USAGE}
    p.write_bytes(gemini_body(cand("plan", thought=True), cand("Hello"), last))
    rc, doc = check(capsys, str(p))
    assert rc == 0 and set(doc) >= DESIGN_KEYS
    assert doc["surface"] == names.GENERATE_CONTENT and doc["provider"] == names.PROVIDER_GEMINI
    assert (doc["outcome"], doc["finish_reasons"], doc["events"], doc["deltas"]) == ("completed", ["STOP"], 3, 3)
    assert (doc["keepalives"], doc["done_sentinel"]) == (0, False)
    assert (doc["sequence"]["first"], doc["sequence"]["last"]) == (None, None)
    assert doc["usage"] == {"input_tokens": 8, "output_tokens": 26, "cache_read_input_tokens": None,
                            "cache_write_input_tokens": None, "reasoning_output_tokens": 20}  # fmt: skip
    assert (doc["response_id"], doc["response_model"]) == ("resp-g1", "gemini-2.5-flash")
    assert doc["anomalies"] == [] and doc["error_class"] is None


@pytest.mark.parametrize(
    ("chunks", "outcome", "finish", "etype", "eclass"),
    [([cand("a"), cand("b", "MAX_TOKENS")], "incomplete", ["MAX_TOKENS"], None, None),
     ([cand("a"), cand(None, "SAFETY")], "incomplete", ["SAFETY"], None, None),
     ([cand("a"), cand(None, "MALFORMED_FUNCTION_CALL")], "error", ["MALFORMED_FUNCTION_CALL"],
      "MALFORMED_FUNCTION_CALL", "server_error"),
     ([cand("a"), {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}], "error", [],
      "RESOURCE_EXHAUSTED", "rate_limited"),
     ([cand("a"), cand("b")], "cut", [], None, "cut"),
     ([{"promptFeedback": {"blockReason": "SAFETY"}, "modelVersion": "m"}], "incomplete", ["SAFETY"], None, None)],
)  # fmt: skip
def test_gemini_outcomes(
    tmp_path: Path, chunks: list[dict[str, Any]], outcome: str, finish: list[str], etype: str | None,
    eclass: str | None,
) -> None:  # fmt: skip
    p = tmp_path / "g.sse"
    p.write_bytes(gemini_body(*chunks))
    r = offline.analyse(str(p)).reports[0]
    assert (r.surface, r.outcome, list(r.finish_reasons), r.error_type, r.error_class) == (
        names.GENERATE_CONTENT, outcome, finish, etype, eclass)  # fmt: skip


# --- Bedrock ConverseStream -----------------------------------------------------------------------------------
def converse_ok(reason: str = "end_turn") -> list[tuple[str, Any]]:
    return [
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"delta": {"reasoningContent": {"text": "hmm"}}, "contentBlockIndex": 0}),
        ("contentBlockDelta", {"delta": {"text": "Hello"}, "contentBlockIndex": 0}),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("messageStop", {"stopReason": reason}),
        ("metadata", {"usage": {"inputTokens": 12, "outputTokens": 3, "totalTokens": 15}, "metrics": {"latencyMs": 9}}),
    ]


def test_converse_completed_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "bedrock.eventstream"
    p.write_bytes(enc.converse(*converse_ok()))
    rc, doc = check(capsys, str(p))
    assert rc == 0 and set(doc) >= DESIGN_KEYS
    assert doc["surface"] == names.CONVERSE and doc["provider"] == names.PROVIDER_BEDROCK
    assert (doc["outcome"], doc["finish_reasons"], doc["events"], doc["deltas"]) == ("completed", ["end_turn"], 6, 2)
    assert (doc["keepalives"], doc["done_sentinel"], doc["sequence"]["first"]) == (0, False, None)
    assert doc["usage"]["input_tokens"] == 12 and doc["usage"]["output_tokens"] == 3
    assert (doc["response_id"], doc["response_model"]) == (None, None)  # the stream names neither
    assert doc["anomalies"] == []


def test_surface_auto_tells_eventstream_by_its_bytes_whatever_the_name(tmp_path: Path) -> None:
    p = tmp_path / "body.bin"
    p.write_bytes(enc.converse(*converse_ok("max_tokens")))
    r = offline.analyse(str(p)).reports[0]
    assert (r.surface, r.outcome) == (names.CONVERSE, names.INCOMPLETE)


@pytest.mark.parametrize(("flip_at", "what"), [(5, "prelude"), (-2, "message")])
def test_bad_crc_is_a_transport_error_of_class_protocol(tmp_path: Path, flip_at: int, what: str) -> None:
    first = enc.event("messageStart", {"role": "assistant"})
    second = bytearray(enc.event("contentBlockDelta", {"delta": {"text": "Hi"}}))
    second[flip_at] ^= 0x40
    p = tmp_path / "bad.eventstream"
    p.write_bytes(first + bytes(second) + enc.event("messageStop", {"stopReason": "end_turn"}))
    r = offline.analyse(str(p)).reports[0]
    assert (r.outcome, r.error_class, r.events) == (names.TRANSPORT_ERROR, names.EC_PROTOCOL, 1)
    assert dict(r.anomaly_counts) == {names.ANOM_UNDECODABLE: 1}
    assert f"{what} CRC mismatch" in r.anomalies[0].detail


def test_body_cut_inside_a_message_is_a_transport_error(tmp_path: Path) -> None:
    body = enc.converse(*converse_ok()[:4])
    p = tmp_path / "cut.eventstream"
    p.write_bytes(body[:-7])
    r = offline.analyse(str(p)).reports[0]
    assert (r.outcome, r.error_class, r.events) == (names.TRANSPORT_ERROR, names.EC_PROTOCOL, 3)
    # after messageStop the answer is whole: a body cut inside the metadata event loses only the usage
    p.write_bytes(enc.converse(*converse_ok())[:-7])
    r = offline.analyse(str(p)).reports[0]
    assert r.outcome == names.COMPLETED
    assert dict(r.anomaly_counts) == {names.ANOM_UNDECODABLE: 1, names.ANOM_USAGE_MISSING: 1}


def test_clean_end_without_message_stop_is_cut(tmp_path: Path) -> None:
    p = tmp_path / "cut.eventstream"
    p.write_bytes(enc.converse(*converse_ok()[:3]))
    r = offline.analyse(str(p)).reports[0]
    assert (r.outcome, r.error_class, r.failure_phase) == (names.CUT, names.EC_CUT, names.PHASE_DURING_OUTPUT)


def test_exception_message_is_an_error_and_the_client_reads_no_further(tmp_path: Path) -> None:
    p = tmp_path / "throttled.eventstream"
    p.write_bytes(enc.converse(*converse_ok()[:3]) + enc.exception("throttlingException", "slow down")
                  + enc.converse(*converse_ok()[3:]))  # fmt: skip
    r = offline.analyse(str(p)).reports[0]
    assert (r.outcome, r.error_type, r.error_class, r.events) == (names.ERROR, "throttlingException",
                                                                  names.EC_RATE_LIMITED, 4)  # fmt: skip
    assert not r.anomalies  # botocore raised at the exception: what follows is never read, live or here


def test_payload_that_is_not_json_is_a_transport_error(tmp_path: Path) -> None:
    p = tmp_path / "junk.eventstream"
    p.write_bytes(enc.converse(*converse_ok()[:2]) + enc.event("contentBlockDelta", b"{not json"))
    r = offline.analyse(str(p)).reports[0]
    assert (r.outcome, r.error_class) == (names.TRANSPORT_ERROR, names.EC_PROTOCOL)


# --- Bedrock invoke streams ---------------------------------------------------------------------------------
MESSAGES_EVENTS = [
    {"type": "message_start", "message": {"id": "msg_b1", "model": "claude-sonnet-4-5", "usage": {"input_tokens": 7}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop", names.BEDROCK_INVOCATION_METRICS: {"inputTokenCount": 7, "outputTokenCount": 2,
                                                               "invocationLatency": 300, "firstByteLatency": 90}},
]  # fmt: skip


def test_invoke_of_an_anthropic_model_is_a_messages_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "invoke.eventstream"
    p.write_bytes(enc.invoke(*MESSAGES_EVENTS))
    rc, doc = check(capsys, str(p))
    assert rc == 0 and (doc["surface"], doc["provider"]) == (names.MESSAGES, names.PROVIDER_BEDROCK)
    assert (doc["outcome"], doc["finish_reasons"], doc["events"], doc["deltas"]) == ("completed", ["end_turn"], 6, 1)
    assert (doc["usage"]["input_tokens"], doc["usage"]["output_tokens"]) == (7, 2)
    assert (doc["response_id"], doc["response_model"], doc["anomalies"]) == ("msg_b1", "claude-sonnet-4-5", [])


def test_invoke_cut_and_exception(tmp_path: Path) -> None:
    p = tmp_path / "invoke-cut.eventstream"
    p.write_bytes(enc.invoke(*MESSAGES_EVENTS[:3]))
    assert offline.analyse(str(p)).reports[0].outcome == names.CUT
    p.write_bytes(enc.invoke(*MESSAGES_EVENTS[:3]) + enc.exception("modelStreamErrorException"))
    r = offline.analyse(str(p)).reports[0]
    assert (r.outcome, r.error_type, r.error_class) == (names.ERROR, "modelStreamErrorException", "server_error")


def test_invoke_of_another_model_family_is_an_unsupported_payload(tmp_path: Path) -> None:
    p = tmp_path / "llama.eventstream"
    p.write_bytes(enc.invoke({"generation": "Hi", "stop_reason": None}, {"generation": "!", "stop_reason": "stop"}))
    r = offline.analyse(str(p)).reports[0]
    assert (r.surface, r.outcome, r.events, r.deltas) == (names.CONVERSE, names.COMPLETED, 2, 0)
    assert dict(r.anomaly_counts) == {names.ANOM_UNSUPPORTED_PAYLOAD: 1, names.ANOM_NO_DELTA: 1}
    assert r.usage.input_tokens is None and r.finish_reasons == ()


def test_surface_given_for_an_eventstream_body_must_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "b.eventstream"
    p.write_bytes(enc.converse(*converse_ok()))
    rc, doc = check(capsys, "--surface", "chat_completions", str(p))
    assert rc == 2 and "converse or messages" in doc["error"]
    rc, doc = check(capsys, "--surface", "converse", str(p))
    assert rc == 0 and doc["outcome"] == "completed"


def test_text_named_eventstream_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "x.eventstream"
    p.write_text("data: {}\n\n")
    rc, doc = check(capsys, str(p))
    assert rc == 2 and "not an AWS event-stream body" in doc["error"]
