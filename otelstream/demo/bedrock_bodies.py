"""Bedrock's event-stream bodies for the fake provider: ConverseStream's events (``messageStart``,
``contentBlockDelta`` …, ``messageStop``, ``metadata``; ``reasoningContent`` deltas first when the fault is
``reasoning``; ``modelStreamErrorException`` for ``error``), and the wire of an Anthropic model's
InvokeModelWithResponseStream: the Messages events (``bodies``) each in a ``chunk``, the last one carrying Bedrock's
invocation metrics. Pure: a spec always gives the same events and bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from otelstream import names
from otelstream.demo import eventstream_frames as W
from otelstream.demo import faults as F
from otelstream.demo.events import AFTER, DELTA, ERROR_EVENT, KEEPALIVE, META, TERMINAL, Event, StreamSpec, cut_at

STREAM_ERROR: Final = "modelStreamErrorException"
_ERROR_TEXT: Final = "The model stream failed (fake)."
_REASONING: Final = ("Working out a greeting.", " A short one will do.")
_REASONING_TOKENS: Final = 11


def converse_events(spec: StreamSpec) -> list[Event]:
    fault = spec.fault
    events: list[Event] = []

    def add(event_type: str, payload: dict[str, Any], kind: str = META) -> None:
        events.append(Event(payload, kind, event_type))

    add("messageStart", {"role": "assistant"})
    block = 0
    if fault == F.REASONING:  # reasoning deltas reach the caller first: time to first delta, not to first output
        for text in _REASONING:
            add("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": text}}}, DELTA)
        add("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "ZmFrZQ=="}}})
        add("contentBlockStop", {"contentBlockIndex": 0})
        block = 1
    broken = fault in (F.CUT, F.RESET, F.ERROR, F.INCOMPLETE)
    words = spec.words[: cut_at(spec)] if broken else spec.words
    for word in words:
        add("contentBlockDelta", {"contentBlockIndex": block, "delta": {"text": word}}, DELTA)
    if fault in (F.CUT, F.RESET):
        return events
    if fault == F.ERROR:
        events.append(Event({"message": _ERROR_TEXT}, ERROR_EVENT, STREAM_ERROR))
        return events
    add("contentBlockStop", {"contentBlockIndex": block})
    add("messageStop", {"stopReason": "max_tokens" if fault == F.INCOMPLETE else "end_turn"}, TERMINAL)
    out = len(words) + (_REASONING_TOKENS if fault == F.REASONING else 0)
    usage = {"inputTokens": spec.input_tokens, "outputTokens": out, "totalTokens": spec.input_tokens + out}
    add("metadata", {"usage": usage, "metrics": {"latencyMs": 40 + 20 * len(words)}}, AFTER)
    return events


def encode_converse(event: Event) -> bytes:
    if event.kind == ERROR_EVENT:
        assert isinstance(event.data, dict) and event.name is not None
        return W.exception(event.name, str(event.data["message"]))
    assert event.name is not None
    return W.event(event.name, event.data)


def invoke_encoder(spec: StreamSpec) -> Callable[[Event], bytes]:
    """How one Anthropic model's invoke stream carries its Messages events: each in a ``chunk``, the in-band error as
    ``modelStreamErrorException``, no ping (b""; the event stream has no keepalive), and on ``message_stop`` the
    invocation metrics Bedrock appends (token counts as the stream's own events state them)."""
    delivered = 0

    def encode(event: Event) -> bytes:
        nonlocal delivered
        if event.kind == KEEPALIVE:
            return b""
        if event.kind == ERROR_EVENT:
            return W.exception(STREAM_ERROR, _ERROR_TEXT)
        data = event.data
        assert isinstance(data, dict)
        delivered += event.kind == DELTA
        if data.get("type") == "message_stop":
            metrics = {"inputTokenCount": spec.input_tokens, "outputTokenCount": delivered}
            data = {**data, names.BEDROCK_INVOCATION_METRICS: metrics}
        return W.chunk(data)

    return encode
