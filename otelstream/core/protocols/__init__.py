"""One module per wire protocol: each maps one event (an SDK pydantic object's ``__dict__``, or a decoded JSON
dict) to what the tracker needs. Dispatch is on the ``type`` string, never the class: the SDKs build unknown
types as the first member of their union. Fields are read with ``dict.get`` (about 40 ns), never ``getattr`` on a
missing pydantic field (about 2 µs) and never ``model_dump``. Pure modules.

An observer returns ``DELTA``, ``OTHER`` or ``KEEPALIVE`` and reports rarer facts (terminal events, usage,
sequence numbers, anomalies) through the methods of the per-stream state (``core/state.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otelstream import names
from otelstream.core.protocols._fields import DELTA, KEEPALIVE, OTHER
from otelstream.core.protocols.chat import observe_chat, observe_completions
from otelstream.core.protocols.converse import is_unsupported_payload, observe_converse
from otelstream.core.protocols.gemini import observe_generate_content
from otelstream.core.protocols.messages import observe_messages
from otelstream.core.protocols.responses import observe_responses

if TYPE_CHECKING:
    from otelstream.core.state import Observer, StreamState


def observe_unknown(tracker: StreamState, d: dict[str, Any], name: object, ev: object = None) -> int:
    tracker.anomaly(names.ANOM_UNKNOWN_EVENT, "unsupported surface")
    return OTHER


OBSERVERS: dict[str, Observer] = {
    names.RESPONSES: observe_responses,
    names.RESPONSES_WEBSOCKET: observe_responses,
    names.CHAT_COMPLETIONS: observe_chat,
    names.COMPLETIONS: observe_completions,
    names.MESSAGES: observe_messages,
    names.GENERATE_CONTENT: observe_generate_content,
    names.CONVERSE: observe_converse,
}


def transport_decides(tracker: StreamState) -> bool:
    """Whether the stream's payload was one otelstream does not read (a Bedrock invoke stream of another model
    family): its outcome is then what the transport says, and a clean end of the body completes it."""
    return tracker.surface == names.CONVERSE and is_unsupported_payload(tracker)

__all__ = ["DELTA", "KEEPALIVE", "OBSERVERS", "OTHER", "observe_unknown", "transport_decides"]
