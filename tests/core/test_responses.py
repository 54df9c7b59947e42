"""OpenAI Responses (SSE and WebSocket events): outcomes, precedence, sequence checks, resume, gateway quirks."""

from __future__ import annotations

from typing import Any

import pytest

from otelstream import names
from tests.core.harness import MS, counts, run

USAGE = {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 4},
         "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 2}}  # fmt: skip


def ev(typ: str, seq: int | None, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"type": typ, **kw}
    if seq is not None:
        d["sequence_number"] = seq
    return d


def delta(seq: int | None, text: str = "x", typ: str = "response.output_text.delta") -> dict[str, Any]:
    return ev(typ, seq, delta=text)


def response(status: str, **kw: Any) -> dict[str, Any]:
    return {"id": "resp_abc", "model": "gpt-4o-2024-08-06", "status": status, **kw}


def stream(terminal: dict[str, Any] | None, n_deltas: int = 2) -> list[dict[str, Any]]:
    evs = [ev("response.created", 0, response=response("in_progress"))]
    evs += [delta(i + 1) for i in range(n_deltas)]
    if terminal is not None:
        terminal = {**terminal, "sequence_number": n_deltas + 1}
        evs.append(terminal)
    return evs


COMPLETED = ev("response.completed", None, response=response("completed", usage=USAGE))
INCOMPLETE = ev("response.incomplete", None, response=response("incomplete",
                incomplete_details={"reason": "max_output_tokens"}))  # fmt: skip
FAILED = ev("response.failed", None, response=response("failed", error={"code": "server_error", "message": "m"}))
ERROR = ev("error", None, code="rate_limit_exceeded", message="m", param=None)


@pytest.mark.parametrize(
    ("terminal", "outcome", "finish", "error_type", "error_class"),
    [
        (COMPLETED, names.COMPLETED, ("stop",), None, None),
        (INCOMPLETE, names.INCOMPLETE, ("max_output_tokens",), None, None),
        (FAILED, names.FAILED, ("error",), "server_error", names.EC_SERVER_ERROR),
        (ERROR, names.ERROR, (), "rate_limit_exceeded", names.EC_RATE_LIMITED),
        (None, names.CUT, (), None, names.EC_CUT),
    ],
)
def test_outcomes(terminal: dict[str, Any] | None, outcome: str, finish: tuple[str, ...], error_type: str | None,
                  error_class: str | None) -> None:  # fmt: skip
    r = run(names.RESPONSES, stream(terminal))
    assert r.outcome == outcome
    assert r.finish_reasons == finish
    assert (r.error_type, r.error_class) == (error_type, error_class)
    assert r.events == len(stream(terminal)) and r.deltas == 2
    assert r.response_id == "resp_abc" and r.response_model == "gpt-4o-2024-08-06"
    assert r.sequence.first == 0 and not r.anomalies


def test_usage_fields() -> None:
    r = run(names.RESPONSES, stream(COMPLETED))
    assert r.usage.to_json() == {"input_tokens": 30, "output_tokens": 7, "cache_read_input_tokens": 10,
                                 "cache_write_input_tokens": 4, "reasoning_output_tokens": 2}  # fmt: skip


def test_usage_none_when_absent() -> None:
    r = run(names.RESPONSES, stream(None))
    assert r.usage.to_json() == dict.fromkeys(r.usage.to_json())


def test_precedence_error_then_failed_is_error_without_after_terminal() -> None:
    """OpenAI sends `error` then `response.failed` (the insufficient_quota recording): error wins, and the pair is
    the protocol, not an event after the end."""
    evs = [ev("response.created", 0), ev("error", 1, code="insufficient_quota", message="m"),
           {**FAILED, "sequence_number": 2}]  # fmt: skip
    r = run(names.RESPONSES, evs)
    assert r.outcome == names.ERROR and r.error_type == "insufficient_quota"
    assert names.ANOM_EVENT_AFTER_TERMINAL not in counts(r)


@pytest.mark.parametrize(
    ("first", "second", "outcome"),
    [
        (INCOMPLETE, COMPLETED, names.INCOMPLETE),
        (COMPLETED, INCOMPLETE, names.INCOMPLETE),
        (COMPLETED, FAILED, names.FAILED),
        (FAILED, COMPLETED, names.FAILED),
        (COMPLETED, ERROR, names.ERROR),
    ],
)
def test_precedence_over_everything_seen(first: dict[str, Any], second: dict[str, Any], outcome: str) -> None:
    evs = [ev("response.created", 0), {**first, "sequence_number": 1}, {**second, "sequence_number": 2}]
    r = run(names.RESPONSES, evs)
    assert r.outcome == outcome


