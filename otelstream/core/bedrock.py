"""Bedrock's event-stream messages as the protocol modules read them: a ConverseStream message as the dict botocore
yields for it (``{event type: payload}``, exceptions alike), and an invoke stream's ``chunk`` as the model family's
own event (Anthropic models: one Messages event per chunk). What the live adapters and ``check`` share. Pure module.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any, Final

from otelstream.core.eventstream import EventMessage
from otelstream.core.protocols.converse import INVOKE_CHUNK

__all__ = [
    "INVOKE_CHUNK",
    "MESSAGES_TYPES",
    "chunk_bytes",
    "converse_event",
    "error_type_header",
    "invoke_event",
    "invoke_exception_event",
    "is_messages_event",
    "message_key",
    "payload_json",
]

# the Messages event types an Anthropic model's invoke chunks carry (an error event too)
MESSAGES_TYPES: Final = frozenset(
    {"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
     "message_stop", "ping", "error"}
)  # fmt: skip
MESSAGE_EVENT: Final = "event"
MESSAGE_EXCEPTION: Final = "exception"
MESSAGE_ERROR: Final = "error"  # the framing's own error message (":error-code", ":error-message")


def payload_json(msg: EventMessage) -> Any:
    """The message's payload as JSON (an empty payload is an empty object); raises ValueError when it is not."""
    if not msg.payload:
        return {}
    return json.loads(msg.payload)


def message_key(msg: EventMessage) -> str | None:
    """What a message is: its event type, its exception type, or the framing error's code."""
    kind = msg.message_type
    if kind == MESSAGE_EXCEPTION:
        return msg.exception_type
    if kind == MESSAGE_ERROR:
        return msg.header(":error-code")
    return msg.event_type


def converse_event(msg: EventMessage) -> dict[str | None, Any]:
    """A ConverseStream message as botocore yields it: ``{event type: payload}`` (an exception: ``{exception type:
    payload}``). Raises ValueError when the payload is not JSON."""
    body = payload_json(msg)
    if msg.message_type == MESSAGE_ERROR and not body:
        body = {"message": msg.header(":error-message")}
    return {message_key(msg): body}


def chunk_bytes(body: object) -> bytes | None:
    """An invoke ``chunk``'s model payload: botocore hands it over decoded (``{"bytes": b"…"}``), the wire carries it
    base64 (``{"bytes": "…"}``). None when there is none."""
    if not isinstance(body, Mapping):
        return None
    raw = body.get("bytes")
    if isinstance(raw, bytes | bytearray):
        return bytes(raw)
    if isinstance(raw, str):
        try:
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


def is_messages_event(value: object) -> bool:
    """Whether a decoded invoke payload is an Anthropic Messages event."""
    return isinstance(value, Mapping) and value.get("type") in MESSAGES_TYPES


def invoke_event(item: Mapping[str | None, Any]) -> Any:
    """An invoke stream's event (``{"chunk": {"bytes": …}}`` as botocore yields it) as the model's own event: the
    decoded JSON of its bytes. Raises ValueError when the bytes are missing or not JSON."""
    raw = chunk_bytes(item.get(INVOKE_CHUNK))
    if raw is None:
        raise ValueError("invoke chunk without bytes")
    return json.loads(raw)


def invoke_exception_event(exception_type: str | None, body: object) -> dict[str, Any]:
    """An exception message of an Anthropic model's invoke stream as a Messages ``error`` event of that type (its
    ``error_type``, from which the class follows)."""
    message = body.get("message") if isinstance(body, Mapping) else None
    return {"type": "error", "error": {"type": exception_type or "exception", "message": message}}


def error_type_header(value: object) -> str | None:
    """An HTTP error's type as Bedrock's error-type header sends it (``ThrottlingException:`` and a namespace): the type
    before the first colon, or None."""
    if not isinstance(value, str):
        return None
    kind = value.split(":", 1)[0].strip()
    return kind[:64] or None
