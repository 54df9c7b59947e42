"""A Bedrock runtime stand-in on 127.0.0.1: ``converse-stream`` and ``invoke-with-response-stream`` answered with
scripted ``application/vnd.amazon.eventstream`` bodies. It signs nothing (botocore does not check responses).

    with BedrockServer() as server:
        client = boto3.client("bedrock-runtime", **server.client_kwargs())
        for event in client.converse_stream(modelId="pause", messages=[...])["stream"]: ...

The model id chooses the script (``SCRIPTS``: completed, pause, reasoning, cut, error, throttled, max_tokens,
http_429, http_503, stall, reset), or a hand-made one registered with ``add`` (its returned name is the model id);
an ``x-script`` request header overrides it. On ``invoke-with-response-stream`` a family prefix picks the model
family's payload: ``anthropic.<script>`` (or no prefix) streams Anthropic Messages events in ``chunk.bytes``, the
last carrying ``amazon-bedrock-invocationMetrics``; ``meta.<script>`` streams Llama-shaped generation chunks.
``sized.<script>`` (either operation) sends the same body with a content-length instead of chunked framing.
Every response carries ``x-amzn-requestid`` (``REQUEST_ID``); HTTP errors carry ``x-amzn-ErrorType`` and a JSON
``{"message": ...}`` body, as the service sends them.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from tests.support.cloud_server import SCRIPT_HEADER, Pause, Reset, Script, ScriptedCloudServer, Stall, Step
from tests.support.eventstream import chunk, event, exception

REQUEST_ID: Final = "6f1c1e4e-0000-4000-8000-bedrock00001"
PAUSE_S: Final = 0.4
_PATH = re.compile(r"^/model/(?P<model>[^/]+)/(?P<op>converse-stream|invoke-with-response-stream)$")
_STREAM_HEADERS: Final = {"content-type": "application/vnd.amazon.eventstream", "x-amzn-requestid": REQUEST_ID}
_INVOKE_HEADERS: Final = {**_STREAM_HEADERS, "x-amzn-bedrock-content-type": "application/json"}


def http_error(status: int, error_type: str, message: str) -> Script:
    headers = {"content-type": "application/json", "x-amzn-requestid": REQUEST_ID,
               "x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"}  # fmt: skip
    return Script([json.dumps({"message": message}).encode()], status=status, headers=headers)


_HTTP_ERRORS: Final = {
    "http_429": (429, "ThrottlingException", "Too many requests, please wait before trying again."),
    "http_503": (503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
}


# --- ConverseStream ------------------------------------------------------------------------------------------
def _text(t: str, index: int = 0) -> bytes:
    return event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": t}})


def _stop(reason: str) -> list[bytes]:
    return [event("contentBlockStop", {"contentBlockIndex": 0}), event("messageStop", {"stopReason": reason})]


def _metadata(inp: int = 5, out: int = 3, cache_read: int = 0, cache_write: int = 0) -> bytes:
    u = {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out + cache_read + cache_write}
    if cache_read or cache_write:
        u |= {"cacheReadInputTokens": cache_read, "cacheWriteInputTokens": cache_write}
    return event("metadata", {"usage": u, "metrics": {"latencyMs": 321}})


def _converse(name: str) -> list[Step] | None:
    start = event("messageStart", {"role": "assistant"})
    hel, lo = _text("Hel"), _text("lo")
    body: dict[str, list[Step]] = {
        "completed": [start, hel, lo, *_stop("end_turn"), _metadata(5, 3, cache_read=2, cache_write=1)],
        "pause": [start, Pause(PAUSE_S), hel, lo, *_stop("end_turn"), _metadata()],
        "reasoning": [
            start,
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Hmm, "}}}),
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "greet."}}}),
            event("contentBlockDelta", {"contentBlockIndex": 0,
                                        "delta": {"reasoningContent": {"signature": "c2lnbmF0dXJl"}}}),
            event("contentBlockStop", {"contentBlockIndex": 0}),
            _text("Hello", 1),
            event("contentBlockStop", {"contentBlockIndex": 1}),
            event("messageStop", {"stopReason": "end_turn"}),
            _metadata(5, 9),
        ],
        "cut": [start, hel, lo],
        "error": [start, hel, exception("modelStreamErrorException", "The model stream failed.")],
        "throttled": [start, hel, exception("throttlingException", "Too many tokens, please wait.")],
        "max_tokens": [start, hel, lo, *_stop("max_tokens"), _metadata(5, 2)],
        "stall": [start, hel, Stall()],
        "reset": [start, hel, lo[: len(lo) // 2], Reset()],
    }  # fmt: skip
    return body.get(name)


# --- InvokeModelWithResponseStream ------------------------------------------------------------------------------
_METRICS: Final = {"amazon-bedrock-invocationMetrics": {"inputTokenCount": 5, "outputTokenCount": 3,
                                                        "invocationLatency": 321, "firstByteLatency": 120}}  # fmt: skip


def _anthropic(name: str) -> list[Step] | None:
    msg: dict[str, Any] = {"id": "msg_bdrk_01", "type": "message", "role": "assistant", "model": "claude-test",
                           "content": [], "stop_reason": None, "stop_sequence": None,
                           "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip
    start = [
        chunk({"type": "message_start", "message": msg}),
        chunk({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ]
    hel, lo = (chunk({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}})
               for t in ("Hel", "lo"))  # fmt: skip

    def end(reason: str) -> list[Step]:
        return [chunk({"type": "content_block_stop", "index": 0}),
                chunk({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
                       "usage": {"output_tokens": 3}}),
                chunk({"type": "message_stop", **_METRICS})]  # fmt: skip

    body: dict[str, list[Step]] = {
        "completed": [*start, hel, lo, *end("end_turn")],
        "pause": [*start, Pause(PAUSE_S), hel, lo, *end("end_turn")],
        "cut": [*start, hel, lo],
        "error": [*start, hel, exception("modelStreamErrorException", "The model stream failed.")],
        "throttled": [*start, hel, exception("throttlingException", "Too many tokens, please wait.")],
        "max_tokens": [*start, hel, lo, *end("max_tokens")],
        "stall": [*start, hel, Stall()],
        "reset": [*start, hel, lo[: len(lo) // 2], Reset()],
    }
    return body.get(name)


def _meta(name: str) -> list[Step] | None:
    def gen(t: str, n: int, stop: str | None = None) -> bytes:
        obj: dict[str, Any] = {"generation": t, "prompt_token_count": 12 if n == 1 else None,
                               "generation_token_count": n, "stop_reason": stop}  # fmt: skip
        return chunk({**obj, **_METRICS} if stop else obj)

    body: dict[str, list[Step]] = {
        "completed": [gen("Hel", 1), gen("lo", 2), gen("!", 3, "stop")],
        "cut": [gen("Hel", 1), gen("lo", 2)],
        "max_tokens": [gen("Hel", 1), gen("lo", 2, "length")],
    }
    return body.get(name)


SCRIPTS: Final = ("completed", "pause", "reasoning", "cut", "error", "throttled", "max_tokens", "http_429",
                  "http_503", "stall", "reset")  # fmt: skip


class BedrockServer(ScriptedCloudServer):
    def client_kwargs(self, **config: Any) -> dict[str, Any]:
        """Keyword arguments for ``boto3.client`` / aiobotocore ``create_client``: this endpoint, dummy credentials,
        retries off (``total_max_attempts=1``: ``max_attempts=1`` still allows one retry); ``config`` adds botocore
        ``Config`` options (e.g. ``read_timeout``)."""
        from botocore.config import Config

        return {"service_name": "bedrock-runtime", "endpoint_url": self.base_url, "region_name": "us-east-1",
                "aws_access_key_id": "x", "aws_secret_access_key": "x",
                "config": Config(retries={"total_max_attempts": 1}, **config)}  # fmt: skip

    def resolve(self, path: str, headers: dict[str, str]) -> tuple[str, Script]:
        match = _PATH.match(urlsplit(path).path)
        if match is None:
            return "", http_error(404, "UnknownOperationException", f"no route for {path}")
        name = headers.get(SCRIPT_HEADER) or unquote(match.group("model"))
        if name in self.custom:
            return name, self.custom[name]
        family, _, script = name.rpartition(".")
        if script in _HTTP_ERRORS:
            return name, http_error(*_HTTP_ERRORS[script])
        invoke = match.group("op") == "invoke-with-response-stream"
        sized = family == "sized"  # sized.<script>: the same body with a content-length, not chunked
        maker = (_meta if family == "meta" else _anthropic) if invoke else _converse
        steps = maker(script)
        if steps is None:
            return "", http_error(400, "ValidationException", f"no script {name!r} for {match.group('op')}")
        return name, Script(steps, headers=dict(_INVOKE_HEADERS if invoke else _STREAM_HEADERS), sized=sized)

    def add_stream(self, steps: list[Step], *, invoke: bool = False) -> str:
        """Register a hand-made 200 event-stream body (messages from ``eventstream``, pauses, breaks)."""
        return self.add(Script(steps, headers=dict(_INVOKE_HEADERS if invoke else _STREAM_HEADERS)))