def test_events_after_terminal_flagged() -> None:
    evs = [*stream(COMPLETED), delta(4), ev("response.output_text.done", 5)]
    r = run(names.RESPONSES, evs)
    assert r.outcome == names.COMPLETED
    assert counts(r)[names.ANOM_EVENT_AFTER_TERMINAL] == 2


def test_every_delta_type_counts_and_empty_delta_does_not() -> None:
    kinds = ["response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta",
             "response.reasoning_text.delta", "response.reasoning_summary_text.delta", "response.audio.delta",
             "response.audio.transcript.delta", "response.custom_tool_call_input.delta",
             "response.mcp_call_arguments.delta", "response.code_interpreter_call_code.delta"]  # fmt: skip
    evs = [delta(i, "x", k) for i, k in enumerate(kinds)] + [delta(len(kinds), "")]
    r = run(names.RESPONSES, evs)
    assert r.deltas == len(kinds) and r.events == len(kinds) + 1


def test_unknown_types_counted_never_fatal() -> None:
    evs = [ev("response.created", 0), ev("response.future_thing", 1), delta(2, "y", "response.future.delta"),
           {**COMPLETED, "sequence_number": 3}]  # fmt: skip
    r = run(names.RESPONSES, evs)
    assert r.outcome == names.COMPLETED
    assert counts(r)[names.ANOM_UNKNOWN_EVENT] == 2
    assert r.deltas == 1  # an unknown `*.delta` with a non-empty delta is still output


def test_ping_is_keepalive() -> None:
    r = run(names.RESPONSES, [("ping", {"type": "ping"}), *stream(COMPLETED)])
    assert r.keepalives == 1 and r.events == 4


# --- sequence numbers --------------------------------------------------------------------------------------------
def seq_stream(numbers: list[int]) -> list[dict[str, Any]]:
    return [delta(n) for n in numbers]


@pytest.mark.parametrize(
    ("numbers", "gaps", "skipped", "dups", "ooo", "bad_start"),
    [
        ([0, 1, 2, 3], 0, 0, 0, 0, False),
        ([0, 1, 3, 4], 1, 1, 0, 0, False),
        ([0, 4, 5, 9], 2, 6, 0, 0, False),
        ([0, 1, 1, 2], 0, 0, 1, 0, False),
        ([0, 2, 1, 3], 1, 1, 0, 1, False),
        ([0, 1, 2, 2, 2, 3], 0, 0, 2, 0, False),
        ([1, 2, 3], 0, 0, 0, 0, True),
        ([0, 100, 1], 1, 99, 0, 1, False),  # far back (outside the 64-number window) is out-of-order
    ],
)
def test_sequence(numbers: list[int], gaps: int, skipped: int, dups: int, ooo: int, bad_start: bool) -> None:
    r = run(names.RESPONSES, seq_stream(numbers))
    s = r.sequence
    assert (s.gaps, s.skipped, s.duplicates, s.out_of_order, s.bad_start) == (gaps, skipped, dups, ooo, bad_start)
    assert s.first == numbers[0] and s.last == numbers[-1]
    c = counts(r)
    assert c.get(names.ANOM_SEQUENCE_GAP, 0) == gaps
    assert c.get(names.ANOM_SEQUENCE_DUPLICATE, 0) == dups
    assert c.get(names.ANOM_SEQUENCE_OUT_OF_ORDER, 0) == ooo
    assert c.get(names.ANOM_SEQUENCE_BAD_START, 0) == int(bad_start)
    if gaps:
        first_gap = next(a for a in r.anomalies if a.kind == names.ANOM_SEQUENCE_GAP)
        assert first_gap.detail.startswith("expected ")


def test_sequence_gap_detail_and_index() -> None:
    r = run(names.RESPONSES, seq_stream([0, 1, 2, 3, 4, 7]))
    gap = r.anomalies[0]
    assert gap.kind == names.ANOM_SEQUENCE_GAP and gap.detail == "expected 5, got 7" and gap.event_index == 5


