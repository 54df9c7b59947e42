"""The HTTP-level observer's reading of an answer's body: each chunk the caller pulls, its content coding undone
(``inflater``), is split into SSE events by ``core.sse.SSEByteDecoder`` and fed to the tracker (``Observed``: the
plain text deltas recognised on the bytes, anything else parsed as ``otelstream check`` parses a recording); at the
end of the body, what is left is judged by the protocol."""

from __future__ import annotations

import json
import zlib
from typing import Any

from otelstream import names
from otelstream.adapters.calls import Call, finish
from otelstream.core.sse import SSEByteDecoder


class Observed:
    """One stream seen at the HTTP client: its call (tracker, listener) and the decoding state of its body."""

    __slots__ = ("call", "chat", "comments", "decoder", "inflate", "messages", "stopped", "stopped_flagged",
                 "tracker", "wrapped")  # fmt: skip

    def __init__(self, call: Call) -> None:
        self.call = call
        self.tracker = call.tracker
        surface = call.tracker.surface
        self.messages = surface == names.MESSAGES
        self.chat = surface == names.CHAT_COMPLETIONS
        self.decoder = SSEByteDecoder()
        self.comments = 0
        self.stopped = False  # after `[DONE]` an OpenAI client stops reading: later events are not the answer
        self.stopped_flagged = False
        self.wrapped = False
        # the body's content coding undone before decoding (the caller's bytes stay as they are): None for identity
        self.inflate: Any = None

    # --- the hot path: one chunk the caller pulled ------------------------------------------------------------
    def chunk(self, data: bytes) -> None:
        if self.inflate is not None:
            data = self.inflate(data)
        decoder = self.decoder
        for name, payload in decoder.feed(data):
            self.event(name, payload)
        if decoder.comments != self.comments:
            self.tracker.keepalive(decoder.comments - self.comments)
            self.comments = decoder.comments

    def event(self, name: str | None, data: bytes | str | None) -> None:
        tracker = self.tracker
        if type(data) is bytes:
            # The plain text delta, recognised on the bytes (compact JSON, as the providers send it) and fed as the
            # one event the tracker's flat path reads: json.loads would cost three to five times the whole budget.
            # Keys and punctuation outside JSON strings are never escaped, so these byte patterns cannot come from
            # text inside a string. Anything else is parsed below.
            if self.messages:
                if name == "content_block_delta" and data.startswith(_MSG_HEAD) and data[-1] == 125:  # }
                    i = data.find(_MSG_TEXT, _MSG_HEAD_LEN) + _MSG_TEXT_LEN
                    if i > _MSG_TEXT_LEN and len(data) > i and data[i] != 34:  # a non-empty string
                        tracker.event(_MESSAGES_DELTA, name)
                        return
            elif self.chat and tracker._fast and tracker.last_choice == 0 and not self.stopped:
                # the tracker is steady (its flat path runs): one choice, index 0, non-empty content, no finish
                # reason, no usage object, no error
                i = data.find(_CHAT_TEXT) + _CHAT_TEXT_LEN
                if (
                    i > _CHAT_TEXT_LEN
                    and len(data) > i
                    and data[i] != 34  # a non-empty string
                    and data[0] == 123  # {
                    and data[-1] == 125  # }
                    and data.find(b'"finish_reason":"', i) < 0
                    and data.find(b'"usage":{') < 0
                    and data.find(b'"error"') < 0
                    and data.find(b'"index":', i) < 0  # one choice (the first index was before i)
                ):
                    tracker.event(_CHAT_DELTA, name)
                    return
        self._general(name, data)

    def _general(self, name: str | None, data: bytes | str | None) -> None:
        """Any other event, as ``otelstream check`` feeds a recording (the rules the SDKs apply to the wire)."""
        tracker = self.tracker
        if tracker.ended:
            return
        if self.stopped:
            if not self.stopped_flagged:
                self.stopped_flagged = True
                tracker.anomaly(names.ANOM_EVENT_AFTER_TERMINAL, "data after [DONE]")
            return
        if data is None:
            tracker.anomaly(names.ANOM_UNDECODABLE, "event larger than the decoder's limit (cut)")
            return
        if data[:6] in (b"[DONE]", "[DONE]"):
            tracker.done_sentinel()
            if not self.messages:
                self.stopped = True
            return
        if self.messages:
            if name == "ping":
                tracker.keepalive()
                return
            if name is None:
                tracker.anomaly(names.ANOM_UNKNOWN_EVENT, "event without an event: name (clients skip it)")
                return
            if not data and name != "error":
                return
        try:
            value = json.loads(data)
        except (ValueError, RecursionError):
            tracker.anomaly(names.ANOM_UNDECODABLE, "data is not JSON" + (f" (event {name!r})" if name else ""))
            return
        tracker.event(value, name)

    def eof(self) -> None:
        decoder = self.decoder
        for name, payload in decoder.finish():
            self.event(name, payload)
        if decoder.comments != self.comments:
            self.tracker.keepalive(decoder.comments - self.comments)
            self.comments = decoder.comments
        if decoder.unterminated:
            self.tracker.anomaly(names.ANOM_UNTERMINATED_EVENT, "the body ended inside an event (no blank line)")
        finish(self.call, "eof")


# the byte patterns of a plain text delta, and the events the flat path reads in their place (never mutated)
_MSG_HEAD = b'{"type":"content_block_delta","index"'
_MSG_HEAD_LEN = len(_MSG_HEAD)
_MSG_TEXT = b'"delta":{"type":"text_delta","text":"'
_MSG_TEXT_LEN = len(_MSG_TEXT)
_CHAT_TEXT = b'"choices":[{"index":0,"delta":{"content":"'
_CHAT_TEXT_LEN = len(_CHAT_TEXT)
# the events the flat path reads in place of the plain deltas recognised on the bytes (never mutated)
_MESSAGES_DELTA: dict[str, Any] = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "-"}}
_CHAT_DELTA: dict[str, Any] = {"choices": [{"index": 0, "delta": {"content": "-"}}]}


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
