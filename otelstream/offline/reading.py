"""Reading a recorded file: its text (gzip decompressed, UTF-8 strictly, anything that is not a text stream body
refused with a one-line reason), then its records in order (SSE events and comments, or JSON lines), each payload
parsed, before any surface logic."""

from __future__ import annotations

import codecs
import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from otelstream.core.client_rules import decode
from otelstream.core.sse_decoder import MAX_LINE, SSEComment, SSEDecoder, SSEItem

READ_SIZE: Final = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"


class CheckError(Exception):
    """A file that cannot be analysed; the message is the one-line reason shown to the user."""


def read_text(path: str) -> Iterator[str]:
    """The file's text in chunks; raises CheckError for anything that is not a UTF-8 text body."""
    p = Path(path)
    try:
        if p.is_dir():
            raise CheckError("is a directory, not a file")
        raw = p.open("rb")
    except FileNotFoundError:
        raise CheckError("no such file") from None
    except CheckError:
        raise
    except OSError as exc:
        raise CheckError(f"cannot read: {exc.strerror or exc}") from None
    with raw:
        try:
            head = raw.read(READ_SIZE)
        except OSError as exc:
            raise CheckError(f"cannot read: {exc.strerror or exc}") from None
        if not head:
            raise CheckError("empty file")
        source: Any = raw
        if head.startswith(_GZIP_MAGIC):
            # a body saved as it came over the wire with Content-Encoding: gzip
            raw.seek(0)
            source = gzip.GzipFile(fileobj=raw)
            try:
                head = source.read(READ_SIZE)
            except (OSError, EOFError, zlib.error):
                raise CheckError("corrupt gzip data") from None
            if not head:
                raise CheckError("empty file (after gzip decompression)")
        if b"\0" in head:
            raise CheckError("binary data, not a text stream body")
        stripped = head.lstrip()
        if stripped[:1] == b"<":
            low = stripped[:256].lower()
            what = "an HTML page" if b"html" in low else "an XML/HTML document"
            raise CheckError(f"{what}, not a stream body (an error page from a proxy or gateway?)")
        decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        offset = 0
        chunk = head
        first = True
        while chunk:
            try:
                text = decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                raise CheckError(f"invalid UTF-8 at byte {offset + exc.start}: not a text stream body") from None
            if first and text.startswith("\ufeff"):
                text = text[1:]  # a byte-order mark is not part of the first line
            first = False
            if text:
                yield text
            offset += len(chunk)
            try:
                chunk = source.read(READ_SIZE)
            except (OSError, EOFError, zlib.error):
                raise CheckError("corrupt gzip data") from None
            if b"\0" in chunk:
                raise CheckError("binary data, not a text stream body")
        try:
            tail = decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise CheckError(f"invalid UTF-8 at byte {offset}: the file ends inside a character") from None
        if tail:
            yield tail


def _jsonl_lines(chunks: Iterator[str]) -> Iterator[tuple[str, bool]]:
    """Lines of a JSON-lines file, each cut at MAX_LINE characters (second item: it was cut)."""
    buf: list[str] = []
    size = 0
    over = False
    for chunk in chunks:
        start = 0
        while True:
            nl = chunk.find("\n", start)
            end = len(chunk) if nl < 0 else nl
            piece = chunk[start:end]
            if size + len(piece) > MAX_LINE:
                piece = piece[: max(0, MAX_LINE - size)]
                over = True
            buf.append(piece)
            size += len(piece)
            if nl < 0:
                break
            yield "".join(buf).strip(), over
            buf, size, over = [], 0, False
            start = nl + 1
    if size or over:
        yield "".join(buf).strip(), over


# --- records: what one file holds, in order, before any surface logic --------------------------------------------
COMMENT: Final = object()


@dataclass
class Record:
    name: str | None
    value: Any  # core.client_rules.decode: parsed JSON, an Undecodable, or DONE


def sse_records(chunks: Iterator[str], state: dict[str, bool]) -> Iterator[Record | object]:
    dec = SSEDecoder()
    for chunk in chunks:
        yield from _sse_items(dec.feed(chunk))
    yield from _sse_items(dec.finish())
    state["unterminated"] = dec.unterminated


def _sse_items(items: list[SSEItem]) -> Iterator[Record | object]:
    for item in items:
        if isinstance(item, SSEComment):
            yield COMMENT
        else:
            yield Record(item.event, decode(item.data, item.truncated))


def jsonl_records(chunks: Iterator[str]) -> Iterator[Record | object]:
    for line, over in _jsonl_lines(chunks):
        if line:
            yield Record(None, decode(line, over))
