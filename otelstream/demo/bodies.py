"""The fake provider's response bodies, one builder per surface, shaped like the real captures in
``shared/captures``: ``build_events(spec)`` gives the events of one response with the fault's structural change
already applied (truncation, a skipped or repeated sequence number, an in-band error, a trailing ``[DONE]`` …), and
``resumed`` the part a background resume replays. Pure: a spec always gives the same events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.bedrock_bodies import converse_events
from otelstream.demo.events import (
    AFTER,
    DELTA,
    DONE,
    ERROR_EVENT,
    KEEPALIVE,
    META,
    TERMINAL,
    Event,
    StreamSpec,
    cut_at,
)
from otelstream.demo.gemini_bodies import gemini_events

CREATED_AT: Final = 1_750_000_000  # fixed so that a seed reproduces a body byte for byte
_ERROR_MESSAGE: Final = "The server had an error processing your request. Sorry about that!"


@dataclass(slots=True)
class _Seq:
    next: int = 0
    events: list[Event] = field(default_factory=list)

    def add(self, payload: dict[str, Any], kind: str = META, name: str | None = None) -> None:
        payload["sequence_number"] = self.next
        self.next += 1
        self.events.append(Event(payload, kind, name if name is not None else str(payload["type"])))


# --- OpenAI Responses (SSE and WebSocket) ----------------------------------------------------------


def _response_obj(spec: StreamSpec, status: str, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": spec.response_id,
        "object": "response",
        "created_at": CREATED_AT,
        "status": status,
        "background": spec.background,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": spec.model,
        "output": [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None,
        "metadata": {},
    }
    obj.update(extra)
    return obj


def _responses_usage(spec: StreamSpec, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": spec.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": spec.input_tokens + output_tokens,
    }


def _responses_events(spec: StreamSpec, websocket: bool) -> list[Event]:
    events = _responses_events_inner(spec, websocket)
    if websocket and spec.stream_id is not None:  # every event of a lane's response echoes its stream_id
        events = [replace(e, data={**e.data, "stream_id": spec.stream_id}) if isinstance(e.data, dict) else e
                  for e in events]  # fmt: skip
    return events


def _responses_events_inner(spec: StreamSpec, websocket: bool) -> list[Event]:
    fault = spec.fault
    item_id = "msg_" + spec.response_id.removeprefix("resp_")
    s = _Seq()
    s.add({"type": "response.created", "response": _response_obj(spec, "queued" if spec.background else "in_progress")})
    if spec.background:
        s.add({"type": "response.queued", "response": _response_obj(spec, "queued")})
    s.add({"type": "response.in_progress", "response": _response_obj(spec, "in_progress")})
    item = {"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    s.add({"type": "response.output_item.added", "item": item, "output_index": 0})
    part: dict[str, Any] = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    s.add(
        {"type": "response.content_part.added", "content_index": 0, "item_id": item_id, "output_index": 0, "part": part}
    )
    broken = fault in (F.CUT, F.RESET, F.FAILED, F.ERROR, F.INCOMPLETE)
    n_deltas = cut_at(spec) if broken else len(spec.words)
    for word in spec.words[:n_deltas]:
        s.add(
            {
                "type": "response.output_text.delta",
                "content_index": 0,
                "delta": word,
                "item_id": item_id,
                "logprobs": [],
                "output_index": 0,
            },
            DELTA,
        )
    text = "".join(spec.words[:n_deltas])
    if fault in (F.CUT, F.RESET):
        return s.events
    if fault == F.ERROR:
        if websocket:
            err = {"type": "server_error", "code": "server_error", "message": _ERROR_MESSAGE, "param": None}
            s.add({"type": "error", "error": err, "status": 500}, ERROR_EVENT)
        else:
            # as recorded from the live API: an `error` event, then response.failed
            s.add({"type": "error", "code": "server_error", "message": _ERROR_MESSAGE, "param": None}, ERROR_EVENT)
            failed = _response_obj(spec, "failed", error={"code": "server_error", "message": _ERROR_MESSAGE})
            s.add({"type": "response.failed", "response": failed}, TERMINAL)
        return s.events
    if fault == F.FAILED:
        failed = _response_obj(spec, "failed", error={"code": "server_error", "message": _ERROR_MESSAGE})
        s.add({"type": "response.failed", "response": failed}, TERMINAL)
        return s.events
    status = "incomplete" if fault == F.INCOMPLETE else "completed"
    s.add(
        {
            "type": "response.output_text.done",
            "content_index": 0,
            "item_id": item_id,
            "logprobs": [],
            "output_index": 0,
            "text": text,
        }
    )
    s.add(
        {
            "type": "response.content_part.done",
            "content_index": 0,
            "item_id": item_id,
            "output_index": 0,
            "part": {**part, "text": text},
        }
    )
    done_item = {**item, "status": status, "content": [{**part, "text": text}]}
    s.add({"type": "response.output_item.done", "item": done_item, "output_index": 0})
    usage = _responses_usage(spec, n_deltas)
    if fault == F.INCOMPLETE:
        final = _response_obj(
            spec, "incomplete", incomplete_details={"reason": "max_output_tokens"}, output=[done_item], usage=usage
        )
        s.add({"type": "response.incomplete", "response": final}, TERMINAL)
    else:
        final = _response_obj(spec, "completed", output=[done_item], usage=usage)
        s.add({"type": "response.completed", "response": final}, TERMINAL)
    events = s.events
    if fault in (F.SEQ_GAP, F.SEQ_DUP):
        deltas = [i for i, e in enumerate(events) if e.kind == DELTA]
        mid = deltas[len(deltas) // 2]
        if fault == F.SEQ_GAP:
            del events[mid]  # one event lost on the way: its number is skipped
        else:
            events.insert(mid + 1, events[mid])  # the same event again (a gateway replaying after a reconnect)
    if fault == F.TRAILING_DONE:
        events.append(Event("[DONE]", DONE))
    return events


# --- OpenAI Chat Completions and legacy Completions -------------------------------------------------


def _chat_usage(spec: StreamSpec, output_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": spec.input_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": spec.input_tokens + output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chat_events(spec: StreamSpec, legacy: bool) -> list[Event]:
    fault = spec.fault
    cid = ("cmpl-" if legacy else "chatcmpl-") + spec.response_id.removeprefix("resp_")
    events: list[Event] = []

    def chunk(
        choices: list[dict[str, Any]], kind: str, usage: dict[str, Any] | None = None, last: bool = False
    ) -> None:
        if legacy:
            payload: dict[str, Any] = {
                "id": cid,
                "object": "text_completion",
                "created": CREATED_AT,
                "choices": choices,
                "model": spec.model,
            }
            if last:
                payload["usage"] = usage
        else:
            payload = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": CREATED_AT,
                "model": spec.model,
                "system_fingerprint": "fp_otelstream",
                "choices": choices,
            }
            if spec.include_usage:  # the live API sends "usage": null on every chunk but the last
                payload["usage"] = usage
        events.append(Event(payload, kind))

    def choice(index: int, text: str | None, finish: str | None, role: bool = False) -> dict[str, Any]:
        if legacy:
            return {"text": text or "", "index": index, "logprobs": None, "finish_reason": finish}
        delta: dict[str, Any] = {}
        if role:
            delta = {"role": "assistant", "content": "", "refusal": None}
        elif text is not None:
            delta = {"content": text}
        return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}

    n = max(1, spec.n)
    if not legacy:
        for i in range(n):  # the role-only first chunk: not a delta
            chunk([choice(i, None, None, role=True)], META)
    broken = fault in (F.CUT, F.RESET, F.ERROR, F.INCOMPLETE)
    n_words = cut_at(spec) if broken else len(spec.words)
    for word in spec.words[:n_words]:
        for i in range(n):  # choices interleave, as recorded with n=2
            chunk([choice(i, word, None)], DELTA)
    if fault in (F.CUT, F.RESET):
        return events
    if fault == F.ERROR:
        err = {"message": _ERROR_MESSAGE, "type": "server_error", "param": None, "code": "server_error"}
        events.append(Event({"error": err}, ERROR_EVENT))
        return events
    finish = "length" if fault == F.INCOMPLETE else "stop"
    for i in range(n):
        chunk([choice(i, "" if legacy else None, finish)], TERMINAL)
    if spec.include_usage:
        chunk([], AFTER, usage=_chat_usage(spec, n_words * n), last=True)
    events.append(Event("[DONE]", DONE))
    return events


# --- Anthropic Messages ------------------------------------------------------------------------------


def _messages_events(spec: StreamSpec) -> list[Event]:
    fault = spec.fault
    events: list[Event] = []

    def add(payload: dict[str, Any], kind: str = META) -> None:
        events.append(Event(payload, kind, str(payload["type"])))

    usage = {
        "input_tokens": spec.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
        "service_tier": "standard",
    }
    message: dict[str, Any] = {
        "id": "msg_" + spec.response_id.removeprefix("resp_"),
        "type": "message",
        "role": "assistant",
        "model": spec.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    add({"type": "message_start", "message": message})
    add({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    events.append(Event({"type": "ping"}, KEEPALIVE, "ping"))  # the live API sends one here, every time
    broken = fault in (F.CUT, F.RESET, F.ERROR, F.INCOMPLETE)
    n_words = cut_at(spec) if broken else len(spec.words)
    for word in spec.words[:n_words]:
        add({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}}, DELTA)
    if fault in (F.CUT, F.RESET):
        return events
    if fault == F.ERROR:
        events.append(
            Event(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, ERROR_EVENT, "error"
            )
        )
        return events
    add({"type": "content_block_stop", "index": 0})
    stop = "max_tokens" if fault == F.INCOMPLETE else "end_turn"
    final_usage = {
        "input_tokens": spec.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": n_words,
    }
    add({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": final_usage})
    add({"type": "message_stop"}, TERMINAL)
    return events


# --- public ------------------------------------------------------------------------------------------


def build_events(spec: StreamSpec) -> list[Event]:
    """The events of one response with ``spec.fault`` applied (HTTP-level faults have none: see the server)."""
    surface = spec.surface
    if surface == names.RESPONSES:
        events = _responses_events(spec, websocket=False)
    elif surface == names.RESPONSES_WEBSOCKET:
        events = _responses_events(spec, websocket=True)
    elif surface == names.CHAT_COMPLETIONS:
        events = _chat_events(spec, legacy=False)
    elif surface == names.COMPLETIONS:
        events = _chat_events(spec, legacy=True)
    elif surface == names.MESSAGES:
        events = _messages_events(spec)
    elif surface == names.GENERATE_CONTENT:
        events = gemini_events(spec)
    elif surface == names.CONVERSE:
        events = converse_events(spec)
    else:
        raise ValueError(f"unknown surface {surface!r}")
    if spec.fault == F.KEEPALIVE and surface in F.SURFACES_BY_FAULT[F.KEEPALIVE]:
        events = _with_keepalives(events, surface)
    return events


def _with_keepalives(events: list[Event], surface: str) -> list[Event]:
    """Comment lines (OpenRouter style) before the first delta and after every third delta; on Messages also
    `event: ping`, which the Anthropic SDK skips. OpenAI surfaces get comments only: the openai SDK would yield an
    `event: ping` block to the caller as if it were a chunk."""
    out: list[Event] = []
    seen = 0
    for event in events:
        if event.kind == DELTA:
            if seen == 0 or seen % 3 == 0:
                out.append(Event("keepalive", KEEPALIVE, comment=True))
                if surface == names.MESSAGES:
                    out.append(Event({"type": "ping"}, KEEPALIVE, "ping"))
            seen += 1
        out.append(event)
    return out


def resumed(events: Sequence[Event], starting_after: int | None) -> list[Event]:
    """A background resume (``GET /v1/responses/{id}?stream=true&starting_after=N``): the events after N."""
    if starting_after is None:
        return list(events)
    return [
        e
        for e in events
        if (e.sequence_number is None and e.kind == DONE)
        or (e.sequence_number is not None and e.sequence_number > starting_after)
    ]
