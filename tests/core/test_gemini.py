"""Gemini ``generate_content`` chunks: deltas and reasoning, finish reasons per candidate, a blocked prompt, in-band
errors, the last usageMetadata, and google-genai's snake_case models read like the JSON."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otelstream import names
from otelstream.core.protocols.gemini import INCOMPLETE_REASONS, error_body_fields
from tests.core.harness import counts, run, tracker

G = names.GENERATE_CONTENT


def chunk(*parts: dict[str, Any], finish: str | None = None, index: int = 0, **top: Any) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": index}
    if finish is not None:
        cand["finishReason"] = finish
    return {"candidates": [cand], "modelVersion": "gemini-2.5-flash", "responseId": "r-1", **top}


USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 7, "cachedContentTokenCount": 4,
         "toolUsePromptTokenCount": 2, "totalTokenCount": 24}  # fmt: skip
TEXT = {"text": "Hello"}
THOUGHT = {"text": "thinking…", "thought": True}


def body(finish: str = "STOP") -> list[dict[str, Any]]:
    return [chunk(THOUGHT), chunk(TEXT), chunk({"text": " world"}, finish=finish, usageMetadata=USAGE)]


def test_completed_with_reasoning_first_and_usage() -> None:
    r = run(G, body())
    assert (r.outcome, r.finish_reasons, r.events, r.deltas) == (names.COMPLETED, ("STOP",), 3, 3)
    assert r.response_id == "r-1" and r.response_model == "gemini-2.5-flash"
    assert r.first_output_event == 1 and r.time_to_first_output_ns is not None
    assert r.time_to_first_delta_ns is not None and r.time_to_first_delta_ns < r.time_to_first_output_ns
    assert r.usage.to_json() == {"input_tokens": 12, "output_tokens": 12, "cache_read_input_tokens": 4,
                                 "cache_write_input_tokens": None, "reasoning_output_tokens": 7}  # fmt: skip
    assert r.error_class is None and not r.anomalies


@pytest.mark.parametrize("reason", sorted(INCOMPLETE_REASONS))
def test_limits_and_filters_are_incomplete(reason: str) -> None:
    r = run(G, body(reason))
    assert (r.outcome, r.finish_reasons, r.error_type, r.error_class) == (names.INCOMPLETE, (reason,), None, None)


@pytest.mark.parametrize(
    ("reason", "klass"),
    [("MALFORMED_FUNCTION_CALL", "server_error"), ("MALFORMED_RESPONSE", "server_error"), ("OTHER", "_OTHER"),
     ("UNEXPECTED_TOOL_CALL", "_OTHER"), ("FINISH_REASON_UNSPECIFIED", "_OTHER")],
)  # fmt: skip
def test_other_finish_reasons_are_errors_of_that_type(reason: str, klass: str) -> None:
    r = run(G, body(reason))
    assert (r.outcome, r.error_type, r.error_class, r.failure_phase) == (names.ERROR, reason, klass, "during_output")


def test_no_finish_reason_is_cut() -> None:
    r = run(G, body()[:2])
    assert (r.outcome, r.error_class, r.deltas) == (names.CUT, "cut", 2)


def test_every_candidate_must_finish_and_the_worst_wins() -> None:
    two = [chunk(TEXT, index=0), chunk(TEXT, index=1), chunk(finish="STOP", index=0)]
    assert run(G, two).outcome == names.CUT  # candidate 1 never finished
    r = run(G, [*two, chunk(finish="MAX_TOKENS", index=1)])
    assert r.outcome == names.INCOMPLETE and r.finish_reasons == ("STOP", "MAX_TOKENS")


def test_thought_signature_alone_is_no_delta_and_tool_parts_are_output() -> None:
    evs = [chunk({"thoughtSignature": "c2ln"}), chunk({"functionCall": {"name": "f", "args": {}}}),
           chunk({"executableCode": {"code": "1"}}), chunk({"inlineData": {"mimeType": "image/png"}}),
           chunk({"text": ""}, finish="STOP")]  # fmt: skip
    r = run(G, evs)
    assert (r.outcome, r.events, r.deltas, r.first_output_event) == (names.COMPLETED, 5, 3, 1)


def test_blocked_prompt_is_incomplete_with_its_block_reason() -> None:
    blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 9},
               "modelVersion": "gemini-2.5-pro"}  # fmt: skip
    r = run(G, [blocked])
    assert (r.outcome, r.finish_reasons, r.response_model) == (names.INCOMPLETE, ("PROHIBITED_CONTENT",),
                                                               "gemini-2.5-pro")  # fmt: skip
    assert r.usage.input_tokens == 9 and r.usage.output_tokens is None
    assert counts(r) == {names.ANOM_NO_DELTA: 1}


@pytest.mark.parametrize(
    ("error", "etype", "klass"),
    [({"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}, "RESOURCE_EXHAUSTED", "rate_limited"),
     ({"code": 503, "message": "busy", "status": "UNAVAILABLE"}, "UNAVAILABLE", "overloaded"),
     ({"code": 500, "message": "x", "status": "SOMETHING_NEW"}, "SOMETHING_NEW", "server_error"),
     ({"code": 504, "message": "x"}, "504", "timeout")],
)  # fmt: skip
def test_inband_error_object(error: dict[str, Any], etype: str, klass: str) -> None:
    r = run(G, [chunk(TEXT), {"error": error}])
    assert (r.outcome, r.error_type, r.error_class, r.failure_phase) == (names.ERROR, etype, klass, "during_output")


def test_last_usage_metadata_replaces_earlier_partial_counts() -> None:
    evs = [chunk(TEXT, usageMetadata={"promptTokenCount": 10, "totalTokenCount": 10}),
           chunk(TEXT, finish="STOP", usageMetadata={"promptTokenCount": 10, "candidatesTokenCount": 3})]  # fmt: skip
    r = run(G, evs)
    assert r.usage.to_json() == {"input_tokens": 10, "output_tokens": 3, "cache_read_input_tokens": None,
                                 "cache_write_input_tokens": None, "reasoning_output_tokens": None}  # fmt: skip


def test_output_after_every_candidate_finished_is_flagged() -> None:
    r = run(G, [*body(), chunk(TEXT)])
    assert r.outcome == names.COMPLETED and counts(r) == {names.ANOM_EVENT_AFTER_TERMINAL: 1}
    # a usage-only chunk after the finish is ordinary traffic
    assert not run(G, [*body(), {"usageMetadata": USAGE}]).anomalies


def test_sdk_models_with_snake_case_fields_read_like_the_json() -> None:
    """google-genai's GenerateContentResponse keeps snake_case fields in its ``__dict__``."""

    def ns(**kw: Any) -> SimpleNamespace:
        return SimpleNamespace(**kw)

    part = ns(text="hi", thought=None, function_call=None)
    cand = ns(content=ns(parts=[part]), finish_reason="STOP", index=0)
    usage = ns(prompt_token_count=3, candidates_token_count=2, thoughts_token_count=None,
               cached_content_token_count=None, tool_use_prompt_token_count=None)  # fmt: skip
    ev = ns(candidates=[cand], usage_metadata=usage, model_version="gemini-x", response_id="id-9")
    r = run(G, [ev])
    assert (r.outcome, r.deltas, r.response_model, r.response_id) == (names.COMPLETED, 1, "gemini-x", "id-9")
    assert (r.usage.input_tokens, r.usage.output_tokens) == (3, 2)


JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
        ["candidates", "content", "parts", "text", "thought", "finishReason", "index", "usageMetadata", "error",
         "promptFeedback", "blockReason", "promptTokenCount", "status", "code", "modelVersion"]), c, max_size=4),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(JUNK, max_size=8))
def test_no_input_makes_it_raise(events: list[Any]) -> None:
    r = run(G, events)
    assert r.events == len(events) and r.outcome in names.OUTCOMES
    assert r.deltas <= r.events and (r.error_class is None) == (r.outcome not in names.BAD_OUTCOMES)


def test_google_genai_models_give_the_report_the_json_gives() -> None:
    """What google-genai builds from each chunk (its pydantic models, finish reasons as enums) reads as the JSON."""
    genai_types = pytest.importorskip("google.genai.types")
    chunks = [chunk(THOUGHT, usageMetadata={"promptTokenCount": 5}), chunk(TEXT, finish="STOP", usageMetadata=USAGE)]
    models = [genai_types.GenerateContentResponse.model_validate(c) for c in chunks]
    assert type(models[1].candidates[0].finish_reason) is not str  # an enum: the case worth checking
    assert run(G, models) == run(G, chunks)
    bad = [chunk(TEXT, finish="MALFORMED_FUNCTION_CALL")]
    r = run(G, [genai_types.GenerateContentResponse.model_validate(c) for c in bad])
    assert (r.outcome, r.error_type, r.finish_reasons) == (names.ERROR, "MALFORMED_FUNCTION_CALL",
                                                           ("MALFORMED_FUNCTION_CALL",))  # fmt: skip
    assert type(r.error_type) is str and type(r.finish_reasons[0]) is str


@pytest.mark.parametrize(
    ("body", "etype", "klass"),
    [({"code": 429, "status": "RESOURCE_EXHAUSTED"}, "RESOURCE_EXHAUSTED", "rate_limited"),
     ({"code": 403, "status": "PERMISSION_DENIED"}, "PERMISSION_DENIED", "auth"),
     ({"code": 400, "status": "INVALID_ARGUMENT"}, "INVALID_ARGUMENT", "bad_request"),
     ({"code": 503}, "503", "overloaded")],
)  # fmt: skip
def test_http_error_body_read_as_the_adapters_will(body: dict[str, Any], etype: str, klass: str) -> None:
    """An HTTP error's JSON body (google-genai raises ClientError / ServerError with it): the same reading as the
    in-band error object, before any stream."""
    t = tracker(G)
    t.error_seen(error_body_fields(body))
    r = t.end("http_error")
    assert r is not None and (r.outcome, r.error_type, r.error_class) == (names.HTTP_ERROR, etype, klass)
