"""What the doctor's mock server sends for a fault on ``generate_content``: Gemini's SSE, one
``GenerateContentResponse`` per ``data:`` line with CRLF line ends as the service sends them, and its gRPC-style
error objects (in-band, and as an HTTP error's body). Pure module."""

from __future__ import annotations

import json
from typing import Any, Final

from otelstream.demo.events import DELTA, ERROR_EVENT, Event

MODEL: Final = "gemini-doctor"
USAGE: Final = {"promptTokenCount": 5, "candidatesTokenCount": 3, "totalTokenCount": 8}
_STATUS: Final = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def chunk(text: str, finish: str | None = None, usage: dict[str, int] | None = None) -> Event:
    cand: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish is not None:
        cand["finishReason"] = finish
    data: dict[str, Any] = {"candidates": [cand], "modelVersion": MODEL, "responseId": "gemini-doctor-1"}
    if usage is not None:
        data["usageMetadata"] = usage
    return Event(data, DELTA)


def error_object(status: int) -> dict[str, Any]:
    return {"error": {"code": status, "message": "doctor", "status": _STATUS.get(status, "UNKNOWN")}}


def events(fault: str) -> list[Event]:
    """The events of a 200 body for the doctor fault named ``fault``."""
    hel, lo = chunk("Hel"), chunk("lo")
    if fault in ("cut", "reset", "body_timeout"):
        return [hel, lo]  # the transport failures follow the last event (``bodies.Served.fails``)
    if fault == "error_after_output":
        return [hel, Event(error_object(500), ERROR_EVENT)]
    if fault == "error_before_output":
        return [Event(error_object(500), ERROR_EVENT)]
    if fault == "incomplete":
        return [hel, chunk("lo", "MAX_TOKENS", USAGE)]
    return [hel, lo, chunk("!", "STOP", USAGE)]


def encode(event: Event) -> bytes:
    return b"data: " + json.dumps(event.data, separators=(",", ":")).encode() + b"\r\n\r\n"


def usage_of(data: dict[str, Any]) -> tuple[int | None, int | None] | None:
    """(input, output) tokens of one chunk's ``usageMetadata`` by the usage rules (output = candidates + thoughts);
    None when it carries none."""
    u = data.get("usageMetadata")
    if not isinstance(u, dict):
        return None
    out = u.get("candidatesTokenCount")
    thoughts = u.get("thoughtsTokenCount")
    output = None if out is None and thoughts is None else (out or 0) + (thoughts or 0)
    return u.get("promptTokenCount"), output
