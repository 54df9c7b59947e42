"""Chat Completions and legacy Completions chunks: multi-choice, usage-requested, in-band errors, vendor fields."""

from __future__ import annotations

from typing import Any

import pytest

from otelstream import names
from tests.core.harness import MS, counts, run

USAGE = {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59,
         "prompt_tokens_details": {"cached_tokens": 32},
         "completion_tokens_details": {"reasoning_tokens": 3}}  # fmt: skip


def chunk(*choices: dict[str, Any], usage: Any = ..., **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
                         "choices": list(choices), **kw}  # fmt: skip
    if usage is not ...:
        d["usage"] = usage
    return d


def c(index: int = 0, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    return {"index": index, "delta": delta, "finish_reason": finish}


def body(finish: str = "stop", *, usage: bool = False) -> list[Any]:
    u: Any = None if usage else ...
    out: list[Any] = [chunk(c(role="assistant", content=""), usage=u), chunk(c(content="Hi"), usage=u),
                      chunk(c(finish=finish), usage=u)]  # fmt: skip
    if usage:
        out.append(chunk(usage=USAGE))
    out.append("[DONE]")
    return out


@pytest.mark.parametrize(
    ("finish", "outcome"),
    [("stop", names.COMPLETED), ("tool_calls", names.COMPLETED), ("function_call", names.COMPLETED),
     ("length", names.INCOMPLETE), ("content_filter", names.INCOMPLETE)],
)  # fmt: skip
def test_finish_reasons(finish: str, outcome: str) -> None:
    r = run(names.CHAT_COMPLETIONS, body(finish, usage=True))
    assert r.outcome == outcome and r.finish_reasons == (finish,)
    assert r.events == 4 and r.deltas == 1 and r.done_sentinel
    assert r.response_id == "chatcmpl-1" and r.response_model == "gpt-4o-mini"
    assert not r.anomalies


def test_usage_chunk_fields() -> None:
    r = run(names.CHAT_COMPLETIONS, body(usage=True))
    assert r.usage_requested
    assert r.usage.to_json() == {"input_tokens": 50, "output_tokens": 9, "cache_read_input_tokens": 32,
                                 "cache_write_input_tokens": None, "reasoning_output_tokens": 3}  # fmt: skip


def test_no_usage_requested_completes_at_finish_and_flags_usage_missing() -> None:
    r = run(names.CHAT_COMPLETIONS, body())
    assert r.outcome == names.COMPLETED and not r.usage_requested
    assert counts(r) == {names.ANOM_USAGE_MISSING: 1}


def test_usage_requested_but_usage_chunk_lost_is_cut() -> None:
    """Offline: chunks carrying a `usage` key mean usage was requested; without the usage chunk it is not complete."""
    evs = body(usage=True)[:3]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.outcome == names.CUT and r.finish_reasons == ("stop",)
    assert counts(r)[names.ANOM_USAGE_MISSING] == 1


def test_usage_requested_live_flag() -> None:
    r = run(names.CHAT_COMPLETIONS, body()[:3], usage_requested=True)
    assert r.outcome == names.CUT


def test_usage_on_the_finish_chunk() -> None:
    """Mistral/DeepSeek/Together put usage on the finish_reason chunk itself."""
    evs = [chunk(c(content="Hi")), chunk(c(finish="stop"), usage=USAGE), "[DONE]"]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.outcome == names.COMPLETED and r.usage.input_tokens == 50 and not r.anomalies


def test_usage_key_on_the_first_chunk_that_finishes() -> None:
    """Offline, "usage was requested" is read from the chunk's usage key before its finish is judged: the same answer
    is cut without its usage chunk (and without [DONE]) whether or not a role-only chunk came first."""
    finish_first = [chunk(c(content="Hi", finish="stop"), usage=None)]
    role_first = [chunk(c(role="assistant", content=""), usage=None), *finish_first]
    for evs in (finish_first, role_first):
        r = run(names.CHAT_COMPLETIONS, evs)
        assert r.outcome == names.CUT and r.usage_requested
        assert r.error_type is None and r.error_class == names.EC_CUT


def test_done_ends_an_answer_whose_requested_usage_never_came() -> None:
    """[DONE] is the server's explicit end: the answer is completed, the usage it never sent an anomaly."""
    r = run(names.CHAT_COMPLETIONS, [chunk(c(content="Hi", finish="stop"), usage=None), "[DONE]"])
    assert r.outcome == names.COMPLETED and r.usage_requested and r.error_class is None
    assert counts(r) == {names.ANOM_USAGE_MISSING: 1}


@pytest.mark.parametrize("surface", [names.CHAT_COMPLETIONS, names.COMPLETIONS])
def test_done_without_finish_reason_is_completed_with_missing_finish_reason(surface: str) -> None:
    """Servers that end every stream with content, usage and [DONE] but never a finish_reason: completed."""
    first = chunk(c(content="Hi")) if surface == names.CHAT_COMPLETIONS else chunk({"index": 0, "text": "Hi"})
    evs = [first, chunk(usage=USAGE), "[DONE]"]
    r = run(surface, evs)
    assert r.outcome == names.COMPLETED and r.finish_reasons == () and r.deltas == 1
    assert counts(r) == {names.ANOM_MISSING_FINISH_REASON: 1}
    assert r.error_type is None and r.error_class is None
    # the answer ended at [DONE] (the last step of run()), not later
    assert r.t_end_ns - r.t_request_ns == 6 * 1_000_000


def test_without_done_and_without_finish_reason_stays_cut() -> None:
    r = run(names.CHAT_COMPLETIONS, [chunk(c(content="Hi")), chunk(usage=USAGE)])
    assert r.outcome == names.CUT and r.error_type is None and r.error_class == names.EC_CUT


def test_done_before_any_event_is_no_answer() -> None:
    r = run(names.CHAT_COMPLETIONS, ["[DONE]"])
    assert r.outcome == names.CUT and r.done_sentinel


def test_done_with_one_of_two_choices_unfinished() -> None:
    """n=2 and only choice 0 finished: [DONE] ends it; choice 1 is the missing finish reason."""
    evs = [chunk(c(0, content="a")), chunk(c(1, content="b")), chunk(c(0, finish="stop")), "[DONE]"]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.outcome == names.COMPLETED and r.finish_reasons == ("stop",)
    assert [a.detail for a in r.anomalies if a.kind == names.ANOM_MISSING_FINISH_REASON] == ["choice 1"]
    # live, n=3 from the request: the choice never seen is missing too
    r = run(names.CHAT_COMPLETIONS, evs, expected_choices=3)
    assert counts(r)[names.ANOM_MISSING_FINISH_REASON] == 2


def test_done_keeps_a_worse_outcome() -> None:
    evs = [chunk(c(0, content="a")), chunk(c(1, content="b")), chunk(c(0, finish="length")), "[DONE]"]
    assert run(names.CHAT_COMPLETIONS, evs).outcome == names.INCOMPLETE
    evs = [chunk(c(content="a")), {"error": {"message": "boom", "type": "server_error"}}, "[DONE]"]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert (r.outcome, r.error_type, r.error_class) == (names.ERROR, "server_error", names.EC_SERVER_ERROR)


# list-valued content: how some compatible servers stream a reasoning model's thinking
THINKING_PARTS = [{"type": "thinking", "thinking": [{"type": "text", "text": "Let me think"}]}]


@pytest.mark.parametrize(
    "content",
    [THINKING_PARTS, [{"type": "text", "text": "Hi"}], [{"type": "thinking", "thinking": "hm"}],
     [{"type": "reasoning", "reasoning": "hm"}], [{"type": "image"}, {"type": "text", "text": "x"}]],
)  # fmt: skip
def test_list_content_parts_with_output_are_deltas(content: Any) -> None:
    r = run(names.CHAT_COMPLETIONS, [chunk(c(content=content)), chunk(c(finish="stop")), "[DONE]"])
    assert r.deltas == 1 and r.outcome == names.COMPLETED


@pytest.mark.parametrize(
    "content",
    [[], [{"type": "text", "text": ""}], [{"type": "thinking", "thinking": [{"type": "text", "text": ""}]}],
     [{"type": "image", "url": "x"}], ["loose string"], [{"type": "thinking", "thinking": 5}]],
)  # fmt: skip
def test_list_content_parts_without_output_are_not(content: Any) -> None:
    r = run(names.CHAT_COMPLETIONS, [chunk(c(content=content)), chunk(c(finish="stop")), "[DONE]"])
    assert r.deltas == 0


def test_thinking_parts_move_ttfd_to_the_first_thinking_part() -> None:
    """Reasoning streamed as content parts, then the answer as a string: every part counts, TTFD is the first."""
    evs: list[Any] = [chunk(c(role="assistant", content=""))]
    evs += [chunk(c(content=[{"type": "thinking", "thinking": [{"type": "text", "text": f"t{i}"}]}]))
            for i in range(18)]  # fmt: skip
    evs += [chunk(c(content="The answer")), chunk(c(finish="stop")), "[DONE]"]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.deltas == 19 and r.events == 21
    assert r.time_to_first_delta_ns == 4 * 1_000_000  # the second event (2 ms per event in run())
    assert sum(r.chunk_counts) == 18


@pytest.mark.parametrize(
    ("usage", "read", "write"),
    [({"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4,
                                                                            "cache_write_tokens": 6}}, 4, 6),
     ({"prompt_tokens": 10, "completion_tokens": 2, "cache_read_input_tokens": 3,
       "cache_creation_input_tokens": 7}, 3, 7),
     ({"prompt_tokens": 10, "completion_tokens": 2}, None, None)],
)  # fmt: skip
def test_chat_cache_writes(usage: dict[str, Any], read: int | None, write: int | None) -> None:
    r = run(names.CHAT_COMPLETIONS, [chunk(c(content="Hi", finish="stop")), chunk(usage=usage), "[DONE]"])
    assert r.usage.input_tokens == 10  # OpenAI-style input already includes cached tokens: as reported
    assert (r.usage.cache_read_input_tokens, r.usage.cache_write_input_tokens) == (read, write)