def test_sequence_missing_counted_once() -> None:
    r = run(names.RESPONSES, [delta(None), delta(None), ev("response.completed", None, response=None)])
    assert r.sequence.missing and r.sequence.first is None
    assert counts(r)[names.ANOM_SEQUENCE_MISSING] == 1
    assert r.sequence.counts_by_kind()[names.SEQ_MISSING] == 1


def test_sequence_wrong_type_is_bad_field() -> None:
    r = run(names.RESPONSES, [delta(0), {**delta(1), "sequence_number": "2"}])
    assert counts(r)[names.ANOM_BAD_FIELD] == 1


def test_sequence_window_memory_is_bounded() -> None:
    r = run(names.RESPONSES, seq_stream(list(range(0, 20_000, 3))))
    assert r.sequence.gaps == len(range(0, 20_000, 3)) - 1
    assert len(r.anomalies) == names.MAX_REPORTED_ANOMALIES


# --- resume ------------------------------------------------------------------------------------------------------
def test_server_side_resume_starting_after() -> None:
    """GET /responses/{id}?starting_after=5: the server sends 6 onward; that is the right start, not a bad one."""
    r = run(names.RESPONSES, [delta(6), delta(7), {**COMPLETED, "sequence_number": 8}], starting_after=5)
    assert r.outcome == names.COMPLETED and r.resumed
    assert not r.sequence.bad_start and r.sequence.first == 6 and not r.anomalies
    assert r.time_to_first_delta_ns is not None


def test_server_side_resume_wrong_start_is_bad_start() -> None:
    r = run(names.RESPONSES, [delta(3), delta(4)], starting_after=5)
    assert r.sequence.bad_start and counts(r)[names.ANOM_SEQUENCE_BAD_START] == 1


def test_client_side_filter_first_delta_after_n() -> None:
    """The .stream(response_id=…, starting_after=N) helper replays from 0 and hides ≤ N: TTFD counts after N."""
    evs = [ev("response.created", 0), delta(1), delta(2), delta(3), delta(4), {**COMPLETED, "sequence_number": 5}]
    r = run(names.RESPONSES, evs, client_filter_after=2)
    assert r.resumed and r.deltas == 2 and not r.sequence.bad_start
    # 1 ms wait + 1 ms advance per event (harness.run): the first counted delta is the 4th event (seq 3)
    assert r.time_to_first_delta_ns == 8_000_000


# --- gateways ------------------------------------------------------------------------------------------------
def test_untyped_lifecycle_classified_by_sse_name_and_trailing_done() -> None:
    evs: list[Any] = [
        ("response.created", {"sequence_number": 0, "response": response("in_progress")}),
        ("response.output_text.delta", delta(1)),
        ("response.completed", {"sequence_number": 2, "response": response("completed", usage=USAGE)}),
        "[DONE]",
    ]
    r = run(names.RESPONSES, evs)
    assert r.outcome == names.COMPLETED and r.done_sentinel
    assert counts(r) == {names.ANOM_UNTYPED_EVENT: 2, names.ANOM_TRAILING_DONE: 1}
    assert r.usage.output_tokens == 7


def test_gateway_untyped_lifecycle_is_the_response_object() -> None:
    """The OpenResponses gateway's untyped lifecycle events carry the Response object itself, not under `response`."""
    created = {"id": "resp_01", "object": "response", "model": "gpt-4o", "status": "queued", "sequence_number": 0}
    done = {"id": "resp_01", "model": "gpt-4o", "status": "completed", "usage": USAGE, "sequence_number": 2}
    r = run(names.RESPONSES, [("response.created", created), delta(1), ("response.completed", done), "[DONE]"])
    assert r.outcome == names.COMPLETED and r.response_id == "resp_01" and r.response_model == "gpt-4o"
    assert r.usage.output_tokens == 7


def test_gateway_untyped_failed_with_top_level_error_is_an_inband_error() -> None:
    """Live, the SDK raises APIError on any event with a truthy `error`, whatever its `event:` name: `check` agrees."""
    failed = {"id": "resp_01", "status": "failed", "error": {"code": "server_error", "message": "m"},
              "sequence_number": 1}  # fmt: skip
    created = {"id": "resp_01", "sequence_number": 0}
    r = run(names.RESPONSES, [("response.created", created), ("response.failed", failed)])
    assert r.outcome == names.ERROR and r.error_type == "server_error"


def test_gateway_error_object() -> None:
    r = run(names.RESPONSES, [ev("response.created", 0), {"error": {"code": "server_error", "message": "m"}}])
    assert r.outcome == names.ERROR and r.error_type == "server_error"


