"""Hostile events straight into the core tracker: any shape, any type, any number, and it still gives one valid report.

The tracker runs on the caller's thread inside the SDK's generator, so an exception from it would break the
application's stream. These tests feed it what no well-behaved server sends (hypothesis-generated events with wrong
types in every field, NaN/inf usage, huge and negative sequence numbers, deep nesting, 100 000 events) and check the
invariants of docs/telemetry.md: nothing raises, exactly one report per stream, an outcome from the closed set, bounded
memory.
"""

from __future__ import annotations

import math
import time
import tracemalloc
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelstream import names
from otelstream.core.protocols.responses import KNOWN_TYPES
from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.tracker import END_REASONS, StreamTracker
from tests.reliability.harness import FIGURES, INT64_MAX, assert_valid_report, scaled

MESSAGES_TYPES = ("message_start", "content_block_start", "content_block_delta", "content_block_stop",
                  "message_delta", "message_stop", "ping", "error")  # fmt: skip
FIELD_NAMES = ("type", "sequence_number", "delta", "response", "code", "error", "id", "model", "object",
               "choices", "usage", "message", "index", "content_block", "item_id", "output_index", "text",
               "stream_id")  # fmt: skip

huge_ints = st.sampled_from([2**63, 2**64 + 1, -(2**63), 10**300, -(10**300), 10**4000, -1, -(10**4000)])
numbers = st.one_of(
    st.integers(),
    huge_ints,
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324]),
)
type_names = st.sampled_from(sorted(KNOWN_TYPES) + list(MESSAGES_TYPES) + ["response.future.delta", ""])
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=40), type_names, st.binary(max_size=8))
hostile: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), inner, max_size=6),
    ),
    max_leaves=20,
)


def _usage(sample: Any) -> dict[str, Any]:
    keys = ("input_tokens", "output_tokens", "prompt_tokens", "completion_tokens", "cache_read_input_tokens",
            "cache_creation_input_tokens", "input_tokens_details", "output_tokens_details", "prompt_tokens_details",
            "completion_tokens_details", "total_tokens")  # fmt: skip
    return st.fixed_dictionaries({}, optional=dict.fromkeys(keys, sample))  # type: ignore[return-value]


