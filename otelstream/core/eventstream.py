"""The AWS event-stream framing (``application/vnd.amazon.eventstream``: Bedrock's stream bodies), decoded
incrementally: bytes in, in any split, whole messages out.

A message is a 12-byte prelude (total length, headers length, both u32 big-endian, then the CRC32 of those 8
bytes), the headers, the payload and the CRC32 of everything before it. A header is a name (u8 length, then UTF-8),
a type byte and a typed value. Both CRCs are checked: a message that fails either, or whose lengths cannot hold, is
an ``EventStreamDecodeError`` (a ``ValueError``: undecodable data, the error class ``protocol``), and the decoder
stays failed, as a client that cannot find the next message boundary does. Memory is bounded by the largest message
allowed. Pure module: no I/O.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Final

from otelstream import names

PRELUDE_LENGTH: Final = 12
CRC_LENGTH: Final = 4
MIN_MESSAGE: Final = PRELUDE_LENGTH + CRC_LENGTH
# the framing's own limits: a message of at most 16 MiB, headers of at most 128 KiB
MAX_MESSAGE: Final = 16 * 1024 * 1024
MAX_HEADERS: Final = 128 * 1024

_PRELUDE = struct.Struct(">III")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_INTS = {2: struct.Struct(">b"), 3: struct.Struct(">h"), 4: struct.Struct(">i"), 5: struct.Struct(">q")}
TYPE_TRUE, TYPE_FALSE, TYPE_BYTE, TYPE_SHORT, TYPE_INT, TYPE_LONG = 0, 1, 2, 3, 4, 5
TYPE_BYTES, TYPE_STRING, TYPE_TIMESTAMP, TYPE_UUID = 6, 7, 8, 9

HeaderValue = bool | int | bytes | str | uuid.UUID


class EventStreamDecodeError(ValueError):
    """Bytes that are not a well-formed event-stream message (a CRC that does not match, lengths that cannot hold, a
    body that ends inside a message)."""


@dataclass(frozen=True, slots=True)
class EventMessage:
    """One decoded message: its headers (a timestamp header as milliseconds since the epoch) and its payload."""

    headers: dict[str, HeaderValue]
    payload: bytes

    def header(self, name: str) -> str | None:
        value = self.headers.get(name)
        return value if isinstance(value, str) else None

    @property
    def message_type(self) -> str | None:
        """``event``, ``exception`` or ``error`` (the framing's own errors)."""
        return self.header(names.EVENTSTREAM_MESSAGE_TYPE)

    @property
    def event_type(self) -> str | None:
        return self.header(names.EVENTSTREAM_EVENT_TYPE)

    @property
    def exception_type(self) -> str | None:
        return self.header(names.EVENTSTREAM_EXCEPTION_TYPE)


def decode_headers(raw: bytes | memoryview) -> dict[str, HeaderValue]:
    """The headers of one message (its header bytes, their CRC already checked)."""
    out: dict[str, HeaderValue] = {}
    view = memoryview(raw)
    end = len(view)
    i = 0
    try:
        while i < end:
            n = view[i]
            name = bytes(view[i + 1 : i + 1 + n]).decode("utf-8")
            i += 1 + n
            typ = view[i]
            i += 1
            value: HeaderValue
            if typ in (TYPE_TRUE, TYPE_FALSE):
                value = typ == TYPE_TRUE
            elif typ in _INTS:
                fmt = _INTS[typ]
                (value,) = fmt.unpack_from(view, i)
                i += fmt.size
            elif typ == TYPE_TIMESTAMP:
                (value,) = _INTS[TYPE_LONG].unpack_from(view, i)
                i += 8
            elif typ in (TYPE_BYTES, TYPE_STRING):
                (length,) = _U16.unpack_from(view, i)
                data = bytes(view[i + 2 : i + 2 + length])
                if len(data) != length:
                    raise EventStreamDecodeError("a header value runs past the headers")
                i += 2 + length
                value = data.decode("utf-8") if typ == TYPE_STRING else data
            elif typ == TYPE_UUID:
                data = bytes(view[i : i + 16])
                if len(data) != 16:
                    raise EventStreamDecodeError("a header value runs past the headers")
                value = uuid.UUID(bytes=data)
                i += 16
            else:
                raise EventStreamDecodeError(f"unknown header type {typ}")
            if i > end:
                raise EventStreamDecodeError("a header value runs past the headers")
            out[name] = value
    except (IndexError, struct.error):
        raise EventStreamDecodeError("a header runs past the headers") from None
    except UnicodeDecodeError:
        raise EventStreamDecodeError("a header name or string is not UTF-8") from None
    return out


def looks_like_eventstream(head: bytes) -> bool:
    """Whether a body starts with an event-stream prelude (its CRC matches: text never does by chance)."""
    if len(head) < PRELUDE_LENGTH:
        return False
    total, headers_len, crc = _PRELUDE.unpack_from(head)
    return bool(zlib.crc32(head[:8]) == crc and total >= MIN_MESSAGE and headers_len <= total - MIN_MESSAGE)


class EventStreamDecoder:
    """Feed bytes as they arrive (``feed``), get the whole messages they complete; ``finish`` at the end of the body.
    Holds at most one message's bytes (``max_message``)."""

    __slots__ = ("_buf", "_failed", "max_message", "messages", "offset")

    def __init__(self, max_message: int = MAX_MESSAGE) -> None:
        self.max_message = max_message
        self._buf = bytearray()
        self._failed: EventStreamDecodeError | None = None
        self.messages = 0  # decoded so far
        self.offset = 0  # bytes of the body consumed by whole messages

    @property
    def pending(self) -> int:
        """Bytes held of a message not yet whole."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[EventMessage]:
        """The messages ``data`` completes, in order. At a bad message, the good ones before it are returned and the
        ``EventStreamDecodeError`` is raised by the next call (``feed`` or ``finish``); without any, at once."""
        if self._failed is not None:
            raise self._failed
        buf = self._buf
        buf += data
        out: list[EventMessage] = []
        pos = 0
        n = len(buf)
        try:
            while n - pos >= PRELUDE_LENGTH:
                total, headers_len, prelude_crc = _PRELUDE.unpack_from(buf, pos)
                if zlib.crc32(buf[pos : pos + 8]) != prelude_crc:
                    raise self._fail("prelude CRC mismatch")
                if total < MIN_MESSAGE or headers_len > total - MIN_MESSAGE:
                    raise self._fail(f"impossible lengths (total {total}, headers {headers_len})")
                if total > self.max_message or headers_len > MAX_HEADERS:
                    raise self._fail(f"message of {total} bytes over the limit of {self.max_message}")
                if n - pos < total:
                    break
                msg = bytes(buf[pos : pos + total])
                end = total - CRC_LENGTH
                if zlib.crc32(msg[:end]) != _U32.unpack_from(msg, end)[0]:
                    raise self._fail("message CRC mismatch")
                h_end = PRELUDE_LENGTH + headers_len
                try:
                    headers = decode_headers(msg[PRELUDE_LENGTH:h_end])
                except EventStreamDecodeError as exc:
                    raise self._fail(str(exc)) from None
                payload = msg[h_end:end]
                out.append(EventMessage(headers, payload))
                self.messages += 1
                self.offset += total
                pos += total
        except EventStreamDecodeError:
            if not out:
                raise
        finally:
            if pos:
                del buf[:pos]
        return out

    def finish(self) -> None:
        """The body ended: raises ``EventStreamDecodeError`` when it ended inside a message (or a bad message was
        found and not yet raised)."""
        if self._failed is not None:
            raise self._failed
        if self._buf:
            raise self._fail(f"the body ended inside a message ({len(self._buf)} bytes of it)")

    def _fail(self, reason: str) -> EventStreamDecodeError:
        err = EventStreamDecodeError(f"event-stream message {self.messages + 1} at byte {self.offset}: {reason}")
        self._failed = err
        self._buf = bytearray()
        return err
