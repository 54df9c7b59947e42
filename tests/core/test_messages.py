"""Anthropic Messages events: stop reasons, cumulative usage, input = input + cache read + cache write, errors."""

from __future__ import annotations

from typing import Any

import pytest

from otelstream import names
from tests.core.harness import MS, counts, run


def start(**usage: Any) -> dict[str, Any]:
    u = {"input_tokens": 10, "output_tokens": 1, **usage}
    return {"type": "message_start", "message": {"id": "msg_1", "model": "claude-sonnet-4-5", "usage": u}}


def delta(kind: str = "text_delta", key: str = "text", value: Any = "x", index: int = 0) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, key: value}}


def mdelta(reason: str | None, **usage: Any) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage}


BLOCK = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
BSTOP = {"type": "content_block_stop", "index": 0}
STOP = {"type": "message_stop"}


def body(reason: str, *, stop: bool = True) -> list[dict[str, Any]]:
    evs = [start(), BLOCK, delta(), delta(), BSTOP, mdelta(reason, output_tokens=12)]
    return [*evs, STOP] if stop else evs


@pytest.mark.parametrize(
    ("reason", "outcome"),
    [("end_turn", names.COMPLETED), ("tool_use", names.COMPLETED), ("stop_sequence", names.COMPLETED),
     ("pause_turn", names.COMPLETED), ("max_tokens", names.INCOMPLETE),
     ("model_context_window_exceeded", names.INCOMPLETE), ("refusal", names.INCOMPLETE)],
)  # fmt: skip
def test_stop_reasons(reason: str, outcome: str) -> None:
    r = run(names.MESSAGES, body(reason))
    assert r.outcome == outcome and r.finish_reasons == (reason,)
    assert r.events == 7 and r.deltas == 2
    assert r.response_id == "msg_1" and r.response_model == "claude-sonnet-4-5"
    assert not r.anomalies


def test_no_message_stop_is_cut_unless_a_limit_was_hit() -> None:
    assert run(names.MESSAGES, body("end_turn", stop=False)).outcome == names.CUT
    # the limit was already reported: the answer ended by a limit, whether or not message_stop arrived
    assert run(names.MESSAGES, body("max_tokens", stop=False)).outcome == names.INCOMPLETE


def test_usage_cumulative_assign_never_add() -> None:
    evs = [start(), delta(), mdelta(None, output_tokens=5), mdelta("end_turn", output_tokens=12), STOP]
    r = run(names.MESSAGES, evs)
    assert r.usage.output_tokens == 12 and r.usage.input_tokens == 10


def test_input_includes_cache_read_and_write() -> None:
    evs = [start(cache_read_input_tokens=100, cache_creation_input_tokens=40), delta(),
           mdelta("end_turn", output_tokens=3), STOP]  # fmt: skip
    r = run(names.MESSAGES, evs)
    assert r.usage.to_json() == {"input_tokens": 150, "output_tokens": 3, "cache_read_input_tokens": 100,
                                 "cache_write_input_tokens": 40, "reasoning_output_tokens": None}  # fmt: skip


def test_input_sum_beyond_int64_is_a_bad_field_not_a_count() -> None:
    """Each count fits int64, their sum does not: no exporter can carry it, so it is reported as a bad field."""
    big = 2**62
    evs = [start(input_tokens=big, cache_read_input_tokens=big, cache_creation_input_tokens=big), delta(), STOP]
    r = run(names.MESSAGES, evs)
    assert r.usage.input_tokens is None and r.usage.cache_read_input_tokens == big
    assert counts(r)[names.ANOM_BAD_FIELD] == 1


def test_message_delta_usage_replaces_input_and_cache() -> None:
    """Newer servers repeat input and cache counts in message_delta: the later values win, the sum is recomputed."""
    evs = [start(cache_read_input_tokens=100), delta(),
           mdelta("end_turn", input_tokens=11, cache_read_input_tokens=200, output_tokens=3), STOP]  # fmt: skip
    r = run(names.MESSAGES, evs)
    assert r.usage.input_tokens == 211 and r.usage.cache_read_input_tokens == 200


@pytest.mark.parametrize(
    ("ev", "is_delta"),
    [
        (delta("text_delta", "text", "hi"), True),
        (delta("thinking_delta", "thinking", "hmm"), True),
        (delta("input_json_delta", "partial_json", '{"a"'), True),
        (delta("citations_delta", "citation", {"url": "u"}), True),
        (delta("signature_delta", "signature", "sig"), False),
        (delta("input_json_delta", "partial_json", ""), False),
        (delta("text_delta", "text", ""), False),
        (delta("compaction_delta", "content", "summary"), False),
        (delta([1], "text", "hi"), False),  # an unhashable delta type must not crash
    ],
)
def test_delta_definition(ev: dict[str, Any], is_delta: bool) -> None:
    r = run(names.MESSAGES, [ev])
    assert r.deltas == int(is_delta) and r.events == 1