# Realistic shapes per surface, with every field free to take any hostile value instead.
def _value(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(valid, hostile)


usage_values = _usage(_value(numbers))
responses_events = st.fixed_dictionaries(
    {},
    optional={
        "type": _value(type_names),
        "sequence_number": _value(st.integers(min_value=-3, max_value=40)),
        "delta": _value(st.text(max_size=10)),
        "code": hostile,
        "error": hostile,
        "response": _value(
            st.fixed_dictionaries(
                {},
                optional={
                    "id": hostile,
                    "model": hostile,
                    "usage": _value(usage_values),
                    "error": hostile,
                    "incomplete_details": _value(st.fixed_dictionaries({"reason": hostile})),
                },
            )
        ),
    },
)
chat_choice = st.fixed_dictionaries(
    {},
    optional={
        "index": _value(st.integers(min_value=-2, max_value=200)),
        "finish_reason": _value(st.sampled_from(["stop", "length", "content_filter", "tool_calls"])),
        "text": hostile,
        "delta": _value(
            st.fixed_dictionaries(
                {},
                optional={
                    "content": hostile,
                    "refusal": hostile,
                    "reasoning_content": hostile,
                    "tool_calls": _value(
                        st.lists(
                            st.fixed_dictionaries({"function": _value(st.fixed_dictionaries({"arguments": hostile}))}),
                            max_size=3,
                        )
                    ),
                },
            )
        ),
    },
)
chat_events = st.fixed_dictionaries(
    {},
    optional={
        "id": hostile,
        "model": hostile,
        "object": _value(st.sampled_from(["chat.completion.chunk", "text_completion"])),
        "choices": _value(st.lists(chat_choice, max_size=4)),
        "usage": _value(usage_values),
        "error": hostile,
        "type": hostile,
    },
)
messages_events = st.fixed_dictionaries(
    {},
    optional={
        "type": _value(st.sampled_from(MESSAGES_TYPES)),
        "message": _value(st.fixed_dictionaries({}, optional={"id": hostile, "model": hostile, "usage": usage_values})),
        "delta": _value(
            st.fixed_dictionaries(
                {},
                optional={
                    "type": _value(
                        st.sampled_from(
                            ["text_delta", "thinking_delta", "input_json_delta", "citations_delta", "signature_delta"]
                        )
                    ),
                    "text": hostile,
                    "thinking": hostile,
                    "partial_json": hostile,
                    "citation": hostile,
                    "stop_reason": _value(st.sampled_from(["end_turn", "max_tokens", "refusal", "tool_use"])),
                },
            )
        ),
        "usage": _value(usage_values),
        "error": hostile,
    },
)
gemini_part = st.fixed_dictionaries(
    {}, optional={"text": hostile, "thought": hostile, "thoughtSignature": hostile, "functionCall": hostile}
)
gemini_events = st.fixed_dictionaries(
    {},
    optional={
        "candidates": _value(
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "index": _value(st.integers(min_value=-2, max_value=200)),
                        "finishReason": _value(st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", "OTHER"])),
                        "content": _value(st.fixed_dictionaries({}, optional={"parts": _value(st.lists(gemini_part))})),
                    },
                ),
                max_size=3,
            )
        ),
        "usageMetadata": _value(
            st.fixed_dictionaries(
                {},
                optional={"promptTokenCount": hostile, "candidatesTokenCount": hostile, "thoughtsTokenCount": hostile},
            )
        ),
        "promptFeedback": _value(st.fixed_dictionaries({}, optional={"blockReason": hostile})),
        "modelVersion": hostile,
        "responseId": hostile,
        "error": hostile,
    },
)
converse_events = st.one_of(
    st.fixed_dictionaries({"contentBlockDelta": _value(st.fixed_dictionaries({}, optional={"delta": _value(
        st.fixed_dictionaries({}, optional={"text": hostile, "toolUse": hostile, "reasoningContent": hostile,
                                            "citation": hostile}))}))}),
    st.fixed_dictionaries({"messageStop": _value(st.fixed_dictionaries({}, optional={"stopReason": _value(
        st.sampled_from(["end_turn", "max_tokens", "malformed_tool_use", "x"]))}))}),
    st.fixed_dictionaries({"metadata": _value(st.fixed_dictionaries({}, optional={"usage": _value(
        st.fixed_dictionaries({}, optional={"inputTokens": hostile, "outputTokens": hostile,
                                            "cacheReadInputTokens": hostile}))}))}),
    st.fixed_dictionaries({"throttlingException": hostile}),
    st.fixed_dictionaries({"chunk": hostile}),
    st.dictionaries(st.text(max_size=20), hostile, max_size=2),
)  # fmt: skip
EVENTS_BY_SURFACE = {
    names.RESPONSES: responses_events,
    names.RESPONSES_WEBSOCKET: responses_events,
    names.CHAT_COMPLETIONS: chat_events,
    names.COMPLETIONS: chat_events,
    names.MESSAGES: messages_events,
    names.GENERATE_CONTENT: gemini_events,
    names.CONVERSE: converse_events,
}


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        self.now += 1_000_003
        return self.now


def _wrap(ev: Any, as_object: bool) -> Any:
    """SDK events reach the tracker as pydantic objects (their ``__dict__``) or, with cast_to=object, as dicts."""
    if as_object and type(ev) is dict:
        ns = SimpleNamespace(**{k: v for k, v in ev.items() if isinstance(k, str) and k.isidentifier()})
        ns.__dict__["__pydantic_extra__"] = ev.get("extra", ev)
        return ns
    return ev


def _run(surface: str, events: list[Any], names_: list[str | None], how: str, *, as_object: bool,
         kwargs: dict[str, Any] | None = None) -> StreamReport:  # fmt: skip
    clock = _Clock()
    t = StreamTracker(StreamStart(surface=surface, request_model="m"), clock=clock, **(kwargs or {}))
    keepalive_kinds = 0
    for ev, name in zip(events, names_, strict=True):
        t.t_pull = clock()
        before = t.keepalives
        t.event(_wrap(ev, as_object), name)
        keepalive_kinds += t.keepalives - before
        if name == "[DONE]":
            t.done_sentinel()
    report = t.end(how, error_type="x" * 500)
    assert report is not None
    FIGURES["core: hostile streams fed to the tracker"] += 1
    FIGURES["core: hostile events fed to the tracker"] += len(events)
    # exactly one report: a second end and any later event change nothing
    assert t.end("eof") is None and t.end(how) is None
    t.event({"type": "response.output_text.delta", "delta": "late"}, None)
    assert t.events == report.events
    assert report.events + keepalive_kinds == len(events)
    return report


