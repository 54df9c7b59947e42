"""The tracker's flat path (events carrying a plain delta) must agree exactly with its general path.

The same generated events go to three trackers: as decoded JSON (plain dicts, what offline replay passes), as the
SDKs' own models (built with their ``construct_type``, as the SDKs build them from the wire; the SSE and WebSocket
adapters pass these), each taking the flat path wherever it can, and as plain dicts to a
tracker whose flat path is off (only the general path classifies). Every field of the three reports must be equal,
whatever the mix of plain deltas, near-misses (empty or non-string text, a finish reason, usage, a second choice, a
sequence number out of order, another delta type) and gaps on either side of every time-per-chunk bound."""

from __future__ import annotations

import copy
import os
from typing import Any

import anthropic._models as am
import openai._models as om
import pytest
from anthropic.types import RawMessageStreamEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types import Completion
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent

from otelstream import names
from otelstream.core import tracker as tr
from otelstream.core.chunk_time import CHUNK_BOUNDS_NS
from otelstream.core.report import StreamStart

SETTINGS = settings(
    max_examples=int(os.environ.get("OTELSTREAM_HYPOTHESIS_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
MS = 1_000_000
BOUNDS = CHUNK_BOUNDS_NS
gaps = st.one_of(
    st.sampled_from([0, 1, *BOUNDS, *(b + 1 for b in BOUNDS), *(b - 1 for b in BOUNDS), 2**64 - 1, 2**64, 2**70]),
    st.integers(min_value=0, max_value=200 * 10**9),
)
texts = st.one_of(st.sampled_from(["Hi", " there", ""]), st.none(), st.integers(0, 3))


def _chat(kind: str, text: Any, legacy: bool = False) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": None, "logprobs": None}
    if legacy:
        choice["text"] = text
    else:
        choice["delta"] = {"content": text}
    chunk: dict[str, Any] = {"id": "c", "object": "text_completion" if legacy else "chat.completion.chunk",
                             "created": 0, "model": "m", "choices": [choice]}  # fmt: skip
    if kind == "finish":
        choice["finish_reason"] = "stop"
    elif kind == "usage":
        chunk["usage"] = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    elif kind == "second_choice":
        choice["index"] = 1
    elif kind == "no_choices":
        chunk["choices"] = []
    elif kind == "reasoning":  # a vendor field (DeepSeek, vLLM): an extra of the SDK's model
        choice["delta"] = {"reasoning_content": text}
    return chunk


def _responses(kind: str, text: Any, seq: int) -> dict[str, Any]:
    ev: dict[str, Any] = {"type": "response.output_text.delta", "item_id": "m", "output_index": 0,
                          "content_index": 0, "delta": text, "logprobs": [], "sequence_number": seq}  # fmt: skip
    if kind == "other_delta":
        ev["type"] = "response.function_call_arguments.delta"
    elif kind == "done":
        ev = {"type": "response.output_text.done", "item_id": "m", "output_index": 0, "content_index": 0,
              "text": "x", "logprobs": [], "sequence_number": seq}  # fmt: skip
    elif kind == "out_of_order":
        ev["sequence_number"] = seq + 3
    elif kind == "reasoning":
        ev = {"type": "response.reasoning_summary_text.delta", "item_id": "r", "output_index": 0, "summary_index": 0,
              "delta": text, "sequence_number": seq}  # fmt: skip
    return ev


def _messages(kind: str, text: Any) -> dict[str, Any]:
    if kind == "stop":
        return {"type": "content_block_stop", "index": 0}
    if kind == "message_delta":
        return {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}
    delta = {"type": "text_delta", "text": text}
    if kind == "thinking":
        delta = {"type": "thinking_delta", "thinking": text}
    return {"type": "content_block_delta", "index": 0, "delta": delta}


def _start(surface: str) -> list[dict[str, Any]]:
    if surface == names.MESSAGES:
        return [{"type": "message_start", "message": {"id": "msg", "type": "message", "role": "assistant",
                 "model": "m", "content": [], "usage": {"input_tokens": 3, "output_tokens": 0}}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]  # fmt: skip
    if surface == names.RESPONSES:
        return [{"type": "response.created", "sequence_number": 0,
                 "response": {"id": "r", "object": "response", "created_at": 0, "model": "m", "output": [],
                              "status": "in_progress", "parallel_tool_calls": True, "tool_choice": "auto",
                              "tools": []}}]  # fmt: skip
    return [_chat("plain", "", legacy=surface == names.COMPLETIONS)]


def _model(surface: str, d: dict[str, Any]) -> Any:
    if surface == names.MESSAGES:
        return am.construct_type(type_=RawMessageStreamEvent, value=d)
    if surface == names.RESPONSES:
        return om.construct_type(type_=ResponseStreamEvent, value=d)
    if surface == names.COMPLETIONS:
        return om.construct_type(type_=Completion, value=d)
    return om.construct_type(type_=ChatCompletionChunk, value=d)


KINDS = {
    # (no in-band ``error`` chunk: the SDK raises on it before building a model, and under pydantic 2 a model keeps
    # unknown keys outside ``__dict__``)
    names.CHAT_COMPLETIONS: ["plain", "plain", "plain", "finish", "usage", "second_choice", "no_choices",
                             "reasoning"],
    names.COMPLETIONS: ["plain", "plain", "plain", "finish", "usage", "second_choice", "no_choices"],
    names.RESPONSES: ["plain", "plain", "plain", "other_delta", "done", "out_of_order", "reasoning", "reasoning"],
    names.MESSAGES: ["plain", "plain", "plain", "thinking", "stop", "message_delta"],
}


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, list[tuple[int, int, dict[str, Any]]]]:
    surface = draw(st.sampled_from(sorted(KINDS)))
    items = []
    seq = len(_start(surface))
    for d in _start(surface):
        items.append((MS, MS, d))
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(KINDS[surface]))
        text = draw(texts) if draw(st.booleans()) else "tok"
        if surface == names.MESSAGES:
            d = _messages(kind, text)
        elif surface == names.RESPONSES:
            d = _responses(kind, text, seq)
            seq += 1
        else:
            d = _chat(kind, text, legacy=surface == names.COMPLETIONS)
        items.append((draw(gaps), draw(st.integers(0, 5 * MS)), d))
    return surface, items


def _run(surface: str, items: list[tuple[int, int, dict[str, Any]]], feed: str) -> Any:
    now = [10**12]
    t = tr.StreamTracker(StreamStart(surface=surface, t_request_ns=now[0]), clock=lambda: now[0])
    if feed == "general only":
        t._fast_code = 0
    for wait, consumer, d in items:
        now[0] += consumer
        t.t_pull = now[0]
        now[0] += wait
        if feed == "plain_delta" and t.takes_plain(d):
            # the HTTP-level observer: a plain delta recognised on its bytes, which name its choice
            choices = d.get("choices")
            assert t.plain_delta(choices[0]["index"] if choices else t.last_choice)
            continue
        t.event(_model(surface, d) if feed == "models" else copy.deepcopy(d), d.get("type"))
    return t.end("eof")


@SETTINGS
@given(streams())
def test_flat_path_reports_equal_general_path(stream: tuple[str, list[tuple[int, int, dict[str, Any]]]]) -> None:
    surface, items = stream
    reference = _run(surface, items, "general only")
    assert _run(surface, items, "json") == reference
    assert _run(surface, items, "models") == reference
    assert _run(surface, items, "plain_delta") == reference


def test_plain_delta_is_refused_where_the_flat_path_would_not_take_the_event() -> None:
    """``plain_delta`` records nothing when the stream is not steady, for another choice, or on Responses (whose
    sequence numbers must be read): the caller decodes the event instead."""
    for surface in sorted(KINDS):
        t = tr.StreamTracker(StreamStart(surface=surface, t_request_ns=1), clock=lambda: 2)
        assert not t.plain_delta(0) and not t.plain_delta(None)  # nothing seen yet
        seq = len(_start(surface))
        plain = (_responses("plain", "a", seq) if surface == names.RESPONSES else
                 _messages("plain", "a") if surface == names.MESSAGES else
                 _chat("plain", "a", legacy=surface == names.COMPLETIONS))  # fmt: skip
        for d in [*_start(surface), plain]:
            t.event(d)
        assert t.deltas == 1
        if surface == names.RESPONSES:
            assert not t.plain_delta(t.last_choice) and not t.takes_plain(_responses("plain", "b", seq + 1))
            continue
        assert t.takes_plain(plain) and not t.takes_plain(_chat("finish", "a") if surface != names.MESSAGES else
                                                          _messages("thinking", "a"))  # fmt: skip
        assert not t.plain_delta(7)  # a choice other than the one seen last
        assert t.plain_delta(t.last_choice) and t.deltas == 2
        t.end("eof")
        assert not t.plain_delta(t.last_choice) and t.deltas == 2


@pytest.mark.parametrize("surface", sorted(KINDS))
@pytest.mark.parametrize("as_models", [True, False])
def test_flat_path_is_taken_for_plain_deltas(surface: str, as_models: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the test above against comparing the general path with itself."""
    t = tr.StreamTracker(StreamStart(surface=surface, t_request_ns=1), clock=lambda: 2)
    seq = len(_start(surface))
    plain = (_responses("plain", "a", seq) if surface == names.RESPONSES else
             _messages("plain", "a") if surface == names.MESSAGES else
             _chat("plain", "a", legacy=surface == names.COMPLETIONS))  # fmt: skip
    for d in [*_start(surface), plain]:
        t.event(_model(surface, d) if as_models else d)
    assert t._fast, surface
    monkeypatch.setattr(tr.StreamTracker, "_event", None)  # the next plain delta must not need the general path
    t.event(_model(surface, _responses("plain", "b", seq + 1)) if as_models and surface == names.RESPONSES else
            _responses("plain", "b", seq + 1) if surface == names.RESPONSES else
            _model(surface, plain) if as_models else plain)  # fmt: skip
    assert t.deltas == 2


def test_at_most_one_bound_per_power_of_two() -> None:
    """The premise of the flat path's bucket placement (one comparison after a table lookup)."""
    for k in range(1, 65):
        assert sum(1 << (k - 1) <= b < 1 << k for b in BOUNDS) <= 1, k


@pytest.mark.parametrize("as_models", [True, False])
def test_responses_flat_path_takes_reasoning_before_the_first_output(as_models: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A reasoning model thinks for many deltas before it answers: those take the flat path too, and the first
    output delta leaves it (only the general path records TTFO), so TTFO costs the flat path nothing."""
    t = tr.StreamTracker(StreamStart(surface=names.RESPONSES, t_request_ns=1), clock=lambda: 2)
    feed = (lambda d: t.event(_model(names.RESPONSES, d))) if as_models else t.event
    for d in [*_start(names.RESPONSES), _responses("reasoning", "hm", 1)]:
        feed(d)
    assert t._fast
    general = tr.StreamTracker._event
    calls: list[int] = []
    monkeypatch.setattr(tr.StreamTracker, "_event", lambda *a: calls.append(1) or general(*a))
    feed(_responses("reasoning", "hm", 2))
    assert calls == []  # the flat path took it
    feed(_responses("plain", "42", 3))
    assert calls == [1] and t.t_first_output == 2  # the general path recorded the first output
    feed(_responses("plain", "!", 4))
    assert calls == [1] and t.deltas == 4  # and from then on the flat path takes the output