def test_missing_done_after_complete_answer() -> None:
    r = run(names.CHAT_COMPLETIONS, body(usage=True)[:-1])
    assert r.outcome == names.COMPLETED and counts(r) == {names.ANOM_MISSING_DONE: 1}


def test_missing_done_not_flagged_when_layer_cannot_see_it() -> None:
    r = run(names.CHAT_COMPLETIONS, body(usage=True)[:-1], done_observable=False)
    assert not r.anomalies


def test_cut_mid_answer() -> None:
    r = run(names.CHAT_COMPLETIONS, body()[:2])
    assert r.outcome == names.CUT and r.finish_reasons == () and r.error_type is None


# --- multi-choice -------------------------------------------------------------------------------------------------
def test_n2_interleaved_worst_choice_wins() -> None:
    evs = [chunk(c(0, content="a")), chunk(c(1, content="b")), chunk(c(0, finish="stop")),
           chunk(c(1, finish="length")), "[DONE]"]  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.outcome == names.INCOMPLETE and r.finish_reasons == ("stop", "length")


def test_n2_one_choice_unfinished_is_cut() -> None:
    evs = [chunk(c(0, content="a")), chunk(c(1, content="b")), chunk(c(0, finish="stop"))]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.outcome == names.CUT


def test_n2_sequential_choices_reopen_the_answer() -> None:
    """Offline (n unknown), a server that streams choice 0 to its finish before choice 1 starts: the first finish
    looked like "every choice seen finished"; choice 1 appearing reopens the answer, so it is judged at the end."""
    head = [chunk(c(0, content="a")), chunk(c(0, finish="stop")), chunk(c(1, content="b"))]
    r = run(names.CHAT_COMPLETIONS, head)
    assert r.outcome == names.CUT and r.finish_reasons == ("stop",)
    assert names.ANOM_EVENT_AFTER_TERMINAL not in counts(r)
    # [DONE] then ends it: choice 1 never got its finish reason
    r = run(names.CHAT_COMPLETIONS, [*head, "[DONE]"])
    assert r.outcome == names.COMPLETED and counts(r)[names.ANOM_MISSING_FINISH_REASON] == 1
    r = run(names.CHAT_COMPLETIONS, [*head, chunk(c(1, finish="length")), "[DONE]"])
    assert r.outcome == names.INCOMPLETE and r.finish_reasons == ("stop", "length")
    assert counts(r) == {names.ANOM_USAGE_MISSING: 1}


