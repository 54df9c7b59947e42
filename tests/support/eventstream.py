"""An encoder for the AWS event-stream binary framing (``application/vnd.amazon.eventstream``), the wire of
Bedrock's ConverseStream and InvokeModelWithResponseStream, for the test servers and hand-made bodies (botocore only
decodes). The core's decoder (``otelstream.core.eventstream``) is checked against it.

A message: a 12-byte prelude (total length u32 BE, headers length u32 BE, CRC32 of those 8 bytes), the headers
(each: u8 name length, name, u8 value type, typed value), the payload, and a CRC32 of everything before it.
``encode_message`` writes string headers (all Bedrock sends); ``frame`` writes any header type, each value typed by
its Python type (``Typed`` forces one), for the decoder's own tests.
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
_STRING = STRING
_INT_FORMATS = {BYTE: ">b", SHORT: ">h", INT: ">i", LONG: ">q", TIMESTAMP: ">q"}


@dataclass(frozen=True)
class Typed:
    """A header value with its wire type given (a byte, a short, a timestamp in ms…)."""

    type: int
    value: Any


def _headers(headers: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack(">B", len(raw_name)) + raw_name
        out += struct.pack(">BH", _STRING, len(raw_value)) + raw_value
    return bytes(out)


def _framed(raw_headers: bytes, payload: bytes) -> bytes:
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + raw_headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One framed message with string headers, both CRCs right."""
    return _framed(_headers(headers), payload)


def _typed_header(name: str, value: Any) -> bytes:
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
    """One whole message with headers of any type: prelude, prelude CRC, headers, payload, message CRC."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return _framed(b"".join(_typed_header(n, v) for n, v in pairs), payload)


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def event(event_type: str, payload_obj: Any) -> bytes:
    """An ``event`` message as Bedrock frames it: ``:event-type``, JSON content type, the payload as JSON (bytes are
    taken as the payload itself, to frame data that is not JSON)."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return encode_message(headers, payload_obj if isinstance(payload_obj, bytes) else _json(payload_obj))


def exception(exception_type: str, message: str = "scripted") -> bytes:
    """An in-band ``exception`` message (e.g. ``throttlingException``): botocore raises ``EventStreamError``."""
    headers = {":exception-type": exception_type, ":content-type": "application/json", ":message-type": "exception"}
    return encode_message(headers, _json({"message": message}))


def chunk(payload_obj: Any) -> bytes:
    """An InvokeModelWithResponseStream ``chunk`` event: the model family's own JSON, base64 in ``bytes``."""
    return event("chunk", {"bytes": base64.b64encode(_json(payload_obj)).decode()})


def corrupt_message_crc(message: bytes) -> bytes:
    """The same message with its trailing CRC flipped: a decoder must refuse it."""
    return message[:-4] + bytes(b ^ 0xFF for b in message[-4:])


def converse(*events: tuple[str, Any]) -> bytes:
    """A ConverseStream body: each (event type, payload) as one event message."""
    return b"".join(event(t, p) for t, p in events)


def invoke(*model_events: Mapping[str, Any]) -> bytes:
    """An invoke body: each of the model's own events as one ``chunk``."""
    return b"".join(chunk(e) for e in model_events)


invoke_chunk = chunk
