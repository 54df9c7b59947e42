"""The HTTP-level observer's reading of an answer's body: each chunk the caller pulls, its content coding undone
(``inflater``), becomes events read by the client's reading rules (``core.client_rules``, as ``otelstream check``
reads a recording, for a client that is not an SDK), split by ``core.sse_decoder.SSEByteDecoder``.

Cost: a stream's events are mostly plain text deltas, and ``json.loads`` of one costs several times the observer's
whole budget per event, so a plain delta is recognised on its bytes. When an event that the tracker's flat path
takes (``StreamTracker.takes_plain``) has been decoded, its bytes are learned as a ``Shape``: all of them but its
text, and at most one other place where two plain deltas differ, a string value (OpenAI's ``obfuscation``,
Mistral's ``p``) or whitespace (Anthropic's), padding that changes with every event. An event of the same shape is
the same plain delta with another text, and ``StreamTracker.plain_delta`` records it without decoding it: a few
byte compares per event, on the whole chunk when it is exactly one event (the common case), else per event from the
decoder. Any other event (the first ones, the terminal, usage and error events, a text with a quote in it, another
layout) is decoded, as the rules say."""

from __future__ import annotations

import re
import zlib
from typing import Any

from otelstream import names
from otelstream.adapters.calls import Call, finish
from otelstream.core.client_rules import ClientReader
from otelstream.core.sse_decoder import SSEByteDecoder, SSEByteItem, SSEComment

_LEARN_FREELY = 4  # shapes learned per stream before learning must pay for itself (see Observed._may_learn)
_MAX_SHAPE = 2048  # bytes of a plain delta but its text, at most, learned (a shape keeps two copies per stream)
_DELTAS_PER_LEARN = 16


class Shape:
    """The bytes of a plain delta but its text (``prefix`` before it, the ``tail`` after it), or, when the bytes
    after the text vary in one place, the rest split around that place: one string value (``head`` up to its
    opening quote, ``foot`` from its closing quote), or JSON whitespace between two tokens (``space``: Anthropic
    pads its events so). ``framing``: the SSE lines before the data (``event: …`` on Messages, then ``data: ``); the
    ``c``-prefixed fields are the whole chunk's (framing, payload, blank line)."""

    __slots__ = ("cfoot", "cfoot_len", "choice", "ck", "cprefix", "ctail", "ctail_len", "foot", "foot_len", "head",
                 "head_len", "k", "name", "prefix", "space", "tail", "tail_len")  # fmt: skip

    def __init__(self, name: str | None, choice: object, prefix: bytes, tail: bytes | None, head: bytes = b"",
                 foot: bytes = b"", space: bool = False) -> None:  # fmt: skip
        self.name = name
        self.space = space
        self.choice = choice
        self.prefix = prefix
        self.k = len(prefix)
        self.tail = tail
        self.tail_len = 0 if tail is None else len(tail)
        self.head = head
        self.head_len = len(head)
        self.foot = foot
        self.foot_len = len(foot)
        framing = (b"event: " + name.encode() + b"\n" if name else b"") + b"data: "
        self.cprefix = framing + prefix
        self.ck = len(self.cprefix)
        self.ctail = None if tail is None else tail + b"\n\n"
        self.ctail_len = self.tail_len + 2
        self.cfoot = foot + b"\n\n"
        self.cfoot_len = self.foot_len + 2


def shaped(data: bytes, k: int, prefix: bytes, tail: bytes | None, tail_len: int, head: bytes, head_len: int,
           foot: bytes, foot_len: int, space: bool) -> bool:  # fmt: skip
    """Whether ``data`` is ``prefix`` + a text + the rest of a ``Shape`` (``Observed.chunk`` has the fixed tail's case
    inline): the text, and a varying value, are the contents of a JSON string that ends where the shape's does (a
    varying space only spaces and tabs), so the bytes are the shape's plain delta, one SSE line."""
    if data[:k] != prefix:
        return False
    if tail is not None:
        m = len(data) - tail_len
        return m > k and data[m:] == tail and json_text(data[k:m])
    j = data.find(34, k)
    h = j + head_len
    f = len(data) - foot_len
    if j <= k or h > f or data[j:h] != head or data[f:] != foot or not json_text(data[k:j]):
        return False
    pad = data[h:f]
    return not pad.strip(_JSON_SPACE) if space else pad != b"" and json_text(pad)  # (it may be the text: _learn)


def json_text(text: bytes) -> bool:
    """Whether ``text`` is the whole contents of a JSON string as ``json.loads`` reads it: no quote, valid escapes,
    valid UTF-8, no control character (a line end would also split the SSE line). Stricter only where no provider
    sends anything (other non-printable characters: such an event is decoded)."""
    try:
        return 34 not in text and (92 not in text or _ESCAPES(text) is not None) and text.decode().isprintable()
    except UnicodeDecodeError:
        return False