def test_expected_choices_from_the_request() -> None:
    """Live, n comes from the request: n=2 with only choice 0 seen and finished is not complete."""
    evs = [chunk(c(0, content="a")), chunk(c(0, finish="stop"))]
    assert run(names.CHAT_COMPLETIONS, evs, expected_choices=2).outcome == names.CUT
    assert run(names.CHAT_COMPLETIONS, evs).outcome == names.COMPLETED
    r = run(names.CHAT_COMPLETIONS, [*evs, "[DONE]"], expected_choices=2)
    assert r.outcome == names.COMPLETED and counts(r)[names.ANOM_MISSING_FINISH_REASON] == 1


def test_a_repeated_finish_without_new_output_is_ordinary_traffic() -> None:
    """OpenRouter repeats the finish_reason on a later chunk (with an empty delta): nothing was lost, no anomaly, the
    first finish counts."""
    evs = [chunk(c(0, content="a")), chunk(c(0, finish="length")), chunk(c(0, finish="length", content="")),
           chunk(c(0, finish="stop")), "[DONE]"]  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, evs)
    assert (r.outcome, r.finish_reasons, r.deltas) == (names.INCOMPLETE, ("length",), 1)
    assert counts(r) == {names.ANOM_USAGE_MISSING: 1}  # (no usage chunk in this body)


