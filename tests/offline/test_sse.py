"""The offline SSE decoder: line ends, fields, comments, unterminated blocks, limits, and agreement with the SDK."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otelstream.core.sse_decoder import SSEComment, SSEDecoder, SSEEvent, decode_text, iter_sse


def events(text: str) -> list[SSEEvent]:
    items, _ = decode_text(text)
    return [i for i in items if isinstance(i, SSEEvent)]


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_endings(eol: str) -> None:
    body = eol.join(["event: a", "data: 1", "", "data: 2", "", ""])
    assert [(e.event, e.data) for e in events(body)] == [("a", "1"), (None, "2")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    dec = SSEDecoder()
    items = dec.feed("data: 1\r") + dec.feed("\n\r") + dec.feed("\ndata: 2\r\n\r\n") + dec.finish()
    assert [e.data for e in items if isinstance(e, SSEEvent)] == ["1", "2"]
    assert not dec.unterminated


def test_cr_then_cr_is_blank_line() -> None:
    dec = SSEDecoder()
    items = dec.feed("data: 1\r") + dec.feed("\r") + dec.finish()
    assert [e.data for e in items if isinstance(e, SSEEvent)] == ["1"]


def test_fields() -> None:
    body = "event: x\nid: 7\nretry: 1500\ndata: a\ndata:b\ndata:  c\nfoo: ignored\nevent\n\n"
    (e,) = events(body)
    # "event" with no colon is a field named "event" with an empty value: no name
    assert (e.event, e.data, e.id, e.retry) == (None, "a\nb\n c", "7", 1500)


def test_comments_are_reported_not_events() -> None:
    items, dec = decode_text(": keepalive\n\n: OPENROUTER PROCESSING\ndata: 1\n\n")
    assert items == [SSEComment("keepalive"), SSEComment("OPENROUTER PROCESSING"), SSEEvent(None, "1")]
    assert dec.comments == 2 and dec.events == 1


def test_comment_only_block_dispatches_nothing() -> None:
    assert events(": a\n\n: b\n\n") == []


def test_id_with_nul_and_bad_retry_ignored() -> None:
    assert events("id: a\0b\n\nretry: soon\n\n") == []
    (e,) = events("retry: 10\n\n")
    assert e.retry == 10 and e.data == ""


def test_empty_data_line_dispatches_empty_event() -> None:
    (e,) = events("event: ping\ndata:\n\n")
    assert (e.event, e.data) == ("ping", "")


def test_unterminated_last_block_dropped_and_flagged() -> None:
    items, dec = decode_text("data: 1\n\ndata: 2\n")
    assert [e.data for e in items if isinstance(e, SSEEvent)] == ["1"] and dec.unterminated
    items, dec = decode_text("data: 1\n\ndata: 2")  # no newline at all
    assert len(items) == 1 and dec.unterminated
    _, dec = decode_text("data: 1\n\n")
    assert not dec.unterminated
    _, dec = decode_text("data: 1\n\n: trailing comment")
    assert not dec.unterminated  # a comment is not an event


def test_bom_free_and_blank_lines_only() -> None:
    assert events("\n\n\n") == []


def test_line_limit_bounds_memory() -> None:
    dec = SSEDecoder(max_line=10, max_event=100)
    out = dec.feed("data: " + "x" * 50)
    assert out == [] and dec._line_len <= 10
    out = dec.feed("y" * 1000 + "\n\n")
    (e,) = out
    assert e.truncated and len(e.data) == 4 and dec.oversized == 1


def test_event_limit_bounds_memory() -> None:
    dec = SSEDecoder(max_line=100, max_event=20)
    out = dec.feed("data: 0123456789\n" * 5 + "\n")
    (e,) = out
    assert e.truncated and len(e.data) <= 20 + 5
    assert dec.feed("data: ok\n\n") == [SSEEvent(None, "ok")]  # the limit resets per event


def test_finish_is_final() -> None:
    dec = SSEDecoder()
    dec.feed("data: 1\n\n")
    dec.finish()
    assert dec.feed("data: 2\n\n") == [] and dec.finish() == []


# --- properties ----------------------------------------------------------------------------------------------
_line_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\0")
sse_lines = st.lists(
    st.one_of(
        st.sampled_from(["", "", ": keepalive", "event: a", "event: ping", "data: {}", "data:x", "retry: 5",
                         "retry: x", "nofield", "data", "event:"]),
        st.text(alphabet=_line_chars, max_size=8).map(lambda s: "data: " + s),
        st.text(alphabet=_line_chars, max_size=8),
    ),
    max_size=30,
)  # fmt: skip
eols = st.sampled_from(["\n", "\r\n", "\r"])


def as_tuples(items: list[Any]) -> list[Any]:
    return [(type(i).__name__, *((i.event, i.data, i.retry) if isinstance(i, SSEEvent) else (i.text,))) for i in items]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.lists(st.integers(min_value=0, max_value=300), max_size=8))
def test_any_text_any_chunking_same_result_never_raises(text: str, cuts: list[int]) -> None:
    whole, dec_whole = decode_text(text)
    points = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    dec = SSEDecoder()
    split = list(iter_sse(chunks, dec))
    assert as_tuples(split) == as_tuples(whole)
    assert dec.unterminated == dec_whole.unterminated


@settings(max_examples=300, deadline=None)
@given(sse_lines, eols, st.booleans())
def test_agrees_with_the_openai_sdk_decoder(lines: list[str], eol: str, terminated: bool) -> None:
    """Differential check against openai's own SSEDecoder (no `id:` lines: openai never resets the id, see sse.py)."""
    openai_streaming = pytest.importorskip("openai._streaming")
    body = eol.join(lines) + (eol + eol if terminated else "")
    ours = [(e.event or None, e.data, e.retry) for e in events(body)]
    theirs = [
        (s.event or None, s.data, s.retry)
        for s in openai_streaming.SSEDecoder().iter_bytes(iter([body.encode("utf-8")]))
    ]
    assert ours == theirs
