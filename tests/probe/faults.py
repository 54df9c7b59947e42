"""The faults the probe is tested with, as scripts for the scripted servers: SSE bodies per surface
(``tests/support/bodies.py`` reshaped), and the Responses events for the WebSocket server.

A fault that a surface's protocol does not have is served as the healthy body there (no ``[DONE]`` on Responses or
Messages, no comment keepalives and no ``[DONE]`` on a WebSocket, no sequence numbers on chat, completions or
messages): the probe must then find nothing, which the tests check too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from otelstream import names
from tests.probe.ws_scripted import Close, Drop, WsStep
from tests.support import bodies
from tests.support.scripted_server import Pause, Reset, Step

# every fault of issue 28, on every surface
OK = "ok"
CUT = "cut"
RESET = "reset"
INBAND_ERROR = "inband_error"
HTTP_429 = "http_429"
HTTP_503 = "http_503"
KEEPALIVE_GAP = "keepalive_gap"
MISSING_DONE = "missing_done"
MISSING_USAGE = "missing_usage"
SEQUENCE_GAP = "sequence_gap"
SLOW_FIRST = "slow_first"  # within every budget but the TTFD one: a note
SILENT_WAIT = "silent_wait"  # the same pause, no keepalive, longer than a proxy's read timeout
PAST_TIMEOUT = "past_timeout"  # a first delta later than the probe's --timeout
FAULTS = (OK, CUT, RESET, INBAND_ERROR, HTTP_429, HTTP_503, KEEPALIVE_GAP, MISSING_DONE, MISSING_USAGE, SEQUENCE_GAP,
          SLOW_FIRST, SILENT_WAIT, PAST_TIMEOUT)  # fmt: skip

PAUSE_S = 0.4  # the keepalive gap and the slow first delta
TIMEOUT_S = 0.5  # --timeout for PAST_TIMEOUT
PAUSE_PAST_TIMEOUT_S = 1.2  # over the SDK's read timeout (SSE)
PAUSE_PAST_DEADLINE_S = 2.0  # over the probe's own deadline, timeout + 1 s (a WebSocket read has no SDK timeout)
# the flags each fault is judged with: a proxy read timeout or a TTFD budget below PAUSE_S where it matters, the
# defaults (30 s, 2.56 s) elsewhere, so a slow machine cannot turn a healthy row into a finding
FLAGS: dict[str, list[str]] = {
    KEEPALIVE_GAP: ["--proxy-read-timeout", "0.25"],
    SLOW_FIRST: ["--ttfd-budget", "0.2"],
    SILENT_WAIT: ["--proxy-read-timeout", "0.25"],
    PAST_TIMEOUT: ["--timeout", str(TIMEOUT_S)],
}

SENTINEL_OUTPUT = "Zq7SentinelOutputXy"  # what the scripted answers say: it must appear nowhere the probe writes

_FRAMES: dict[str, Callable[[str], list[bytes]]] = {
    names.RESPONSES: bodies.responses,
    names.CHAT_COMPLETIONS: bodies.chat,
    names.COMPLETIONS: bodies.completions,
    names.MESSAGES: bodies.messages,
}


@dataclass(frozen=True)
class HttpScript:
    steps: list[Step]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


def _data(frame: bytes) -> tuple[str | None, dict[str, Any]]:
    event = None
    for line in frame.split(b"\n"):
        if line.startswith(b"event: "):
            event = line[7:].decode()
    return event, json.loads(frame.split(b"data: ", 1)[1])


def _reshape(frame: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    event, data = _data(frame)
    change(data)
    return bodies.sse(data, event)


def _say(frames: list[bytes]) -> list[bytes]:
    """The answer's text becomes the sentinel (a leak of output would show it)."""
    return [f.replace(b'"Hel"', json.dumps(SENTINEL_OUTPUT[:9]).encode())
            .replace(b'"lo"', json.dumps(SENTINEL_OUTPUT[9:]).encode()) for f in frames]  # fmt: skip