@pytest.mark.parametrize("late", [{"content": "more"}, {"reasoning_content": "hm"}])
def test_new_output_after_the_finish_is_flagged(late: dict[str, Any]) -> None:
    evs = [chunk(c(0, content="a")), chunk(c(0, finish="stop")), chunk(c(0, finish="stop", **late)), "[DONE]"]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.outcome == names.COMPLETED
    assert counts(r) == {names.ANOM_EVENT_AFTER_TERMINAL: 1, names.ANOM_USAGE_MISSING: 1}


def test_choice_cap_bounds_memory() -> None:
    evs = [chunk(c(i, content="x")) for i in range(300)]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.deltas == 300 and counts(r)[names.ANOM_BAD_FIELD] == 300 - 128


# --- deltas ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("delta", "is_delta"),
    [
        ({"content": "x"}, True),
        ({"refusal": "no"}, True),
        ({"reasoning_content": "hmm"}, True),  # DeepSeek / vLLM
        ({"reasoning": "hmm"}, True),  # OpenRouter / Groq
        ({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}, True),
        ({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": ""}}]}, False),
        ({"role": "assistant", "content": ""}, False),
        ({"content": None, "refusal": ""}, False),
        ({}, False),
    ],
)
def test_delta_definition(delta: dict[str, Any], is_delta: bool) -> None:
    r = run(names.CHAT_COMPLETIONS, [chunk({"index": 0, "delta": delta, "finish_reason": None})])
    assert r.deltas == int(is_delta) and r.events == 1


def test_parallel_tool_calls() -> None:
    def tc(i: int, args: str) -> dict[str, Any]:
        return c(tool_calls=[{"index": i, "function": {"arguments": args}}])

    evs = [chunk(c(role="assistant")), chunk(tc(0, "")), chunk(tc(0, '{"a":1}')), chunk(tc(1, "")),
           chunk(tc(1, '{"b":2}')), chunk(c(finish="tool_calls")), "[DONE]"]  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.outcome == names.COMPLETED and r.deltas == 2 and r.finish_reasons == ("tool_calls",)


# --- in-band errors ----------------------------------------------------------------------------------------------
def test_error_object_after_200() -> None:
    evs = [chunk(c(content="a")), {"error": {"message": "boom", "type": "server_error", "code": None}}]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.outcome == names.ERROR and r.error_type == "server_error" and r.events == 2


def test_error_beats_earlier_finish_and_keeps_usage() -> None:
    """OpenRouter: finish_reason length, then an error chunk that also carries the billed usage."""
    err = {"error": {"code": 400, "message": "Token limit reached"}, "choices": [], "usage": USAGE}
    evs = [chunk(c(content="a")), chunk(c(finish="length")), err, "[DONE]"]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.outcome == names.ERROR and r.error_type == "400" and r.finish_reasons == ("length",)
    assert r.usage.input_tokens == 50 and names.ANOM_USAGE_MISSING not in counts(r)


def test_azure_empty_first_chunk_id() -> None:
    evs = [{"id": "", "model": "", "object": "", "choices": [], "prompt_filter_results": []},
           chunk(c(content="a")), chunk(c(finish="stop")), "[DONE]"]  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.response_id == "chatcmpl-1" and r.response_model == "gpt-4o-mini"


def test_bad_choices_field() -> None:
    r = run(names.CHAT_COMPLETIONS, [{"choices": "nope"}, {"choices": [None, 3]}])
    assert counts(r)[names.ANOM_BAD_FIELD] >= 1 and r.outcome == names.CUT


# --- legacy completions -------------------------------------------------------------------------------------------
def tchunk(text: str, finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {"id": "cmpl-1", "object": "text_completion", "model": "davinci-002",
            "choices": [{"text": text, "index": index, "finish_reason": finish}]}  # fmt: skip


@pytest.mark.parametrize(("finish", "outcome"), [("stop", names.COMPLETED), ("length", names.INCOMPLETE)])
def test_completions(finish: str, outcome: str) -> None:
    r = run(names.COMPLETIONS, [tchunk("a"), tchunk("b"), tchunk("", finish), "[DONE]"])
    assert r.outcome == outcome and r.deltas == 2 and r.events == 3
    assert counts(r) == {names.ANOM_USAGE_MISSING: 1}


def test_completions_cut_and_usage() -> None:
    assert run(names.COMPLETIONS, [tchunk("a")]).outcome == names.CUT
    evs = [tchunk("a"), tchunk("", "stop"), {"id": "cmpl-1", "choices": [], "usage": USAGE}, "[DONE]"]
    r = run(names.COMPLETIONS, evs)
    assert r.outcome == names.COMPLETED and r.usage.output_tokens == 9 and not r.anomalies


# --- aborted generations (a finish reason "abort" or "error" is an error) ------------------------------
@pytest.mark.parametrize("reason", ["abort", "error"])
@pytest.mark.parametrize("usage", [False, True])
def test_abort_and_error_finish_reasons_are_errors(reason: str, usage: bool) -> None:
    """vLLM ends an aborted request with finish_reason "abort", then [DONE] (and the usage chunk when asked): the
    stream ended as the protocol says, but the answer is truncated."""
    r = run(names.CHAT_COMPLETIONS, body(reason, usage=usage))
    assert (r.outcome, r.error_type, r.error_class) == (names.ERROR, reason, names.EC_SERVER_ERROR)
    assert r.finish_reasons == (reason,) and r.failure_phase == names.PHASE_DURING_OUTPUT
    assert counts(r) == ({} if usage else {names.ANOM_USAGE_MISSING: 1})


def test_abort_before_any_output_is_before_output() -> None:
    r = run(names.CHAT_COMPLETIONS, [chunk(c(role="assistant", content="")), chunk(c(finish="abort")), "[DONE]"])
    assert (r.outcome, r.deltas, r.failure_phase) == (names.ERROR, 0, names.PHASE_BEFORE_OUTPUT)


def test_abort_on_one_of_two_choices_is_the_worst_outcome() -> None:
    evs = [chunk(c(0, content="a"), c(1, content="b")), chunk(c(0, finish="stop"), c(1, finish="abort")), "[DONE]"]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert (r.outcome, r.error_type, r.error_class) == (names.ERROR, "abort", names.EC_SERVER_ERROR)


def test_an_error_object_after_an_abort_keeps_the_first_error() -> None:
    evs = [chunk(c(content="a")), chunk(c(finish="abort")), {"error": {"type": "rate_limit_error"}}]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert (r.outcome, r.error_type, r.error_class) == (names.ERROR, "abort", names.EC_SERVER_ERROR)


@pytest.mark.parametrize("reason", ["abort", "error"])
def test_legacy_completions_abort(reason: str) -> None:
    r = run(names.COMPLETIONS, [tchunk("a"), tchunk("", reason), "[DONE]"])
    assert (r.outcome, r.error_type, r.error_class) == (names.ERROR, reason, names.EC_SERVER_ERROR)


# --- error classes of in-band error objects ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("err", "error_type", "klass"),
    [  # Groq: an unlisted code does not hide a listed type
     ({"message": "m", "type": "invalid_request_error", "code": "tool_use_failed", "status_code": 400},
      "tool_use_failed", names.EC_BAD_REQUEST),
     # neither listed: a status inside the body decides
     ({"message": "m", "type": "vendor_type", "code": "vendor_code", "status_code": 429}, "vendor_code",
      names.EC_RATE_LIMITED),
     ({"message": "m", "code": "vendor_code", "status": 503}, "vendor_code", names.EC_OVERLOADED),
     ({"message": "m", "code": "vendor_code", "status": "RESOURCE_EXHAUSTED"}, "vendor_code", names.EC_OTHER),
     # a listed code wins over the body's status
     ({"message": "m", "code": "insufficient_quota", "status_code": 429}, "insufficient_quota",
      names.EC_QUOTA_EXCEEDED),
     ({"message": "m", "type": "server_error", "code": None}, "server_error", names.EC_SERVER_ERROR)],
)  # fmt: skip
def test_inband_error_class_from_code_then_type_then_status(err: dict[str, Any], error_type: str,
                                                            klass: str) -> None:  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, [chunk(c(content="a")), ("error", {"error": err})])
    assert (r.outcome, r.error_type, r.error_class) == (names.ERROR, error_type, klass)


