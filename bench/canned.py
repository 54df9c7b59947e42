"""Canned SSE bodies for the four streamed surfaces, shaped like the real APIs (one frame per event).

Nothing here imports the SDKs, so the runner can import it cheaply. ``frames(surface, deltas)`` returns a list of
``bytes`` frames; ``expected_events(surface, deltas)`` how many parsed events the caller gets.

``generate_content`` is Gemini's SSE (one ``GenerateContentResponse`` per ``data:`` line, CRLF line ends, as the
service sends it) and ``converse`` Bedrock's ConverseStream body: binary event-stream messages (prelude, headers,
payload, two CRC32s), as the service frames them; botocore reads the frames, not lines.

``http-chat`` and ``http-messages`` are the HTTP-level observer's surfaces: the Chat and Messages bodies read through
a plain HTTP client that no SDK owns (``bench/workers/clients.py``), every ``data:`` payload but ``[DONE]`` parsed by the
caller, Messages' ping included.
"""

from __future__ import annotations

import json
import struct
import zlib

HTTP_SURFACES = ("http-chat", "http-messages")
CLOUD_SURFACES = ("generate_content", "converse")  # google-genai and boto3 / aiobotocore
SURFACES = ("responses", "chat", "completions", "messages", *CLOUD_SURFACES, *HTTP_SURFACES)
MODEL_OA = "gpt-4o-mini"
MODEL_AN = "claude-sonnet-4-5"
MODEL_GEMINI = "gemini-2.5-flash"
MODEL_BEDROCK = "anthropic.claude-3-5-haiku-20241022-v1:0"
# the words are short and fixed: every configuration parses the same bytes
_WORDS = (" The", " stream", " arrived", " in", " small", " pieces", ",", " each", " a", " token", ".")


def sse(obj: dict, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _responses(n: int) -> list[bytes]:
    rid = "resp_bench0001"
    base = {"id": rid, "object": "response", "created_at": 1_750_000_000, "model": MODEL_OA, "output": [],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}  # fmt: skip
    seq = 0
    out = []

    def add(obj: dict) -> None:
        nonlocal seq
        obj["sequence_number"] = seq
        seq += 1
        out.append(sse(obj, obj["type"]))

    add({"type": "response.created", "response": {**base, "status": "in_progress"}})
    add({"type": "response.in_progress", "response": {**base, "status": "in_progress"}})
    item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    add({"type": "response.output_item.added", "output_index": 0, "item": item})
    add({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "part": {"type": "output_text", "text": "", "annotations": []}})  # fmt: skip
    text = []
    for i in range(n):
        w = _WORDS[i % len(_WORDS)]
        text.append(w)
        add({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
             "delta": w, "logprobs": []})  # fmt: skip
    full = "".join(text)
    add({"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "text": full, "logprobs": []})  # fmt: skip
    part = {"type": "output_text", "text": full, "annotations": []}
    add({"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "part": part})  # fmt: skip
    done_item = {**item, "status": "completed", "content": [part]}
    add({"type": "response.output_item.done", "output_index": 0, "item": done_item})
    usage = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": n,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12 + n}  # fmt: skip
    add({"type": "response.completed", "response": {**base, "status": "completed", "output": [done_item],
                                                      "usage": usage}})  # fmt: skip
    return out


def _chat(n: int) -> list[bytes]:
    def chunk(choices: list, usage: dict | None = None) -> bytes:
        return sse({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_750_000_000,
                    "model": MODEL_OA, "system_fingerprint": "fp_bench", "choices": choices, "usage": usage})  # fmt: skip

    out = [chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}])]
    for i in range(n):
        out.append(chunk([{"index": 0, "delta": {"content": _WORDS[i % len(_WORDS)]}, "logprobs": None,
                           "finish_reason": None}]))  # fmt: skip
    out.append(chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]))
    out.append(chunk([], {"prompt_tokens": 12, "completion_tokens": n, "total_tokens": 12 + n}))
    out.append(b"data: [DONE]\n\n")
    return out


