"""What the doctor's mock server sends for a fault on a surface (``serve``), and the counts otelstream must report
for the part of it the caller received (``expected_counts``).

The bodies are the demo's (``otelstream.demo.bodies``: shaped like the recorded captures), with the fault's change
applied; an HTTP-level fault has no body. Pure module.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from otelstream import names
from otelstream.demo import faults as demo_faults
from otelstream.demo.bodies import build_events
from otelstream.demo.events import DELTA, DONE, KEEPALIVE, TERMINAL, Event, StreamSpec, encode_sse
from otelstream.doctor import faults as F

RESET: Final = "reset"
TIMEOUT: Final = "timeout"

# the demo's fault whose events each doctor fault starts from
_BASE: Final = {
    "keepalives": demo_faults.KEEPALIVE,
    "cut": demo_faults.CUT,
    "reset": demo_faults.RESET,
    "body_timeout": demo_faults.RESET,
    "error_after_output": demo_faults.ERROR,
    "error_before_output": demo_faults.ERROR,
    "incomplete": demo_faults.INCOMPLETE,
    "failed": demo_faults.FAILED,
    "sequence_gap": demo_faults.SEQ_GAP,
    "trailing_done": demo_faults.TRAILING_DONE,
}
_MODEL: Final = {names.MESSAGES: "claude-doctor"}


@dataclass(frozen=True)
class Served:
    """One exchange: an HTTP status with an error body, a read timeout before the headers, or a 200 SSE body of
    ``events`` that may end in a transport failure (``fails``: RESET or TIMEOUT, after the last event)."""

    status: int = 200
    error_body: dict[str, Any] | None = None
    timeout_before_headers: bool = False
    events: tuple[Event, ...] = ()
    fails: str | None = None
    hold_before: int | None = None  # async bodies wait (until cancelled) before this event index
    frames: tuple[bytes, ...] = field(default=(), repr=False)
    holding: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)  # set at the hold


def serve(surface: str, fault: F.Fault) -> Served:
    if fault.name == "http_429":
        return Served(429, _error_body(surface, 429))
    if fault.name == "http_503":
        return Served(503, _error_body(surface, 503))
    if fault.name == "read_timeout":
        return Served(timeout_before_headers=True)
    spec = StreamSpec(surface, _BASE.get(fault.name, demo_faults.OK), model=_MODEL.get(surface, "gpt-doctor"),
                      response_id="resp_doctor0001", include_usage=True)  # fmt: skip
    events = build_events(spec)
    if fault.name == "error_before_output":
        events = _renumbered([e for e in events if e.kind != DELTA])
    elif fault.name == "missing_done":
        events = [e for e in events if e.kind != DONE]
    elif fault.name == "done_without_finish":
        events = [e for e in events if e.kind != TERMINAL]
    fails = {"reset": RESET, "body_timeout": TIMEOUT}.get(fault.name)
    hold = _first_delta(events) if fault.caller == F.CANCEL else None
    return Served(events=tuple(events), fails=fails, hold_before=hold, frames=tuple(encode_sse(e) for e in events))


def _renumbered(events: list[Event]) -> list[Event]:
    """The sequence numbers made consecutive again after events were taken out (no gap the fault is not about)."""
    out: list[Event] = []
    n = 0
    for e in events:
        if isinstance(e.data, dict) and "sequence_number" in e.data:
            e = replace(e, data={**e.data, "sequence_number": n})
            n += 1
        out.append(e)
    return out


def _error_body(surface: str, status: int) -> dict[str, Any]:
    """Each provider's own error shape (as its API sends it)."""
    if surface == names.MESSAGES:
        kind = "rate_limit_error" if status == 429 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": "doctor"}}
    if status == 429:
        return {"error": {"message": "doctor", "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
    return {"error": {"message": "doctor", "type": "server_error", "param": None, "code": None}}


def _first_delta(events: Sequence[Event]) -> int:
    return next((i for i, e in enumerate(events) if e.kind == DELTA), len(events))


def _counted(event: Event) -> bool:
    """An event otelstream counts: not a keepalive, not `[DONE]`."""
    return event.kind not in (KEEPALIVE, DONE)


def delivered(served: Served, caller: str) -> tuple[Event, ...]:
    """The events the caller received before it stopped (keepalives and `[DONE]` among them included)."""
    events = served.events
    if caller == F.CLOSE_UNREAD or caller == F.OPEN_FAILS:
        return ()
    if caller in (F.BREAK_CLOSE, F.CANCEL):
        first = _first_delta(events)
        return events[: first + 1] if caller == F.BREAK_CLOSE else events[:first]
    if caller == F.DROP:
        first = next(i for i, e in enumerate(events) if _counted(e))
        return events[: first + 1]
    return events


def reads(served: Served, caller: str) -> int:
    """How many items the caller reads before it acts (breaks, drops the stream, waits to be cancelled)."""
    return sum(1 for e in delivered(served, caller) if _counted(e))


@dataclass(frozen=True)
class Counts:
    ttfd: bool
    events: int
    deltas: int
    keepalives: int
    usage: tuple[int | None, int | None]  # (input, output) as the server reported them
    sequence_gaps: int | None  # None: the surface has no sequence numbers
    done_sentinel: bool


def expected_counts(surface: str, events: Sequence[Event]) -> Counts:
    deltas = sum(1 for e in events if e.kind == DELTA)
    return Counts(
        ttfd=deltas > 0,
        events=sum(1 for e in events if _counted(e)),
        deltas=deltas,
        keepalives=sum(1 for e in events if e.kind == KEEPALIVE),
        usage=_usage(surface, events),
        sequence_gaps=_gaps(events) if surface == names.RESPONSES else None,
        done_sentinel=any(e.kind == DONE for e in events),
    )


def _gaps(events: Sequence[Event]) -> int:
    gaps = 0
    last: int | None = None
    for e in events:
        n = e.sequence_number
        if n is None:
            continue
        if last is not None and n > last + 1:
            gaps += 1
        last = n if last is None else max(last, n)
    return gaps


def _usage(surface: str, events: Sequence[Event]) -> tuple[int | None, int | None]:
    """The usage the server reported in ``events``, by the usage rules (Anthropic input includes its cache reads
    and writes; its message_delta usage is cumulative: assigned, never added)."""
    usage: tuple[int | None, int | None] = (None, None)
    for e in events:
        data = e.data
        if not isinstance(data, dict):
            continue
        if surface == names.RESPONSES:
            found = (data.get("response") or {}).get("usage") if str(data.get("type")).startswith("response.") else None
            if found:
                usage = (found.get("input_tokens"), found.get("output_tokens"))
        elif surface == names.MESSAGES:
            if data.get("type") == "message_start":
                u = data["message"]["usage"]
                inp = u["input_tokens"] + u.get("cache_read_input_tokens", 0) + u.get("cache_creation_input_tokens", 0)
                usage = (inp, u.get("output_tokens"))
            elif data.get("type") == "message_delta" and data.get("usage"):
                u = data["usage"]
                inp = usage[0]
                if "input_tokens" in u:
                    inp = u["input_tokens"] + u.get("cache_read_input_tokens", 0) + u.get(
                        "cache_creation_input_tokens", 0
                    )
                usage = (inp, u.get("output_tokens", usage[1]))
        elif data.get("usage"):
            usage = (data["usage"].get("prompt_tokens"), data["usage"].get("completion_tokens"))
    return usage