def test_error_event_mid_stream() -> None:
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    r = run(names.MESSAGES, [start(), BLOCK, delta(), ("error", err)])
    assert r.outcome == names.ERROR and r.error_type == "overloaded_error"


def test_error_beats_completed() -> None:
    err = {"type": "error", "error": {"type": "api_error", "message": "m"}}
    r = run(names.MESSAGES, [*body("end_turn"), err])
    assert r.outcome == names.ERROR and r.error_type == "api_error"


def test_ping_is_keepalive_not_event() -> None:
    r = run(names.MESSAGES, [start(), ("ping", {"type": "ping"}), *body("end_turn")[1:]])
    assert r.keepalives == 1 and r.events == 7


def test_untyped_event_uses_sse_name() -> None:
    r = run(names.MESSAGES, [start(), ("message_stop", {})])
    assert r.outcome == names.COMPLETED and counts(r) == {names.ANOM_UNTYPED_EVENT: 1, names.ANOM_NO_DELTA: 1}


def test_unknown_event_and_bad_type_counted() -> None:
    r = run(names.MESSAGES, [{"type": "future_event"}, {"type": ["list"]}, {"type": {"a": 1}}, *body("end_turn")])
    assert r.outcome == names.COMPLETED
    assert counts(r) == {names.ANOM_UNKNOWN_EVENT: 1, names.ANOM_BAD_FIELD: 2}


def test_events_after_message_stop() -> None:
    r = run(names.MESSAGES, [*body("end_turn"), delta(), STOP])
    assert counts(r)[names.ANOM_EVENT_AFTER_TERMINAL] == 2


def test_no_delta_anomaly() -> None:
    r = run(names.MESSAGES, [start(), mdelta("tool_use", output_tokens=4), STOP])
    assert r.outcome == names.COMPLETED and counts(r) == {names.ANOM_NO_DELTA: 1}


def test_an_empty_delta_after_message_stop_is_no_anomaly() -> None:
    r = run(names.MESSAGES, [*body("end_turn"), delta(value=""), delta("input_json_delta", "partial_json", "")])
    assert r.outcome == names.COMPLETED and counts(r) == {}


@pytest.mark.parametrize(
    ("err", "klass"),
    [({"type": "overloaded_error", "message": "Overloaded"}, names.EC_OVERLOADED),
     ({"type": "vendor_error", "message": "m", "status_code": 529}, names.EC_OVERLOADED),
     ({"type": "vendor_error", "message": "m"}, names.EC_OTHER)],
)  # fmt: skip
def test_error_event_class(err: dict[str, Any], klass: str) -> None:
    r = run(names.MESSAGES, [start(), BLOCK, delta(), ("error", {"type": "error", "error": err})])
    assert (r.outcome, r.error_type, r.error_class) == (names.ERROR, err["type"], klass)
    assert r.failure_phase == names.PHASE_DURING_OUTPUT


def test_error_before_any_delta_is_before_output() -> None:
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    r = run(names.MESSAGES, [start(), ("error", err)])
    assert (r.outcome, r.failure_phase) == (names.ERROR, names.PHASE_BEFORE_OUTPUT)


def test_response_id_and_model_are_the_first_non_empty_values() -> None:
    second = {"type": "message_start", "message": {"id": "msg_2", "model": "claude-other", "usage": {}}}
    empty = {"type": "message_start", "message": {"id": "", "model": "", "usage": {}}}
    r = run(names.MESSAGES, [empty, start(), second, *body("end_turn")[1:]])
    assert (r.response_id, r.response_model) == ("msg_1", "claude-sonnet-4-5")


@pytest.mark.parametrize(
    "answer",
    [delta(), delta("input_json_delta", "partial_json", "{"), delta("citations_delta", "citation", {"url": "u"})],
)  # fmt: skip
def test_ttfo_after_thinking(answer: dict[str, Any]) -> None:
    thinking = delta("thinking_delta", "thinking", "hm")
    evs = [start(), BLOCK, thinking, thinking, delta("signature_delta", "signature", "s"), answer, thinking, BSTOP,
           mdelta("end_turn", output_tokens=3), STOP]  # fmt: skip
    r = run(names.MESSAGES, evs)
    assert r.deltas == 4 and r.first_output_event == 5
    assert (r.time_to_first_delta_ns, r.time_to_first_output_ns) == (3 * 2 * MS, 6 * 2 * MS)


def test_ttfo_none_when_only_thinking_came() -> None:
    r = run(names.MESSAGES, [start(), BLOCK, delta("thinking_delta", "thinking", "hm"), BSTOP,
                             mdelta("max_tokens", output_tokens=3), STOP])  # fmt: skip
    assert (r.outcome, r.deltas, r.time_to_first_output_ns) == (names.INCOMPLETE, 1, None)