def test_websocket_error_nests_code() -> None:
    err = {"type": "error", "error": {"type": "invalid_request_error", "code": "previous_response_not_found"},
           "status": 400, "stream_id": "a"}  # fmt: skip
    r = run(names.RESPONSES_WEBSOCKET, [err])
    assert r.outcome == names.ERROR and r.error_type == "previous_response_not_found"
    assert not r.sequence.missing  # the WebSocket error event may carry no sequence number


def test_an_empty_delta_after_the_terminal_event_is_no_anomaly() -> None:
    r = run(names.RESPONSES, [*stream(COMPLETED), delta(4, "")])
    assert r.outcome == names.COMPLETED and counts(r) == {}


@pytest.mark.parametrize(
    ("error", "klass"),
    [(ev("error", None, code="vendor_code", message="m"), names.EC_OTHER),
     (ev("error", None, code="rate_limit_exceeded", message="m"), names.EC_RATE_LIMITED),
     # WebSocket: nested code and type, the status beside them
     (ev("error", None, error={"type": "invalid_request_error", "code": "previous_response_not_found"}),
      names.EC_BAD_REQUEST),
     (ev("error", None, error={"type": "vendor", "code": "vendor_code"}, status=429), names.EC_RATE_LIMITED),
     (ev("response.failed", None, response=response("failed", error={"code": "vendor_code", "status": 503})),
      names.EC_OVERLOADED)],
)  # fmt: skip
def test_error_class_from_code_then_type_then_status(error: dict[str, Any], klass: str) -> None:
    r = run(names.RESPONSES_WEBSOCKET, stream(error))
    assert r.outcome in (names.ERROR, names.FAILED) and r.error_class == klass
    assert r.failure_phase == names.PHASE_DURING_OUTPUT


def test_bedrock_cache_write_tokens() -> None:
    usage = {"input_tokens": 30, "output_tokens": 2, "input_tokens_details": {"cache_write_tokens": 12}}
    r = run(names.RESPONSES, stream(ev("response.completed", None, response=response("completed", usage=usage))))
    assert (r.usage.cache_read_input_tokens, r.usage.cache_write_input_tokens) == (None, 12)


def test_response_id_and_model_are_the_first_non_empty_values() -> None:
    evs = [ev("response.created", 0, response={"id": "", "model": "", "status": "in_progress"}),
           ev("response.in_progress", 1, response=response("in_progress")), delta(2),
           ev("response.completed", 3, response={"id": "resp_other", "model": "gpt-other", "status": "completed"})]
    r = run(names.RESPONSES, evs)
    assert (r.response_id, r.response_model) == ("resp_abc", "gpt-4o-2024-08-06")


REASONING = ["response.reasoning_summary_text.delta", "response.reasoning_text.delta"]
OUTPUT = ["response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta",
          "response.audio.transcript.delta", "response.audio.delta", "response.mcp_call_arguments.delta"]  # fmt: skip


@pytest.mark.parametrize("thought", REASONING)
@pytest.mark.parametrize("answer", OUTPUT)
def test_ttfo_after_reasoning(thought: str, answer: str) -> None:
    """Ten reasoning deltas (the tracker's flat path takes them), then the answer: TTFO is the answer's."""
    evs = [ev("response.created", 0, response=response("in_progress"))]
    evs += [delta(i, "hm", thought) for i in range(1, 11)]
    evs += [delta(11, "42", answer), delta(12, "hm", thought), delta(13), {**COMPLETED, "sequence_number": 14}]
    r = run(names.RESPONSES, evs)
    assert r.deltas == 13 and r.first_output_event == 11
    assert (r.time_to_first_delta_ns, r.time_to_first_output_ns) == (2 * 2 * MS, 12 * 2 * MS)


def test_unknown_reasoning_delta_type_is_reasoning() -> None:
    evs = [delta(0, "hm", "response.reasoning_future.delta"), delta(1, "a", "response.future.delta")]
    r = run(names.RESPONSES, evs)
    assert (r.deltas, r.first_output_event) == (2, 1)


def test_ttfo_counts_after_the_client_side_filter() -> None:
    """On the helper's resume the replayed events up to N never reach the caller as deltas: nor as output."""
    evs = [ev("response.created", 0), delta(1), delta(2), delta(3)]
    r = run(names.RESPONSES, evs, client_filter_after=2)
    assert (r.deltas, r.first_output_event) == (1, 3)