# --- usage and ids -----------------------------------------------------------------------------------------------
def test_groq_usage_only_in_x_groq() -> None:
    x_usage = {"queue_time": 0.01, "prompt_tokens": 12, "completion_tokens": 26, "total_tokens": 38}
    evs = [chunk(c(content="a"), x_groq={"id": "req_1"}), chunk(c(finish="stop"), x_groq={"usage": x_usage}),
           "[DONE]"]  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, evs)
    assert (r.usage.input_tokens, r.usage.output_tokens) == (12, 26) and counts(r) == {}


def test_top_level_usage_wins_over_x_groq() -> None:
    evs = [chunk(c(content="a")), chunk(c(finish="stop")),
           chunk(usage=USAGE, x_groq={"usage": {"prompt_tokens": 1, "completion_tokens": 1}}), "[DONE]"]  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, evs)
    assert (r.usage.input_tokens, r.usage.output_tokens) == (50, 9)


def test_together_top_level_cached_tokens_is_cache_read() -> None:
    usage = {"prompt_tokens": 41, "completion_tokens": 15, "total_tokens": 56, "cached_tokens": 7}
    r = run(names.CHAT_COMPLETIONS, [chunk(c(content="a")), chunk(c(finish="stop"), usage=usage), "[DONE]"])
    assert (r.usage.input_tokens, r.usage.cache_read_input_tokens) == (41, 7)