def _first_delta(frames: list[bytes]) -> int:
    return next(i for i, f in enumerate(frames) if SENTINEL_OUTPUT[:9].encode() in f)


def _without_usage(surface: str, frames: list[bytes]) -> list[bytes]:
    if surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS):
        return [f for f in frames if b'"usage"' not in f]
    if surface == names.RESPONSES:
        return [_reshape(f, lambda d: d["response"].pop("usage")) if b"response.completed" in f else f
                for f in frames]  # fmt: skip

    def strip(d: dict[str, Any]) -> None:
        d.get("message", {}).pop("usage", None)
        d.pop("usage", None)

    return [_reshape(f, strip) if b"message_start" in f or b"message_delta" in f else f for f in frames]


def http_script(surface: str, fault: str) -> HttpScript:
    frames = _say(_FRAMES[surface]("ok"))
    if fault == CUT:
        return HttpScript(_say(_FRAMES[surface]("cut")))
    if fault == RESET:
        return HttpScript([*frames[:2], Reset()])
    if fault == INBAND_ERROR:
        return HttpScript(_say(_FRAMES[surface]("error")))
    if fault == HTTP_429:  # each SDK's provider's own error body
        body: dict[str, Any] = (
            {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
            if surface == names.MESSAGES
            else {"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}
        )
        return HttpScript([json.dumps(body).encode()], 429, {"content-type": "application/json"})
    if fault == HTTP_503:
        return HttpScript([b"Service Unavailable"], 503, {"content-type": "text/plain"})
    if fault == KEEPALIVE_GAP:
        return HttpScript([frames[0], bodies.KEEPALIVE, Pause(PAUSE_S), bodies.KEEPALIVE, *frames[1:]])
    if fault == MISSING_DONE:
        return HttpScript([f for f in frames if f != b"data: [DONE]\n\n"])
    if fault == MISSING_USAGE:
        return HttpScript(_without_usage(surface, frames))
    if fault == SEQUENCE_GAP and surface == names.RESPONSES:
        return HttpScript([f for f in frames if b'"sequence_number": 3' not in f])  # the first delta is lost
    if fault in (SLOW_FIRST, SILENT_WAIT, PAST_TIMEOUT):
        at = _first_delta(frames)
        return HttpScript([*frames[:at], Pause(PAUSE_PAST_TIMEOUT_S if fault == PAST_TIMEOUT else PAUSE_S),
                           *frames[at:]])  # fmt: skip
    return HttpScript(frames)


# --- Responses over a WebSocket ---------------------------------------------------------------------------------
def ws_events() -> list[dict[str, Any]]:
    return [_data(f)[1] for f in _say(bodies.responses("ok"))]


def ws_script(fault: str) -> tuple[list[WsStep], int]:
    """(steps, handshake status): 101 accepts."""
    events = ws_events()
    steps: list[WsStep] = list(events)
    if fault == CUT:
        return [*events[:5], Close()], 101
    if fault == RESET:
        return [*events[:3], Drop()], 101
    if fault == INBAND_ERROR:  # the WebSocket shape: the error nested, its status beside it
        error = {"type": "server_error", "code": "server_error", "message": "boom", "param": None}
        return [*events[:5], {"type": "error", "error": error, "status": 500}], 101
    if fault == HTTP_429:
        return [], 429
    if fault == HTTP_503:
        return [], 503
    if fault == MISSING_USAGE:
        events[-1]["response"].pop("usage")
        return list(events), 101
    if fault == SEQUENCE_GAP:
        return [e for e in events if e.get("sequence_number") != 3], 101
    if fault in (SLOW_FIRST, SILENT_WAIT, PAST_TIMEOUT):
        return [*events[:3], Pause(PAUSE_PAST_DEADLINE_S if fault == PAST_TIMEOUT else PAUSE_S), *events[3:]], 101
    return steps, 101
