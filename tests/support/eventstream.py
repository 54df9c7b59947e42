"""An AWS event-stream encoder (``application/vnd.amazon.eventstream``), written for the tests: the Bedrock test
servers frame their bodies with it, and the core's decoder is checked against it. botocore only decodes.

``frame`` takes headers as (name, value) pairs, each value typed by its Python type (``Typed`` forces a type).
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TRUE, FALSE, BYTE, SHORT, INT, LONG, BYTES, STRING, TIMESTAMP, UUID = range(10)
_INT_FORMATS = {BYTE: ">b", SHORT: ">h", INT: ">i", LONG: ">q", TIMESTAMP: ">q"}


@dataclass(frozen=True)
class Typed:
    """A header value with its wire type given (a byte, a short, a timestamp in ms…)."""

    type: int
    value: Any


def _header(name: str, value: Any) -> bytes:
    raw_name = name.encode("utf-8")
    if isinstance(value, Typed):
        typ, v = value.type, value.value
    elif isinstance(value, bool):
        typ, v = (TRUE if value else FALSE), value
    elif isinstance(value, int):
        typ, v = INT, value
    elif isinstance(value, bytes):
        typ, v = BYTES, value
    elif isinstance(value, uuid.UUID):
        typ, v = UUID, value
    else:
        typ, v = STRING, str(value)
    out = struct.pack(">B", len(raw_name)) + raw_name + struct.pack(">B", typ)
    if typ in (TRUE, FALSE):
        return out
    if typ in _INT_FORMATS:
        return out + struct.pack(_INT_FORMATS[typ], v)
    if typ == UUID:
        return out + v.bytes
    data = v.encode("utf-8") if typ == STRING else bytes(v)
    return out + struct.pack(">H", len(data)) + data


def frame(headers: Iterable[tuple[str, Any]] | Mapping[str, Any], payload: bytes = b"") -> bytes:
    """One whole message: prelude, prelude CRC, headers, payload, message CRC."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    raw_headers = b"".join(_header(n, v) for n, v in pairs)
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + raw_headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event(event_type: str, payload: Any, content_type: str = "application/json") -> bytes:
    """A Bedrock event message (``:message-type`` event) whose payload is ``payload`` as JSON."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = [(":event-type", event_type), (":content-type", content_type), (":message-type", "event")]
    return frame(headers, data)


def exception(exception_type: str, message: str = "scripted") -> bytes:
    """A Bedrock exception message (``:message-type`` exception), e.g. ``throttlingException``."""
    headers = [(":exception-type", exception_type), (":content-type", "application/json"),
               (":message-type", "exception")]  # fmt: skip
    return frame(headers, json.dumps({"message": message}).encode())


def converse(*events: tuple[str, Any]) -> bytes:
    """A ConverseStream body: each (event type, payload) as one event message."""
    return b"".join(event(t, p) for t, p in events)


def invoke_chunk(model_event: Any) -> bytes:
    """An InvokeModelWithResponseStream ``chunk`` event: the model family's own JSON, base64 in ``{"bytes": …}``."""
    raw = base64.b64encode(json.dumps(model_event).encode()).decode()
    return event("chunk", {"bytes": raw})


def invoke(*model_events: Mapping[str, Any]) -> bytes:
    return b"".join(invoke_chunk(e) for e in model_events)


# the names the stand-in server (tests/support/bedrock_server.py) uses
encode_message = frame
chunk = invoke_chunk


def corrupt_message_crc(message: bytes) -> bytes:
    """The same message with its trailing CRC flipped: a decoder must refuse it."""
    return message[:-4] + bytes(b ^ 0xFF for b in message[-4:])
