"""Chat Completions and legacy Completions chunks: multi-choice, usage-requested, in-band errors, vendor fields."""

from __future__ import annotations

from typing import Any

import pytest

from otelstream import names
from tests.core.harness import counts, run

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


def test_choice_finished_twice_is_flagged() -> None:
    evs = [chunk(c(0, content="a")), chunk(c(0, finish="length")), chunk(c(0, finish="length")), "[DONE]"]
    r = run(names.CHAT_COMPLETIONS, evs)
    assert r.outcome == names.INCOMPLETE and counts(r)[names.ANOM_EVENT_AFTER_TERMINAL] == 1


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