@settings(
    max_examples=scaled(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    surface=st.sampled_from(names.SURFACES),
    data=st.data(),
    how=st.sampled_from(END_REASONS),
    as_object=st.booleans(),
    starting_after=st.one_of(st.none(), st.integers(min_value=-5, max_value=10**20)),
    expected_choices=st.one_of(st.none(), st.integers(min_value=-1, max_value=300)),
)
def test_any_event_sequence_gives_one_valid_report(
    surface: str, data: st.DataObject, how: str, as_object: bool, starting_after: int | None,
    expected_choices: int | None,
) -> None:  # fmt: skip
    events = data.draw(st.lists(st.one_of(EVENTS_BY_SURFACE[surface], hostile), max_size=30), label="events")
    sse_names = data.draw(st.lists(st.one_of(st.none(), type_names, st.just("ping")), min_size=len(events),
                                   max_size=len(events)), label="sse names")  # fmt: skip
    report = _run(surface, events, sse_names, how, as_object=as_object,
                  kwargs={"starting_after": starting_after, "expected_choices": expected_choices})  # fmt: skip
    assert_valid_report(report)


@pytest.mark.parametrize("surface", names.SURFACES)
@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        -1,
        2**63,
        10**4000,
        -(10**4000),
        math.nan,
        math.inf,
        -math.inf,
        1.5,
        "12",
        "",
        "x" * 100_000,
        [],
        [1, 2],
        {},
        {"a": {"b": []}},
        b"bytes",
        object(),
    ],
    ids=lambda v: type(v).__name__ + (repr(v)[:12] if not isinstance(v, str | bytes) else str(len(v))),
)
def test_wrong_type_in_every_field(surface: str, value: Any) -> None:
    """A complete, well-formed stream of each surface, with each field in turn replaced by a hostile value."""
    base = _valid_stream(surface)
    for i, ev in enumerate(base):
        for path in _paths(ev):
            events = [_replace(e, path, value) if j == i else e for j, e in enumerate(base)]
            report = _run(surface, events, [None] * len(events), "eof", as_object=False)
            assert_valid_report(report)


def _valid_stream(surface: str) -> list[dict[str, Any]]:
    usage_r = {"input_tokens": 5, "output_tokens": 2, "input_tokens_details": {"cached_tokens": 1},
               "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    if surface in (names.RESPONSES, names.RESPONSES_WEBSOCKET):
        return [
            {"type": "response.created", "sequence_number": 0, "response": {"id": "r", "model": "m"}},
            {"type": "response.output_text.delta", "sequence_number": 1, "delta": "hi"},
            {"type": "response.completed", "sequence_number": 2, "response": {"id": "r", "model": "m",
                                                                              "usage": usage_r}},
        ]  # fmt: skip
    if surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS):
        key = {"delta": {"content": "hi", "tool_calls": [{"function": {"arguments": "{}"}}]}} \
            if surface == names.CHAT_COMPLETIONS else {"text": "hi"}  # fmt: skip
        return [
            {"id": "c", "model": "m", "choices": [{"index": 0, **key, "finish_reason": None}], "usage": None},
            {"id": "c", "model": "m", "choices": [{"index": 0, "finish_reason": "stop"}], "usage": None},
            {"id": "c", "model": "m", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                                                               "prompt_tokens_details": {"cached_tokens": 0}}},
        ]  # fmt: skip
    return [
        {"type": "message_start", "message": {"id": "msg", "model": "c", "usage": {"input_tokens": 3,
                                                                                   "output_tokens": 1}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2,
                                                                                  "cache_read_input_tokens": 1}},
        {"type": "message_stop"},
    ]  # fmt: skip


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append((*prefix, i))
            out.extend(_paths(v, (*prefix, i)))
    return out


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    if isinstance(obj, dict):
        return {k: (_replace(v, path[1:], value) if k == path[0] else v) for k, v in obj.items()}
    return [(_replace(v, path[1:], value) if i == path[0] else v) for i, v in enumerate(obj)]


