"""The fake provider's encoder for AWS event-stream framing (``application/vnd.amazon.eventstream``), the wire of
Bedrock's ConverseStream and InvokeModelWithResponseStream: each message is a prelude (total length, headers length,
both u32 big-endian, then the CRC32 of those 8 bytes), string-typed headers, the payload and the CRC32 of everything
before it. otelstream's own decoder (``otelstream.core.eventstream``) and botocore's read what this writes.

Pure: standard library only.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any, Final

from otelstream import names

_STRING_TYPE: Final = 7  # the framing's header value type for a UTF-8 string (u16 length, then the bytes)
_JSON: Final = "application/json"


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One framed message with string headers, both CRCs right."""
    raw = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        raw += struct.pack(">B", len(raw_name)) + raw_name + struct.pack(">BH", _STRING_TYPE, len(raw_value))
        raw += raw_value
    prelude = struct.pack(">II", 12 + len(raw) + len(payload) + 4, len(raw))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + bytes(raw) + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event(event_type: str, payload: Any) -> bytes:
    """An ``event`` message as Bedrock frames it: its type in ``:event-type``, the payload as compact JSON."""
    headers = {names.EVENTSTREAM_EVENT_TYPE: event_type, ":content-type": _JSON,
               names.EVENTSTREAM_MESSAGE_TYPE: "event"}  # fmt: skip
    return message(headers, _compact(payload))


def exception(exception_type: str, text: str) -> bytes:
    """An in-band ``exception`` message (``modelStreamErrorException`` …): botocore raises it to the caller."""
    headers = {names.EVENTSTREAM_EXCEPTION_TYPE: exception_type, ":content-type": _JSON,
               names.EVENTSTREAM_MESSAGE_TYPE: "exception"}  # fmt: skip
    return message(headers, _compact({"message": text}))


def chunk(model_event: Any) -> bytes:
    """An invoke stream's ``chunk`` event: the model's own event as JSON, base64 in ``bytes``."""
    return event("chunk", {"bytes": base64.b64encode(_compact(model_event)).decode()})
