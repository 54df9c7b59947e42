"""An incremental Server-Sent Events decoder for offline input (``otelstream check``).

It reproduces what the openai 3.x and anthropic 2.x SDK decoders do with a body, so a recorded stream analysed
offline gives the events the caller would have seen live:

- lines end with LF, CR or CRLF (a CRLF split across two chunks is one line end);
- ``:`` starts a comment line: no event, but it is reported as an ``SSEComment`` so keepalives can be counted
  (the SDKs drop comments silently; ``check`` sees the bytes, so it can count them);
- ``event:`` / ``data:`` / ``id:`` / ``retry:`` fields, one optional space after the colon, several ``data:``
  lines joined by ``\\n``, unknown fields ignored, ``retry:`` kept only when it is an integer, an ``id`` containing
  NUL ignored;
- a blank line dispatches the block when it holds a name, data, an id or a retry (the SDKs' condition); a block of
  comments only dispatches nothing;
- a block not followed by a blank line when the body ends is **dropped**, as both SDKs drop it, and
  ``unterminated`` says so (``check`` reports it as the ``unterminated_event`` anomaly).

One deliberate difference: openai's decoder never resets ``id`` between blocks, so after a body's first ``id:``
every later comment-only block becomes an empty event (and a JSON decode error in the SDK). That is an SDK bug
rather than the protocol; here a block dispatches only on fields it set itself.

Memory is bounded whatever the input: a line longer than ``max_line`` characters and an event whose data exceeds
``max_event`` characters are cut at the limit and marked ``truncated`` (counted in ``oversized``). The decoder
never raises on any text. Pure module: no I/O.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

MAX_LINE: Final = 8 * 1024 * 1024  # characters kept of one line
MAX_EVENT: Final = 16 * 1024 * 1024  # characters kept of one event's data
MAX_COMMENT_TEXT: Final = 80  # characters of a comment kept for display

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched block: what the SDKs hand to their JSON parser (``event`` is the SSE name or None)."""

    event: str | None
    data: str
    id: str | None = None
    retry: int | None = None
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class SSEComment:
    """One comment line (``: keepalive``); ``text`` is its first characters after the colon."""

    text: str


SSEItem = SSEEvent | SSEComment


