"""The event-stream framing decoder (``core.eventstream``): whatever the messages and however the body is split, it
gives back exactly what the test encoder framed; a flipped bit in either CRC, a truncated body or an oversized
message is an ``EventStreamDecodeError`` (protocol), never a wrong message."""

from __future__ import annotations

import struct
import uuid
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otelstream import names
from otelstream.core import errors
from otelstream.core.eventstream import EventMessage, EventStreamDecodeError, EventStreamDecoder
from tests.support import eventstream as enc

NAMES = st.text(min_size=1, max_size=12)
VALUES = st.one_of(
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=40),
    st.text(max_size=40),
    st.uuids(),
    st.builds(enc.Typed, st.just(enc.BYTE), st.integers(-128, 127)),
    st.builds(enc.Typed, st.just(enc.SHORT), st.integers(-(2**15), 2**15 - 1)),
    st.builds(enc.Typed, st.just(enc.LONG), st.integers(-(2**63), 2**63 - 1)),
    st.builds(enc.Typed, st.just(enc.TIMESTAMP), st.integers(0, 2**62)),
)
MESSAGES = st.lists(
    st.tuples(st.dictionaries(NAMES, VALUES, max_size=5), st.binary(max_size=300)), min_size=1, max_size=6
)


def expected(headers: dict[str, object]) -> dict[str, object]:
    return {k: v.value if isinstance(v, enc.Typed) else v for k, v in headers.items()}


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]


def decode_all(chunks: list[bytes], dec: EventStreamDecoder | None = None) -> list[EventMessage]:
    dec = dec or EventStreamDecoder()
    out: list[EventMessage] = []
    for chunk in chunks:
        out.extend(dec.feed(chunk))
    dec.finish()
    return out


@settings(max_examples=150, deadline=None)
@given(MESSAGES, st.lists(st.integers(0, 10_000), max_size=12))
def test_round_trip_in_any_split(messages: list[tuple[dict[str, object], bytes]], cuts: list[int]) -> None:
    body = b"".join(enc.frame(h, p) for h, p in messages)
    got = decode_all(split(body, cuts))
    assert [(m.headers, m.payload) for m in got] == [(expected(h), p) for h, p in messages]


@settings(max_examples=150, deadline=None)
@given(MESSAGES, st.data())
def test_any_flipped_bit_is_a_decode_error_never_a_wrong_message(
    messages: list[tuple[dict[str, object], bytes]], data: st.DataObject
) -> None:
    """A flipped bit anywhere (prelude, headers, payload, either CRC) fails a CRC or the lengths: never a message
    different from the one framed. Messages before the damaged one still come out whole."""
    framed = [enc.frame(h, p) for h, p in messages]
    body = bytearray(b"".join(framed))
    bit = data.draw(st.integers(0, len(body) * 8 - 1))
    body[bit // 8] ^= 1 << (bit % 8)
    damaged = 0
    while sum(len(f) for f in framed[: damaged + 1]) <= bit // 8:
        damaged += 1
    dec = EventStreamDecoder()
    got: list[EventMessage] = []
    with pytest.raises(EventStreamDecodeError):
        for b in body:  # one byte at a time: every message before the damage is delivered first
            got.extend(dec.feed(bytes([b])))
        dec.finish()
    assert [(m.headers, m.payload) for m in got] == [(expected(h), p) for h, p in messages[:damaged]]
    with pytest.raises(EventStreamDecodeError):  # it stays failed
        dec.feed(b"")


@given(MESSAGES, st.data())
def test_a_body_cut_inside_a_message_is_an_error_at_its_end(
    messages: list[tuple[dict[str, object], bytes]], data: st.DataObject
) -> None:
    body = b"".join(enc.frame(h, p) for h, p in messages)
    cut = data.draw(st.integers(1, len(body) - 1))
    whole = [len(enc.frame(h, p)) for h, p in messages]
    ends = [sum(whole[: i + 1]) for i in range(len(whole))]
    dec = EventStreamDecoder()
    got = dec.feed(body[:cut])
    assert len(got) == sum(e <= cut for e in ends)
    if cut in ends:
        dec.finish()
    else:
        with pytest.raises(EventStreamDecodeError, match="ended inside a message"):
            dec.finish()


def test_oversized_message_is_refused_from_its_prelude() -> None:
    """Bounded memory: a prelude announcing more than the limit fails before its bytes are held."""
    dec = EventStreamDecoder(max_message=1024)
    prelude = struct.pack(">II", 10_000, 0)
    with pytest.raises(EventStreamDecodeError, match="over the limit"):
        dec.feed(prelude + struct.pack(">I", zlib.crc32(prelude)))
    assert dec.pending == 0


def test_impossible_lengths() -> None:
    prelude = struct.pack(">II", 20, 10)  # headers longer than the room a 20-byte message has
    with pytest.raises(EventStreamDecodeError, match="impossible lengths"):
        EventStreamDecoder().feed(prelude + struct.pack(">I", zlib.crc32(prelude)) + b"\0" * 8)


def test_bedrock_headers_and_typed_values() -> None:
    u = uuid.uuid4()
    body = enc.event("contentBlockDelta", {"delta": {"text": "hi"}}) + enc.exception("throttlingException")
    body += enc.frame([("t", enc.Typed(enc.TIMESTAMP, 1_700_000_000_000)), ("u", u), ("f", False), ("b", b"\0\1")])
    a, b, c = decode_all([body])
    assert (a.message_type, a.event_type, a.exception_type) == ("event", "contentBlockDelta", None)
    assert a.payload == b'{"delta": {"text": "hi"}}'
    assert (b.message_type, b.exception_type) == ("exception", "throttlingException")
    assert c.headers == {"t": 1_700_000_000_000, "u": u, "f": False, "b": b"\0\1"}


def test_a_decode_error_is_the_protocol_class() -> None:
    try:
        EventStreamDecoder().feed(b"\0" * 16)
    except EventStreamDecodeError as exc:
        assert errors.error_class(names.TRANSPORT_ERROR, None, None, exc) == names.EC_PROTOCOL
    else:
        pytest.fail("a zero prelude has a wrong CRC")


def test_good_messages_before_a_bad_one_in_the_same_piece_come_out_first() -> None:
    """A live body read in blocks: the messages before a damaged one are delivered, the error comes with the next
    call (botocore likewise yields them before it raises)."""
    good = enc.event("messageStart", {"role": "assistant"}) + enc.event("contentBlockDelta", {"delta": {"text": "a"}})
    bad = bytearray(enc.event("messageStop", {"stopReason": "end_turn"}))
    bad[-1] ^= 1
    dec = EventStreamDecoder()
    assert [m.event_type for m in dec.feed(good + bytes(bad))] == ["messageStart", "contentBlockDelta"]
    with pytest.raises(EventStreamDecodeError, match="message CRC mismatch"):
        dec.finish()
    with pytest.raises(EventStreamDecodeError):
        dec.feed(b"")
