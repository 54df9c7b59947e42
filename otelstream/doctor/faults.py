"""The doctor's fault catalogue: what each fault is (served by the mock server or done by the caller), where it
applies, and what otelstream must report for it (outcomes, error classes, abandonment reasons, anomalies).

The counts a stream must show (events, deltas, keepalives, usage, sequence) follow from the body served and how far
the caller read: ``bodies.expected_counts``. Pure module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from otelstream import names

SYNC: Final = "sync"
ASYNC: Final = "async"
MODES: Final = (SYNC, ASYNC)

SSE_SURFACES: Final = (names.RESPONSES, names.CHAT_COMPLETIONS, names.COMPLETIONS, names.MESSAGES)
SURFACES: Final = (*SSE_SURFACES, names.GENERATE_CONTENT)
# the faults that apply to Gemini streams too (not keepalives: Gemini sends none; not a close before reading: a
# google-genai stream sends its request at the first pull, so one closed unread is no stream at all)
_ALSO_GEMINI: Final = (*SSE_SURFACES, names.GENERATE_CONTENT)
# the runtime self-check's cells on generate_content: two (its clients share google-genai's one request path)
GEMINI_SMALL: Final = (("completed", SYNC), ("cut", ASYNC))
_CHUNKED: Final = (names.CHAT_COMPLETIONS, names.COMPLETIONS)  # the surfaces whose end is `data: [DONE]`

# How the caller consumes the stream
DRAIN: Final = "drain"  # reads to the end (or to the exception the SDK raises)
BREAK_CLOSE: Final = "break_close"  # reads the first delta, breaks out, closes
CLOSE_UNREAD: Final = "close"  # closes before reading anything
CANCEL: Final = "cancel"  # its task is cancelled while waiting for the first delta (async only)
DROP: Final = "gc"  # reads one event and drops the stream without closing it (garbage collection)
OPEN_FAILS: Final = "open_fails"  # the request fails before a stream exists


@dataclass(frozen=True)
class Fault:
    name: str
    what: str  # one line, for the text output
    outcome: str
    error_class: str | None = None
    abandoned_reason: str | None = None
    caller: str = DRAIN
    surfaces: tuple[str, ...] = SSE_SURFACES
    modes: tuple[str, ...] = MODES
    # the protocol anomaly kinds the report must carry, exactly (None: not compared)
    anomalies: tuple[str, ...] | None = None
    uncompared: tuple[str, ...] = ()  # measures this fault leaves to the SDK (see _SDK_STOPS)
    small: bool = False  # part of the runtime self-check's smaller matrix


# Three SDK surfaces raise on an in-band error event instead of yielding it: whether that event is counted is the SDK's
# call ("except where the SDK itself stops early"); the outcome, class and deltas still are compared.
_SDK_STOPS: Final = ("events",)

FAULTS: Final = (
    Fault("completed", "a complete answer", names.COMPLETED, anomalies=(), small=True, surfaces=_ALSO_GEMINI),
    Fault("keepalives", "SSE comment lines (and `event: ping` on Messages) between events", names.COMPLETED,
          anomalies=()),
    Fault("cut", "the body ends (EOF) before the terminal event", names.CUT, names.EC_CUT, small=True,
          surfaces=_ALSO_GEMINI),
    Fault("reset", "the connection is reset mid-body", names.TRANSPORT_ERROR, names.EC_CONNECTION, small=True,
          surfaces=_ALSO_GEMINI),
    Fault("body_timeout", "a read times out mid-body", names.TRANSPORT_ERROR, names.EC_TIMEOUT, surfaces=_ALSO_GEMINI),
    Fault("error_after_output", "an in-band error event after some output", names.ERROR, names.EC_SERVER_ERROR,
          uncompared=_SDK_STOPS, surfaces=_ALSO_GEMINI),
    Fault("error_before_output", "an in-band error event before any output", names.ERROR, names.EC_SERVER_ERROR,
          uncompared=_SDK_STOPS, surfaces=_ALSO_GEMINI),
    Fault("incomplete", "the answer is cut by a token limit", names.INCOMPLETE, anomalies=(), surfaces=_ALSO_GEMINI),
    Fault("failed", "response.failed", names.FAILED, names.EC_SERVER_ERROR, surfaces=(names.RESPONSES,)),
    Fault("sequence_gap", "one event lost: a sequence number skipped", names.COMPLETED,
          surfaces=(names.RESPONSES,), anomalies=(names.ANOM_SEQUENCE_GAP,)),
    Fault("trailing_done", "`data: [DONE]` after response.completed (gateways)", names.COMPLETED,
          surfaces=(names.RESPONSES,), anomalies=(names.ANOM_TRAILING_DONE,)),
    Fault("missing_done", "a complete answer without `data: [DONE]`", names.COMPLETED, surfaces=_CHUNKED,
          anomalies=(names.ANOM_MISSING_DONE,)),
    Fault("done_without_finish", "`data: [DONE]` ends an answer that has no finish_reason", names.COMPLETED,
          surfaces=_CHUNKED, anomalies=(names.ANOM_MISSING_FINISH_REASON,)),
    Fault("break_close", "the caller breaks after the first delta and closes", names.ABANDONED,
          abandoned_reason=names.ABANDON_CLOSE, caller=BREAK_CLOSE, small=True, surfaces=_ALSO_GEMINI),
    Fault("close", "the caller closes the stream before reading", names.ABANDONED,
          abandoned_reason=names.ABANDON_CLOSE, caller=CLOSE_UNREAD),
    Fault("cancel", "the caller's task is cancelled while it waits", names.ABANDONED,
          abandoned_reason=names.ABANDON_CANCEL, caller=CANCEL, modes=(ASYNC,), small=True, surfaces=_ALSO_GEMINI),
    Fault("gc", "the caller drops the stream after one event, unclosed", names.ABANDONED,
          abandoned_reason=names.ABANDON_GC, caller=DROP, surfaces=_ALSO_GEMINI),
    Fault("http_429", "HTTP 429 before streaming", names.HTTP_ERROR, names.EC_RATE_LIMITED, caller=OPEN_FAILS,
          surfaces=_ALSO_GEMINI),
    Fault("http_503", "HTTP 503 before streaming", names.HTTP_ERROR, names.EC_OVERLOADED, caller=OPEN_FAILS,
          surfaces=_ALSO_GEMINI),
    Fault("read_timeout", "the read times out before the response headers", names.HTTP_ERROR, names.EC_TIMEOUT,
          caller=OPEN_FAILS, surfaces=_ALSO_GEMINI),
)  # fmt: skip

BY_NAME: Final = {f.name: f for f in FAULTS}


def error_class_for(fault: Fault, surface: str) -> str | None:
    """The class a fault's stream must have on a surface: the mock server's in-band errors are each provider's own
    (Anthropic says ``overloaded_error``, OpenAI ``server_error``)."""
    if fault.outcome == names.ERROR and surface == names.MESSAGES:
        return names.EC_OVERLOADED
    return fault.error_class
