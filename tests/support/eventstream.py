"""An encoder for the AWS event-stream binary framing (``application/vnd.amazon.eventstream``), the wire of
Bedrock's ConverseStream and InvokeModelWithResponseStream, for the test servers and hand-made bodies.

A message: a 12-byte prelude (total length u32 BE, headers length u32 BE, CRC32 of those 8 bytes), the headers
(each: u8 name length, name, u8 value type, value; type 7 is a string with a u16 BE length), the payload, and a
CRC32 of everything before it. Only string headers are written: Bedrock sends nothing else.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

_STRING = 7


def _headers(headers: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack(">B", len(raw_name)) + raw_name
        out += struct.pack(">BH", _STRING, len(raw_value)) + raw_value
    return bytes(out)


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One framed message, both CRCs right."""
    blob = _headers(headers)
    total = 12 + len(blob) + len(payload) + 4
    prelude = struct.pack(">II", total, len(blob))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + blob + payload
    return body + struct.pack(">I", zlib.crc32(body))


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def event(event_type: str, payload_obj: Any) -> bytes:
    """An ``event`` message as Bedrock frames it: ``:event-type``, JSON content type, the payload as JSON."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return encode_message(headers, _json(payload_obj))


def exception(exception_type: str, message: str) -> bytes:
    """An in-band ``exception`` message (e.g. ``throttlingException``): botocore raises ``EventStreamError``."""
    headers = {":exception-type": exception_type, ":content-type": "application/json", ":message-type": "exception"}
    return encode_message(headers, _json({"message": message}))


def chunk(payload_obj: Any) -> bytes:
    """An InvokeModelWithResponseStream ``chunk`` event: the model family's own JSON, base64 in ``bytes``."""
    return event("chunk", {"bytes": base64.b64encode(_json(payload_obj)).decode()})


def corrupt_message_crc(message: bytes) -> bytes:
    """The same message with its trailing CRC flipped: a decoder must refuse it."""
    return message[:-4] + bytes(b ^ 0xFF for b in message[-4:])