class SSEDecoder:
    """Feed text chunks with ``feed()``; call ``finish()`` at the end of the body. Both return the items decoded."""

    __slots__ = (
        "_data",
        "_data_len",
        "_event",
        "_id",
        "_line",
        "_line_len",
        "_line_over",
        "_retry",
        "_skip_lf",
        "_truncated",
        "comments",
        "events",
        "finished",
        "max_event",
        "max_line",
        "oversized",
        "unterminated",
    )

    def __init__(self, *, max_line: int = MAX_LINE, max_event: int = MAX_EVENT) -> None:
        self.max_line = max(1, max_line)
        self.max_event = max(1, max_event)
        self._line: list[str] = []  # pieces of the current (unfinished) line, at most max_line characters
        self._line_len = 0
        self._line_over = False
        self._skip_lf = False  # the previous chunk ended with CR: a leading LF belongs to that line end
        self._event: str | None = None
        self._data: list[str] = []
        self._data_len = 0
        self._id: str | None = None
        self._retry: int | None = None
        self._truncated = False
        self.events = 0
        self.comments = 0
        self.oversized = 0  # lines or events cut at a limit
        self.unterminated = False  # the body ended inside a block, which was dropped
        self.finished = False

    # --- input -----------------------------------------------------------------------------------------
    def feed(self, chunk: str) -> list[SSEItem]:
        out: list[SSEItem] = []
        if self.finished or not chunk:
            return out
        start = 0
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == "\n":
                start = 1
        n = len(chunk)
        for m in _LINE_END.finditer(chunk, start):
            self._append(chunk, start, m.start())
            self._line_done(out)
            start = m.end()
            if m.group() == "\r" and start == n:
                self._skip_lf = True  # a CRLF may be split across chunks
        if start < n:
            self._append(chunk, start, n)
        return out

    def finish(self) -> list[SSEItem]:
        """The body ended: a last line without a line end is processed; an undispatched block is dropped."""
        out: list[SSEItem] = []
        if self.finished:
            return out
        self.finished = True
        if self._line_len or self._line_over:
            self._line_done(out)
        if self._pending():
            self.unterminated = True
        self._reset_block()
        return out

    # --- internals ---------------------------------------------------------------------------------------
    def _append(self, chunk: str, start: int, end: int) -> None:
        if end <= start:
            return
        room = self.max_line - self._line_len
        if room <= 0:
            self._line_over = True
            return
        if end - start > room:
            end = start + room
            self._line_over = True
        self._line.append(chunk[start:end])
        self._line_len += end - start

    def _line_done(self, out: list[SSEItem]) -> None:
        line = "".join(self._line) if len(self._line) != 1 else self._line[0]
        over = self._line_over
        self._line.clear()
        self._line_len = 0
        self._line_over = False
        if over:
            self.oversized += 1
            self._truncated = True
        self._process(line, out)

    def _process(self, line: str, out: list[SSEItem]) -> None:
        if not line:
            if self._pending():
                out.append(
                    SSEEvent(
                        event=self._event,
                        data="\n".join(self._data),
                        id=self._id,
                        retry=self._retry,
                        truncated=self._truncated,
                    )
                )
                self.events += 1
            self._reset_block()
            return
        if line[0] == ":":
            self.comments += 1
            out.append(SSEComment(line[1 : MAX_COMMENT_TEXT + 1].strip()))
            return
        field, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            room = self.max_event - self._data_len
            if room <= 0:
                self._truncated = True
                return
            if len(value) > room:
                value = value[:room]
                self._truncated = True
                self.oversized += 1
            self._data.append(value)
            self._data_len += len(value) + 1
        elif field == "event":
            # as in the SDKs, a later empty `event:` clears the name; an empty name is no name
            self._event = value or None
        elif field == "id":
            if "\0" not in value:
                self._id = value or None
        elif field == "retry":
            # kept only when it parses as an int, as the SDKs do (a valid retry-only block still dispatches)
            try:
                self._retry = int(value)
            except ValueError:
                return
        # any other field name is ignored, as the spec and both SDKs do

    def _pending(self) -> bool:
        """Whether the block so far would dispatch at a blank line: the SDKs' condition (name, data, id or retry)."""
        return bool(self._event or self._data or self._id or self._retry is not None)

    def _reset_block(self) -> None:
        self._event = None
        self._data = []
        self._data_len = 0
        self._id = None
        self._retry = None
        self._truncated = False


def iter_sse(chunks: Iterable[str], decoder: SSEDecoder | None = None) -> Iterator[SSEItem]:
    """Decode a sequence of text chunks; inspect ``decoder.unterminated`` afterwards."""
    dec = decoder if decoder is not None else SSEDecoder()
    for chunk in chunks:
        yield from dec.feed(chunk)
    yield from dec.finish()


def decode_text(text: str) -> tuple[list[SSEItem], SSEDecoder]:
    """Decode a whole body at once (tests, small inputs)."""
    dec = SSEDecoder()
    items = list(iter_sse((text,), dec))
    return items, dec


# --- live bodies: bytes in, (name, data) out ---------------------------------------------------------------
# (name, data) of an event, or (None, the comment) of a comment line: see SSEByteDecoder
SSEByteItem = tuple[str | None, bytes | str | SSEComment | None]
MAX_FAST_BLOCK: Final = 64 * 1024  # bytes of an unfinished block the byte path holds before handing over
_LF2: Final = b"\n\n"


