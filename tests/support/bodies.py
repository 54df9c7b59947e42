"""Canned SSE bodies per surface and variant, and an httpx2.MockTransport handler that serves them.

Request headers choose the variant: ``x-variant`` (ok, cut, error, keepalive, drop, failed, incomplete),
``x-slow`` (seconds slept before the first delta), ``x-status`` (answer with that HTTP status, no stream),
``x-fail-first`` (the first N requests carrying the same ``x-key`` get a 500, then the stream).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2


def sse(obj: Any, event: str | None = None) -> bytes:
    return (f"event: {event}\n" if event else "").encode() + b"data: " + json.dumps(obj).encode() + b"\n\n"


KEEPALIVE = b": keepalive\n\n"
DELTA_MARK = "delta"  # frames whose index is in DELTA_INDEX get the slow pause before them

# --- Responses ---------------------------------------------------------------------------------------------
_RESP = {"id": "resp_1", "object": "response", "status": "in_progress", "output": [], "model": "gpt-test"}
_USAGE = {
    "input_tokens": 7,
    "output_tokens": 2,
    "total_tokens": 9,
    "input_tokens_details": {"cached_tokens": 3},
    "output_tokens_details": {"reasoning_tokens": 1},
}


def _rdelta(seq: int, text: str) -> bytes:
    return sse(
        {"type": "response.output_text.delta", "sequence_number": seq, "item_id": "m", "output_index": 0,
         "content_index": 0, "delta": text, "logprobs": []},
        "response.output_text.delta",
    )  # fmt: skip


def responses(variant: str) -> list[bytes]:
    item = {"id": "m", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    frames = [
        sse({"type": "response.created", "sequence_number": 0, "response": _RESP}, "response.created"),
        sse({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item},
            "response.output_item.added"),
        sse({"type": "response.content_part.added", "sequence_number": 2, "item_id": "m", "output_index": 0,
             "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}},
            "response.content_part.added"),
        _rdelta(3, "Hel"),
        _rdelta(4, "lo"),
    ]  # fmt: skip
    if variant == "error":
        return [*frames, sse({"type": "error", "code": "server_error", "message": "boom", "param": None,
                              "sequence_number": 5}, "error")]  # fmt: skip
    if variant == "cut":
        return frames
    status = {"failed": "failed", "incomplete": "incomplete"}.get(variant, "completed")
    done_item = {"id": "m", "type": "message", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "Hello", "annotations": []}]}  # fmt: skip
    final = {**_RESP, "status": status, "usage": _USAGE, "output": [done_item]}
    if status == "failed":
        final["error"] = {"code": "server_error", "message": "x"}
    if status == "incomplete":
        final["incomplete_details"] = {"reason": "max_output_tokens"}
    terminal = sse({"type": f"response.{status}", "sequence_number": 5, "response": final}, f"response.{status}")
    if variant == "keepalive":
        return [frames[0], KEEPALIVE, sse({"type": "ping"}, "ping"), *frames[1:4], KEEPALIVE, frames[4], terminal]
    return [*frames, terminal]


# --- Chat / Completions -------------------------------------------------------------------------------------
def _chunk(choices: list[Any], usage: Any = None, obj: str = "chat.completion.chunk") -> bytes:
    body: dict[str, Any] = {"id": "c1", "object": obj, "created": 0, "model": "gpt-test", "choices": choices}
    if usage is not None:
        body["usage"] = usage
    return sse(body)


_CHAT_USAGE = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


def chat(variant: str) -> list[bytes]:
    frames = [
        _chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]),
        _chunk([{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]),
        _chunk([{"index": 0, "delta": {"content": "lo"}, "finish_reason": None}]),
    ]
    if variant == "error":
        return [*frames, sse({"error": {"message": "boom", "type": "server_error", "code": "server_error"}})]
    if variant == "cut":
        return frames
    reason = "length" if variant == "incomplete" else "stop"
    tail = [
        _chunk([{"index": 0, "delta": {}, "finish_reason": reason}]),
        _chunk([], usage=_CHAT_USAGE),
        b"data: [DONE]\n\n",
    ]
    if variant == "keepalive":
        return [frames[0], KEEPALIVE, frames[1], KEEPALIVE, frames[2], *tail]
    return [*frames, *tail]


def completions(variant: str) -> list[bytes]:
    def c(text: str, reason: str | None = None) -> bytes:
        return _chunk([{"index": 0, "text": text, "finish_reason": reason, "logprobs": None}], obj="text_completion")

    frames = [c("Hel"), c("lo")]
    if variant == "error":
        return [*frames, sse({"error": {"message": "boom", "type": "server_error", "code": "server_error"}})]
    if variant == "cut":
        return frames
    tail = [c("", "length" if variant == "incomplete" else "stop"), _chunk([], _CHAT_USAGE, "text_completion"),
            b"data: [DONE]\n\n"]  # fmt: skip
    if variant == "keepalive":
        return [frames[0], KEEPALIVE, frames[1], *tail]
    return [*frames, *tail]


# --- Anthropic Messages -------------------------------------------------------------------------------------
def messages(variant: str) -> list[bytes]:
    start = sse({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-test",
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 4,
                  "cache_creation_input_tokens": 2}}}, "message_start")  # fmt: skip
    frames = [
        start,
        sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start"),
        sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
            "content_block_delta"),
        sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
            "content_block_delta"),
    ]  # fmt: skip
    if variant == "error":
        return [*frames, sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                             "error")]  # fmt: skip
    if variant == "cut":
        return frames
    reason = "max_tokens" if variant == "incomplete" else "end_turn"
    tail = [
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
             "usage": {"output_tokens": 2}}, "message_delta"),
        sse({"type": "message_stop"}, "message_stop"),
    ]  # fmt: skip
    if variant == "keepalive":
        return [frames[0], sse({"type": "ping"}, "ping"), frames[1], KEEPALIVE, frames[2], frames[3], *tail]
    return [*frames, *tail]


def frames_for(path: str, variant: str) -> list[bytes]:
    if path.endswith("/chat/completions"):
        return chat(variant)
    if path.endswith("/completions"):
        return completions(variant)
    if path.endswith("/messages"):
        return messages(variant)
    return responses(variant)


def first_delta_index(frames: list[bytes]) -> int:
    for i, f in enumerate(frames):
        if b'"Hel"' in f:
            return i
    return 0


def resume_filter(frames: list[bytes], after: int) -> list[bytes]:
    """What a server sends for ``starting_after=after``: the events with sequence_number > after."""
    out = []
    for f in frames:
        if f.startswith(b":"):
            continue
        data = json.loads(f.split(b"data: ", 1)[1])
        if data.get("sequence_number", -1) > after:
            out.append(f)
    return out


class Server:
    """The MockTransport handler (sync or async bodies)."""

    def __init__(self, *, is_async: bool, http: Any = httpx2) -> None:
        self.is_async = is_async
        self.http = http  # the SDK's client library (httpx2, or httpx for openai 2.x): its Response and errors
        self.requests: list[httpx2.Request] = []
        self.counts: dict[str, int] = {}

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        http = self.http
        self.requests.append(request)
        h = request.headers
        if "x-connect-error" in h:
            raise http.ConnectError("connection refused", request=request)
        key = h.get("x-key", "")
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.counts[key] <= int(h.get("x-fail-first", "0")):
            return http.Response(500, json={"error": {"message": "try again", "type": "server_error"}})
        if "x-status" in h:
            return http.Response(int(h["x-status"]), json={"error": {"message": "no", "type": "rate_limit_error",
                                                                        "code": "rate_limit_exceeded"}})  # fmt: skip
        variant = h.get("x-variant", "ok")
        frames = frames_for(request.url.path, "ok" if variant == "drop" else variant)
        after = request.url.params.get("starting_after")
        if after is not None:
            frames = resume_filter(frames, int(after))
        drop_at = len(frames) // 2 if variant == "drop" else None  # before the terminal event
        slow = float(h.get("x-slow", "0"))
        pause_at = first_delta_index(frames)
        headers = {"content-type": "text/event-stream", "x-request-id": "req_123", "request-id": "req_123"}
        args = (frames, drop_at, slow, pause_at, http.RemoteProtocolError)
        body = self._abody(*args) if self.is_async else self._body(*args)
        return http.Response(200, headers=headers, content=body)

    @staticmethod
    def _body(frames: list[bytes], drop_at: int | None, slow: float, pause_at: int, drop: Any) -> Iterator[bytes]:
        for i, f in enumerate(frames):
            if i == drop_at:
                raise drop("peer closed connection without sending complete message body")
            if slow and i == pause_at:
                time.sleep(slow)
            yield f

    @staticmethod
    async def _abody(
        frames: list[bytes], drop_at: int | None, slow: float, pause_at: int, drop: Any
    ) -> AsyncIterator[bytes]:
        for i, f in enumerate(frames):
            if i == drop_at:
                raise drop("peer closed connection without sending complete message body")
            if slow and i == pause_at:
                await asyncio.sleep(slow)
            yield f
