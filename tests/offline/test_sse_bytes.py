"""The live-body byte decoder (``SSEByteDecoder``, the HTTP-level observer's) gives exactly what the text decoder gives,
whatever the body and however it is cut into chunks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from otelstream.core import sse_decoder as sse
from otelstream.core.sse_decoder import SSEByteDecoder, SSEComment, SSEDecoder, SSEEvent

Item = tuple[str | None, str | SSEComment | None]


def by_text(body: bytes) -> tuple[list[Item], int, bool]:
    dec = SSEDecoder()
    items = dec.feed(body.decode("utf-8", "replace")) + dec.finish()
    events: list[Item] = [
        (i.event, None if i.truncated else i.data) if isinstance(i, SSEEvent) else (None, i) for i in items
    ]
    return events, sum(isinstance(i, SSEComment) for i in items), dec.unterminated


def by_bytes(chunks: list[bytes]) -> tuple[list[Item], int, bool]:
    """Events and comment lines in the body's order, as the text decoder gives them."""
    dec = SSEByteDecoder()
    out = []
    for chunk in chunks:
        out.extend(dec.feed(chunk))
    out.extend(dec.finish())
    events = [(name, data.decode("utf-8", "replace") if isinstance(data, bytes) else data) for name, data in out]
    return events, dec.comments, dec.unterminated


LINES = st.sampled_from([
    "data: {\"a\": 1}", "data:{\"b\":2}", "data: [DONE]", "event: ping", "event: content_block_delta", "event:",
    "event:x", ": keepalive", ":", "id: 7", "retry: 10", "retry: x", "data: ", "data:", "data", "foo: bar", "",
    "data: é✓", "event: é",
])  # fmt: skip
EOLS = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    parts = draw(st.lists(st.tuples(LINES, EOLS if draw(st.booleans()) else st.just("\n")), max_size=30))
    body = "".join(line + eol for line, eol in parts)
    if draw(st.booleans()):
        body += draw(LINES)  # a last line without a line end
    raw = body.encode()
    cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    return raw, chunks


@settings(max_examples=400, deadline=None)
@given(bodies())
def test_byte_decoder_agrees_with_the_text_decoder(case: tuple[bytes, list[bytes]]) -> None:
    raw, chunks = case
    assert by_bytes(chunks) == by_text(raw)


def test_common_blocks_take_the_byte_path() -> None:
    dec = SSEByteDecoder()
    got = dec.feed(b'event: content_block_delta\ndata: {"x":1}\n\ndata: {"y":2}\n\ndata: {"z"')
    assert got == [("content_block_delta", b'{"x":1}'), (None, b'{"y":2}')]
    assert dec.feed(b":3}\n\n") == [(None, b'{"z":3}')]
    assert dec._text is None and dec._utf8 is None  # no text decoder was needed


def test_a_large_unfinished_block_is_handed_to_the_bounded_decoder() -> None:
    dec = SSEByteDecoder()
    assert dec.feed(b"data: " + b"x" * (sse.MAX_FAST_BLOCK + 10)) == []
    assert dec._utf8 is not None and dec._rest == b""  # the bytes held are the text decoder's, within its limits
    assert dec.feed(b"\n\n") == [(None, "x" * (sse.MAX_FAST_BLOCK + 10))]