_JSON_SPACE = b" \t"  # JSON whitespace within an SSE line
_JSON_SPACE_BYTES = (b" ", b"\t")
# a JSON string's contents with a backslash in them (the common text has none: two byte searches decide it)
_ESCAPES = re.compile(rb'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*').fullmatch


class Observed:
    """One stream seen at the HTTP client: its call (tracker, listener), the reading of its body and the shape of
    its plain deltas."""

    __slots__ = ("call", "decoder", "inflate", "k", "learns", "messages", "reader", "shape", "tracker", "wrapped")

    def __init__(self, call: Call) -> None:
        self.call = call
        tracker = self.tracker = call.tracker
        self.messages = tracker.surface == names.MESSAGES
        self.reader = ClientReader(tracker, sdk=False)
        self.decoder = SSEByteDecoder()
        self.shape: Shape | None = None
        self.k = 0  # the shape's whole-chunk prefix length while the decoder holds no part of a block, else 0
        self.learns = 0
        self.wrapped = False
        # the body's content coding undone before decoding (the caller's bytes stay as they are): None for identity
        self.inflate: Any = None

    # --- the hot path: one chunk the caller pulled ------------------------------------------------------------
    def chunk(self, data: bytes) -> None:
        if self.inflate is not None:
            data = self.inflate(data)
        k = self.k
        s = self.shape
        # the common chunk: exactly one event, of the plain delta's shape (``shaped`` and ``json_text``, inline: a
        # call per chunk costs a tenth of the budget)
        if k and s is not None and data[:k] == s.cprefix:
            tail = s.ctail
            if tail is not None:
                m = len(data) - s.ctail_len
                if m > k and data[m:] == tail:
                    text = data[k:m]
                    try:
                        ok = (34 not in text and (92 not in text or _ESCAPES(text) is not None)
                              and text.decode().isprintable())  # fmt: skip
                    except UnicodeDecodeError:
                        ok = False
                    if ok and self.tracker.plain_delta(s.choice):
                        return
            else:
                m = data.find(34, k)  # the text's closing quote (an escaped one: json_text fails on the text)
                h = m + s.head_len
                f = len(data) - s.cfoot_len
                if m > k and h <= f and data[m:h] == s.head and data[f:] == s.cfoot:
                    text = data[k:m]
                    pad = data[h:f]
                    try:
                        ok = ((92 not in text or _ESCAPES(text) is not None) and text.decode().isprintable()
                              and (not pad.strip(_JSON_SPACE) if s.space else
                                   pad != b"" and 34 not in pad and 92 not in pad and pad.decode().isprintable()))
                    except UnicodeDecodeError:  # fmt: skip
                        ok = False
                    if ok and self.tracker.plain_delta(s.choice):
                        return
        self._items(self.decoder.feed(data))
        self.k = self.shape.ck if self.shape is not None and self.decoder.idle else 0

    def _items(self, items: list[SSEByteItem]) -> None:
        reader = self.reader
        tracker = self.tracker
        for name, payload in items:
            if type(payload) is bytes:
                s = self.shape
                if (s is not None and name == s.name
                        and shaped(payload, s.k, s.prefix, s.tail, s.tail_len, s.head, s.head_len, s.foot, s.foot_len,
                                   s.space)
                        and tracker.plain_delta(s.choice)):  # fmt: skip
                    continue
                value = reader.payload(name, payload)
                if type(value) is dict and tracker.takes_plain(value):
                    self._learn(name, payload, value)
            elif isinstance(payload, SSEComment):
                reader.comments()
            else:
                reader.payload(name, payload)  # (text from the text decoder, or None: cut at its limit)

    def http_error_type(self, response: Any) -> str | None:
        """The error type of a non-2xx answer: its status."""
        return str(getattr(response, "status_code", "")) or None

    def eof(self) -> None:
        decoder = self.decoder
        self._items(decoder.finish())
        self.reader.finish(decoder.unterminated)
        finish(self.call, "eof")

    # --- learning a plain delta's shape (rare: once per stream, per content block, or when the layout changes) ---
    def _may_learn(self) -> bool:
        """A few shapes per stream, then only as many as plain deltas pay for (n=2 choices interleaved change shape
        at every event: each learning costs a second ``json.loads``)."""
        if self.learns >= _LEARN_FREELY and self.tracker.deltas <= _DELTAS_PER_LEARN * self.learns:
            return False
        self.learns += 1
        return True

    def _learn(self, name: str | None, payload: bytes, value: dict[str, Any]) -> None:
        """``payload`` decoded to ``value``, which the tracker's flat path takes: its shape, from the string value of
        its ``content`` (Chat) or ``text`` key on. Why any bytes of that shape are a plain delta too: all of them
        but one string value (or two: ``_varying``) are the same, and of a string's contents (``json_text``) the
        flat path reads only that the text is not empty, which the shape asks of every value that varies (whichever
        of them is the text: another key of that name may come first). It reads strings by equality only where two
        plain deltas cannot differ (``type``), and a finish reason, usage or error that is a string makes the event
        no plain delta. No second ``json.loads``: it would cost a third of a stream's per-event savings."""
        old = self.shape
        if (old is not None and old.name == name and payload.startswith(old.prefix)
                and (old.tail is None or payload.endswith(old.tail))):  # fmt: skip
            return  # the shape is known: this text has a quote in it
        if not self._may_learn():
            return
        key = b'"content":' if self.tracker.surface == names.CHAT_COMPLETIONS else b'"text":'
        k = payload.find(key)
        if k < 0:
            return
        k += len(key)
        while payload[k : k + 1] in _JSON_SPACE_BYTES:  # (spaced JSON: `"content": "…"`)
            k += 1
        if payload[k : k + 1] != b'"':
            return
        k += 1
        j = payload.find(34, k)
        if j <= k or payload[j - 1] == 92:  # a text with a quote in it: the next plain delta is learned
            return
        prefix, tail = payload[:k], payload[j:]
        if len(prefix) + len(tail) > _MAX_SHAPE:
            return
        shape = Shape(name, self.tracker.last_choice, prefix, tail)
        if old is not None and old.tail is not None and old.prefix == prefix and old.name == name:
            shape = self._varying(old, tail) or shape
        self.shape = shape

    def _varying(self, old: Shape, tail: bytes) -> Shape | None:
        """The shape of two plain deltas whose bytes after the text differ in one place only, a string value (not a
        key) or the whitespace between two tokens (padding), or None (``_learn`` says why that is enough)."""
        a = old.tail
        assert a is not None  # (only a fixed tail is compared)
        b = tail
        if 92 in a or 92 in b:  # quotes are counted below: no escapes
            return None
        n = min(len(a), len(b))
        i = 0
        while i < n and a[i] == b[i]:
            i += 1
        e = 0
        while e < n - i and a[-1 - e] == b[-1 - e]:
            e += 1
        head, foot = a[:i], a[len(a) - e :]
        space = head.count(34) % 2 == 1  # the first quote closes the text: an odd count is outside any string
        if space:
            head, foot = head.rstrip(_JSON_SPACE), foot.lstrip(_JSON_SPACE)
        else:
            q = foot.find(34)
            head, foot = head[: head.rfind(34) + 1], foot[q:]  # from the value's opening to its closing quote
            if q < 0 or foot[1:].lstrip()[:1] == b":":  # (a key, not a value)
                return None
        for t in (a, b):
            mid = t[len(head) : len(t) - len(foot)]
            if (mid.strip(_JSON_SPACE) if space else 34 in mid or 10 in mid or 13 in mid):
                return None
        return Shape(old.name, old.choice, old.prefix, None, head, foot, space)


