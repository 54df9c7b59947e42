"""Gemini's ``:streamGenerateContent?alt=sse`` bodies for the fake provider: one ``GenerateContentResponse`` per
``data:`` line with the service's CRLF line ends, the answer's text a part per chunk, thought parts first when the
fault is ``reasoning``, the finish reason and usage on the last chunk, and an in-band ``error`` object for ``error``.
Pure: a spec always gives the same events.
"""

from __future__ import annotations

import json
from typing import Any, Final

from otelstream.demo import faults as F
from otelstream.demo.events import DELTA, ERROR_EVENT, TERMINAL, Event, StreamSpec, cut_at

_THOUGHTS: Final = ("Working out a greeting.", " A short one will do.")
_THOUGHT_TOKENS: Final = 11


def _chunk(spec: StreamSpec, parts: list[dict[str, Any]], finish: str | None = None,
           usage: dict[str, int] | None = None) -> dict[str, Any]:  # fmt: skip
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate]}
    if usage is not None:
        body["usageMetadata"] = usage
    body["modelVersion"] = spec.model + "-001"
    body["responseId"] = spec.response_id.removeprefix("resp_")
    return body


def gemini_events(spec: StreamSpec) -> list[Event]:
    fault = spec.fault
    events: list[Event] = []
    thinking = fault == F.REASONING
    if thinking:  # thought parts count as deltas (time to first delta), not as the answer (time to first output)
        events += [Event(_chunk(spec, [{"text": t, "thought": True}]), DELTA) for t in _THOUGHTS]
    broken = fault in (F.CUT, F.RESET, F.ERROR, F.INCOMPLETE)
    words = spec.words[: cut_at(spec)] if broken else spec.words
    if fault in (F.CUT, F.RESET, F.ERROR):
        events += [Event(_chunk(spec, [{"text": w}]), DELTA) for w in words]
        if fault == F.ERROR:
            error = {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}
            events.append(Event({"error": error}, ERROR_EVENT))
        return events
    events += [Event(_chunk(spec, [{"text": w}]), DELTA) for w in words[:-1]]
    usage = {"promptTokenCount": spec.input_tokens, "candidatesTokenCount": len(words),
             "totalTokenCount": spec.input_tokens + len(words) + (_THOUGHT_TOKENS if thinking else 0)}  # fmt: skip
    if thinking:
        usage["thoughtsTokenCount"] = _THOUGHT_TOKENS
    finish = "MAX_TOKENS" if fault == F.INCOMPLETE else "STOP"
    events.append(Event(_chunk(spec, [{"text": words[-1]}], finish, usage), TERMINAL))  # the last text comes with it
    return events


def encode_gemini(event: Event) -> bytes:
    """One ``data:`` line and its blank line, CRLF as the service sends them."""
    data = event.data if isinstance(event.data, str) else json.dumps(event.data, separators=(",", ":"))
    return b"data: " + data.encode() + b"\r\n\r\n"
