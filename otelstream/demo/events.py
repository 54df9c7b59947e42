"""A fake response as data: the :class:`StreamSpec` that decides it (``words_for`` draws its output), the events
it consists of (:class:`Event`, each with the kind the pacing and the tests go by), and the wire form of one event
(``encode_sse`` / ``encode_ws``).

Pure: no I/O, no clock, so a seed reproduces a body byte for byte.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Final

from otelstream.demo import faults as F

# event kinds: what each event is for the pacing and the tests
META: Final = "meta"  # lifecycle / structure (response.created, role chunk, content_block_start, …)
DELTA: Final = "delta"  # carries output text
TERMINAL: Final = "terminal"  # the event that ends the response (completed/failed/incomplete, finish chunk …)
AFTER: Final = "after"  # after the terminal condition: usage chunk, message_stop
ERROR_EVENT: Final = "error"  # in-band error
KEEPALIVE: Final = "keepalive"  # SSE comment or `event: ping`
DONE: Final = "done"  # `data: [DONE]`

_VOCAB: Final = (
    " The",
    " stream",
    " arrived",
    " in",
    " small",
    " pieces",
    ",",
    " each",
    " one",
    " a",
    " few",
    " tokens",
    " long",
    ".",
    " Latency",
    " is",
    " measured",
    " from",
    " the",
    " request",
    " to",
    " first",
    " delta",
    " and",
    " every",
    " wait",
    " between",
    " events",
    " counts",
    " too",
    " Nothing",
    " was",
    " lost",
    " here",
)


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """Everything that decides one response's events (given the same spec, the same events)."""

    surface: str
    fault: str = F.OK
    model: str = "gpt-4o-mini"
    response_id: str = "resp_demo0000"
    words: tuple[str, ...] = (" Hello", ",", " world", ".")
    input_tokens: int = 12
    n: int = 1  # chat / completions choices
    include_usage: bool = False  # chat / completions: stream_options.include_usage
    background: bool = False  # responses: background=true (response.queued after response.created)
    stream_id: str | None = None  # WebSocket lane, echoed on every event


@dataclass(frozen=True, slots=True)
class Event:
    """One server event. ``data`` is the JSON payload, or a raw string for ``[DONE]`` and comments."""

    data: dict[str, Any] | str
    kind: str = META
    name: str | None = None  # SSE `event:` name (None: no event line)
    comment: bool = False  # an SSE comment line (`: text`), data is the text

    @property
    def sequence_number(self) -> int | None:
        if isinstance(self.data, dict):
            value = self.data.get("sequence_number")
            return value if isinstance(value, int) else None
        return None


def cut_at(spec: StreamSpec) -> int:
    """How many deltas a broken stream delivers before it breaks: about half, at least one."""
    return max(1, len(spec.words) // 2)


def words_for(rng: random.Random, count: int) -> tuple[str, ...]:
    """``count`` output tokens drawn from a small vocabulary."""
    return tuple(rng.choice(_VOCAB) for _ in range(max(1, count)))


def encode_sse(event: Event) -> bytes:
    """One SSE block. Compact JSON as the live APIs send it; `event:` line where the surface names events."""
    if event.comment:
        return b": " + str(event.data).encode() + b"\n\n"
    data = event.data if isinstance(event.data, str) else json.dumps(event.data, separators=(",", ":"))
    head = f"event: {event.name}\n" if event.name is not None else ""
    return f"{head}data: {data}\n\n".encode()


def encode_ws(event: Event) -> str:
    """One WebSocket text message (the JSON payload)."""
    return event.data if isinstance(event.data, str) else json.dumps(event.data, separators=(",", ":"))