def inflater(coding: str) -> Any:
    """A chunk-by-chunk decoder for a ``Content-Encoding`` the client accepted (httpx and httpx2 advertise brotli and
    zstd only when their modules are installed), or None for identity. A coding no decoder here knows raises
    ``LookupError``: the stream is then left unobserved rather than read as events that never came."""
    codings = [part.strip().lower() for part in coding.split(",") if part.strip()]
    steps: list[Any] = []
    for name in reversed(codings):  # listed in the order they were applied
        if name in ("gzip", "x-gzip"):
            steps.append(zlib.decompressobj(zlib.MAX_WBITS | 16).decompress)
        elif name == "deflate":
            steps.append(_Deflate().decompress)
        elif name == "br":
            steps.append(_optional("brotli").Decompressor().process)
        elif name == "zstd":
            steps.append(_optional("zstandard").ZstdDecompressor().decompressobj().decompress)
        elif name != "identity":
            raise LookupError(name)
    if not steps:
        return None
    if len(steps) == 1:
        return steps[0]

    def chained(data: bytes) -> bytes:
        for step in steps:
            data = step(data)
        return data

    return chained


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped, or (wrongly, but commonly) raw."""

    __slots__ = ("inner",)

    def __init__(self) -> None:
        self.inner: Any = None

    def decompress(self, data: bytes) -> bytes:
        if self.inner is None:
            self.inner = zlib.decompressobj()
            try:
                return self.inner.decompress(data)  # type: ignore[no-any-return]
            except zlib.error:
                self.inner = zlib.decompressobj(-zlib.MAX_WBITS)
        return self.inner.decompress(data)  # type: ignore[no-any-return]


def _optional(module: str) -> Any:
    """An optional compression module (``brotli``, ``zstandard``): LookupError when it is not installed."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise LookupError(module) from exc