class SSEByteDecoder:
    """The same rules as ``SSEDecoder``, fed the raw bytes of a live body as the caller pulls them (the HTTP-level
    observer). The common block, LF-terminated ``event:`` and ``data:`` lines (one of each at most), is split with a
    few ``bytes`` operations per event; every other block (comments, ``id:`` / ``retry:``, several data lines) goes
    through an ``SSEDecoder`` as text. A body with a CR line end, or a block larger than ``MAX_FAST_BLOCK``, is
    handed to the ``SSEDecoder`` whole from there on, so its memory bound holds.

    ``feed()`` and ``finish()`` return, in the body's order, ``(name, data)`` per dispatched event (``data`` is
    bytes on the byte path, text from the ``SSEDecoder``, None for an event cut at the decoder's limit) and
    ``(None, SSEComment)`` per comment line (a client stops reading at some events: what it read of the comments
    depends on where they are). Comment lines are also counted in ``comments``; ``unterminated`` as in
    ``SSEDecoder``; ``idle``: no part of a block is held."""

    __slots__ = ("_rest", "_text", "_utf8", "comments", "unterminated")

    def __init__(self) -> None:
        self._rest = b""  # the unfinished block (byte path)
        self._text: SSEDecoder | None = None  # the text decoder: per odd block, or for the whole body once handed over
        self._utf8: Any = None  # incremental UTF-8 decoder once the body is handed over
        self.comments = 0
        self.unterminated = False

    def feed(self, chunk: bytes) -> list[SSEByteItem]:
        if self._utf8 is not None:
            return self._items(self._general().feed(self._utf8.decode(chunk)))
        if self._rest:
            chunk = self._rest + chunk
        end = chunk.rfind(_LF2)
        if 13 in chunk or (end < 0 and len(chunk) > MAX_FAST_BLOCK):  # (an int: memchr, not the buffer protocol)
            return self._hand_over(chunk)
        if end < 0:
            self._rest = chunk
            return []
        self._rest = chunk[end + 2 :]
        if len(self._rest) > MAX_FAST_BLOCK:
            rest, self._rest = self._rest, b""
            return [*self._blocks(chunk[:end], False), *self._hand_over(rest)]
        return self._blocks(chunk[:end], chunk.find(_LF2) == end)

    def finish(self) -> list[SSEByteItem]:
        """The body ended: an unfinished block is dropped (its comments still count), as ``SSEDecoder.finish``."""
        out: list[SSEByteItem] = []
        if self._utf8 is None and self._rest:
            out = self._hand_over(self._rest)
        if self._utf8 is not None:
            out.extend(self._items(self._general().feed(self._utf8.decode(b"", final=True))))
            general = self._general()
            out.extend(self._items(general.finish()))
            self.unterminated = general.unterminated
        return out

    def _blocks(self, text: bytes, single: bool) -> list[SSEByteItem]:
        # (per event: byte indexing and int membership tests; a bytes-in-bytes test or a slice compare costs more
        # than the whole split of a common block otherwise)
        out: list[SSEByteItem] = []
        for block in (text,) if single else text.split(_LF2):
            if block and block[0] == 10:  # extra blank lines dispatch nothing
                block = block.lstrip(b"\n")
            if block.startswith(b"data:"):
                if 10 not in block:
                    out.append((None, block[6:] if len(block) > 5 and block[5] == 32 else block[5:]))
                    continue
            elif block.startswith(b"event:"):
                nl = block.find(10)
                if nl > 0 and block.startswith(b"data:", nl + 1) and block.find(10, nl + 1) < 0:
                    name = block[7:nl] if block[6] == 32 else block[6:nl]
                    at = nl + 7 if len(block) > nl + 6 and block[nl + 6] == 32 else nl + 6
                    try:
                        out.append((name.decode() or None, block[at:]))
                        continue
                    except UnicodeDecodeError:
                        pass
            elif not block:
                continue
            # any other block: the text decoder, from a clean state (the block is whole) back to a clean state
            out.extend(self._items(self._general().feed(block.decode("utf-8", "replace") + "\n\n")))
        return out

    def _hand_over(self, data: bytes) -> list[SSEByteItem]:
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._rest = b""
        return self._items(self._general().feed(self._utf8.decode(data))) if data else []

    def _general(self) -> SSEDecoder:
        text = self._text
        if text is None:
            text = self._text = SSEDecoder()
        return text

    def _items(self, items: list[SSEItem]) -> list[SSEByteItem]:
        out: list[SSEByteItem] = []
        for item in items:
            if isinstance(item, SSEComment):
                self.comments += 1
                out.append((None, item))
            else:
                out.append((item.event, None if item.truncated else item.data))
        return out

    @property
    def idle(self) -> bool:
        """No part of a block is held (between whole blocks, on the byte path)."""
        return not self._rest and self._utf8 is None