def _completions(n: int) -> list[bytes]:
    def chunk(choices: list, usage: dict | None = None) -> bytes:
        return sse({"id": "cmpl-bench", "object": "text_completion", "created": 1_750_000_000,
                    "model": "gpt-3.5-turbo-instruct", "choices": choices, "usage": usage})  # fmt: skip

    out = []
    for i in range(n):
        out.append(chunk([{"index": 0, "text": _WORDS[i % len(_WORDS)], "logprobs": None, "finish_reason": None}]))
    out.append(chunk([{"index": 0, "text": "", "logprobs": None, "finish_reason": "stop"}]))
    out.append(chunk([], {"prompt_tokens": 12, "completion_tokens": n, "total_tokens": 12 + n}))
    out.append(b"data: [DONE]\n\n")
    return out


def _messages(n: int) -> list[bytes]:
    out = [
        sse({"type": "message_start", "message": {"id": "msg_bench", "type": "message", "role": "assistant",
             "content": [], "model": MODEL_AN, "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": 12, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                       "output_tokens": 1}}}, "message_start"),
        sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start"),
        sse({"type": "ping"}, "ping"),
    ]
    for i in range(n):
        out.append(sse({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": _WORDS[i % len(_WORDS)]}}, "content_block_delta"))  # fmt: skip
    out.append(sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    out.append(sse({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": n}}, "message_delta"))  # fmt: skip
    out.append(sse({"type": "message_stop"}, "message_stop"))
    return out


def _gemini(n: int) -> list[bytes]:
    """A text answer as Gemini streams it: one chunk per delta, the last one with the finish reason and the usage
    (Gemini sends no separate terminal event: the finish reason is on the last chunk that has text)."""

    def chunk(text: str, last: bool = False) -> bytes:
        cand: dict = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
        obj: dict = {"candidates": [cand], "modelVersion": MODEL_GEMINI, "responseId": "bench-gemini-0001"}
        if last:
            cand["finishReason"] = "STOP"
            obj["usageMetadata"] = {"promptTokenCount": 12, "candidatesTokenCount": n, "totalTokenCount": 12 + n,
                                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 12}]}  # fmt: skip
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\r\n\r\n"

    return [chunk(_WORDS[i % len(_WORDS)], last=i == n - 1) for i in range(n)]


def _es_header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw  # 7: a string value


def es_frame(event_type: str, payload: dict) -> bytes:
    """One event-stream message as Bedrock frames it: prelude (total length, headers length, CRC32 of the 8 bytes),
    the string headers, the JSON payload, the CRC32 of everything before it."""
    headers = (_es_header(":event-type", event_type) + _es_header(":content-type", "application/json")
               + _es_header(":message-type", "event"))  # fmt: skip
    body = json.dumps(payload, separators=(",", ":")).encode()
    prelude = struct.pack(">II", 12 + len(headers) + len(body) + 4, len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return head + struct.pack(">I", zlib.crc32(head))


def _converse(n: int) -> list[bytes]:
    # the service sends a "p" padding field in every event (its length varies); a fixed one keeps the bytes fixed
    pad = "abcdefghijklmnopqrstuvwxyzABCDEF"
    out = [es_frame("messageStart", {"p": pad, "role": "assistant"})]
    for i in range(n):
        out.append(es_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": _WORDS[i % len(_WORDS)]},
                                                  "p": pad}))  # fmt: skip
    out.append(es_frame("contentBlockStop", {"contentBlockIndex": 0, "p": pad}))
    out.append(es_frame("messageStop", {"p": pad, "stopReason": "end_turn"}))
    out.append(es_frame("metadata", {"metrics": {"latencyMs": 420}, "p": pad,
                                     "usage": {"inputTokens": 12, "outputTokens": n, "totalTokens": 12 + n}}))  # fmt: skip
    return out


_BUILDERS = {"responses": _responses, "chat": _chat, "completions": _completions, "messages": _messages,
             "generate_content": _gemini, "converse": _converse,
             "http-chat": _chat, "http-messages": _messages}  # fmt: skip


def frames(surface: str, deltas: int) -> list[bytes]:
    return _BUILDERS[surface](deltas)


def expected_events(surface: str, deltas: int) -> int:
    """Parsed events the caller gets: from an SDK, ping and [DONE] are not events; from a plain client, ping is."""
    return {"responses": deltas + 9, "chat": deltas + 3, "completions": deltas + 2, "messages": deltas + 5,
            "generate_content": deltas, "converse": deltas + 4,
            "http-chat": deltas + 3, "http-messages": deltas + 6}[surface]  # fmt: skip