@pytest.mark.parametrize(
    "seqs",
    [
        [0, 2**63, 2**63 + 1, 0, -1],
        [-1, -(2**63), -5, 10**300, 10**300, 10**300 - 1],
        [10**4000, 0, 10**4000 + 1],
        [0, 1, 1, 1, 3, 2, 2**64, 2**64 - 63, 2**64 - 64, 2**64 - 65],
        [5, 4, 3, 2, 1, 0, -1],
    ],
)
def test_huge_and_negative_sequence_numbers(seqs: list[int]) -> None:
    events = [{"type": "response.output_text.delta", "sequence_number": n, "delta": "x"} for n in seqs]
    report = _run(names.RESPONSES, events, [None] * len(events), "eof", as_object=False)
    assert_valid_report(report)
    assert report.outcome == names.CUT and report.events == len(seqs) == report.deltas


def test_nan_and_inf_usage_become_anomalies_not_numbers() -> None:
    for bad in (math.nan, math.inf, -math.inf, -1, -1.0, 1e300, "5", True):
        events = [
            {"type": "message_start", "message": {"id": "m", "model": "c", "usage": {"input_tokens": bad}}},
            {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": bad}},
            {"type": "message_stop"},
        ]
        report = _run(names.MESSAGES, events, [None] * 4, "eof", as_object=False)
        assert_valid_report(report)
        assert report.outcome == names.COMPLETED
        assert report.usage.input_tokens is None and report.usage.output_tokens is None, (bad, report.usage)
        assert dict(report.anomaly_counts).get(names.ANOM_BAD_FIELD, 0) >= 2


def test_token_counts_beyond_int64_are_rejected() -> None:
    """JSON integers are unbounded; a count that fits no metric or OTLP int64 must be an anomaly, not a value."""
    huge = 10**400
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": "r", "model": "m"}},
        {"type": "response.output_text.delta", "sequence_number": 1, "delta": "x"},
        {"type": "response.completed", "sequence_number": 2,
         "response": {"id": "r", "usage": {"input_tokens": huge, "output_tokens": 2**64}}},
    ]  # fmt: skip
    report = _run(names.RESPONSES, events, [None] * 3, "eof", as_object=False)
    for value in report.usage.to_json().values():
        assert value is None or value <= INT64_MAX, report.usage


def test_deeply_nested_event_is_harmless() -> None:
    nested: Any = "leaf"
    for _ in range(100_000):
        nested = {"response": nested, "delta": [nested] if isinstance(nested, str) else None}
    events = [
        {"type": "response.created", "sequence_number": 0, "response": nested},
        {"type": "response.output_text.delta", "sequence_number": 1, "delta": nested},
        {"type": "response.completed", "sequence_number": 2, "response": {"usage": nested, "error": nested}},
    ]
    for surface in names.SURFACES:
        report = _run(surface, [*events, nested, {"choices": [nested] * 3, "usage": nested}],
                      [None] * 5, "eof", as_object=False)  # fmt: skip
        assert_valid_report(report)


@pytest.mark.slow
@pytest.mark.parametrize("surface", [names.RESPONSES, names.CHAT_COMPLETIONS, names.MESSAGES])
def test_100k_events_constant_memory(surface: str) -> None:
    """100 000 tiny events (every one also an anomaly) keep the tracker's memory flat: O(1) per event."""
    n = scaled(100_000)
    if surface == names.RESPONSES:
        make = lambda i: {"type": "response.output_text.delta", "sequence_number": i * 2, "delta": "x"}  # noqa: E731
    elif surface == names.CHAT_COMPLETIONS:
        make = lambda i: {"id": "c", "choices": [{"index": i % 300, "delta": {"content": "x"}}]}  # noqa: E731
    else:
        make = lambda i: {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}, "x": i}  # noqa: E731
    clock = _Clock()
    t = StreamTracker(StreamStart(surface=surface), clock=clock)
    tracemalloc.start()
    try:
        for i in range(1000):  # warm up: the capped structures fill
            t.t_pull = clock()
            t.event(make(i), None)
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        t0 = time.perf_counter()
        for i in range(1000, n):
            t.t_pull = clock()
            t.event(make(i), None)
        elapsed = time.perf_counter() - t0
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    report = t.end("eof")
    assert report is not None
    assert_valid_report(report)
    assert report.events == n
    assert current - base < 16 * 1024, f"tracker grew by {current - base} bytes over {n} events"
    assert peak - base < 64 * 1024
    assert elapsed < 60