def test_response_id_and_model_are_the_first_non_empty_values() -> None:
    """A first chunk with an id but an empty model (and later chunks naming other models) keeps the first of each."""
    evs = [{"id": "chatcmpl-a", "model": "", "choices": [c(role="assistant", content="")]},
           {"id": "", "model": "m-1", "choices": [c(content="x")]},
           {"id": "chatcmpl-b", "model": "m-2", "choices": [c(finish="stop")]}, "[DONE]"]  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, evs)
    assert (r.response_id, r.response_model) == ("chatcmpl-a", "m-1")


# --- time to first output (TTFO): the first delta that is not reasoning -------------------------------------------
@pytest.mark.parametrize(
    "answer",
    [{"content": "42"}, {"refusal": "no"}, {"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]},
     {"content": [{"type": "text", "text": "42"}]}],
)  # fmt: skip
@pytest.mark.parametrize(
    "thought",
    [{"reasoning_content": "hm"}, {"reasoning": "hm"}, {"content": THINKING_PARTS},
     {"content": [{"type": "reasoning", "reasoning": "hm"}]}, {"content": [{"type": "thinking", "text": "hm"}]}],
)  # fmt: skip
def test_ttfo_is_the_first_delta_that_is_not_reasoning(thought: dict[str, Any], answer: dict[str, Any]) -> None:
    evs = [chunk(c(role="assistant", content="")), chunk(c(**thought)), chunk(c(**thought)), chunk(c(**answer)),
           chunk(c(**thought)), chunk(c(finish="stop")), "[DONE]"]  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.deltas == 4
    # run(): 2 ms per event, the clock read after the second ms of each
    assert (r.time_to_first_delta_ns, r.time_to_first_output_ns) == (4 * MS, 8 * MS)
    assert r.first_output_event == 3


def test_ttfo_is_ttfd_without_reasoning_and_none_without_output() -> None:
    r = run(names.CHAT_COMPLETIONS, body())
    assert r.time_to_first_output_ns == r.time_to_first_delta_ns == 4 * MS and r.first_output_event == 1
    r = run(names.CHAT_COMPLETIONS, [chunk(c(reasoning_content="hm")), chunk(c(finish="length")), "[DONE]"])
    assert (r.deltas, r.time_to_first_output_ns, r.first_output_event) == (1, None, None)
    assert r.time_to_first_delta_ns == 2 * MS


def test_ttfo_on_a_second_choice() -> None:
    """n=2: choice 0 still thinks while choice 1 answers; the answer is the first output."""
    evs = [chunk(c(0, reasoning_content="hm"), c(1, reasoning_content="hm")),
           chunk(c(0, reasoning_content="hm"), c(1, content="a")), chunk(c(0, finish="stop"), c(1, finish="stop")),
           "[DONE]"]  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, evs)
    assert (r.time_to_first_delta_ns, r.time_to_first_output_ns) == (2 * MS, 4 * MS)


def test_ttfo_legacy_completions() -> None:
    r = run(names.COMPLETIONS, [tchunk(""), tchunk("a"), tchunk("", "stop"), "[DONE]"])
    assert r.time_to_first_output_ns == r.time_to_first_delta_ns == 4 * MS
