"""A Gemini stand-in on 127.0.0.1: ``:streamGenerateContent?alt=sse`` answered with scripted SSE bodies.

    with GeminiServer() as server:
        client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=server.base_url))
        for chunk in client.models.generate_content_stream(model="pause", contents="hi"): ...

The model name chooses the script (``SCRIPTS``: completed, pause, reasoning, cut, error, error_exhausted,
max_tokens, safety, http_429, http_503, stall, reset), or a hand-made one registered with ``add`` (its returned name
is the model); an ``x-script`` request header overrides the model (``HttpOptions(headers=...)``). Paths served: the
Gemini API's ``/v1beta/models/{model}:streamGenerateContent`` and Vertex AI's
``/v1beta1|v1/projects/{p}/locations/{l}/publishers/google/models/{model}:streamGenerateContent``; anything else
is a 404 in Google's error shape. Bodies are one ``GenerateContentResponse`` JSON per ``data:`` line, CRLF line
ends, as the service sends them; HTTP errors are gRPC-style ``{"error": {"code", "message", "status"}}``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from tests.support.cloud_server import SCRIPT_HEADER, Pause, Reset, Script, ScriptedCloudServer, Stall, Step

MODEL_VERSION: Final = "gemini-test-001"
RESPONSE_ID: Final = "gemini-resp-1"
PAUSE_S: Final = 0.4
_PATH = re.compile(r"^/(?:v1beta|v1beta1|v1)/(?:projects/[^/]+/locations/[^/]+/publishers/google/)?models/"
                   r"(?P<model>[^/:]+):streamGenerateContent$")  # fmt: skip
_SSE_HEADERS: Final = {"content-type": "text/event-stream", "content-disposition": "attachment",
                       "x-goog-request-id": "gemini-req-1"}  # fmt: skip
_JSON_HEADERS: Final = {"content-type": "application/json; charset=UTF-8"}


def sse(obj: Any) -> bytes:
    """One ``data:`` object with the service's CRLF line ends."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\r\n\r\n"


def chunk(parts: list[dict[str, Any]] | None = None, finish: str | None = None, usage: dict[str, int] | None = None,
          **extra: Any) -> bytes:  # fmt: skip
    """A ``GenerateContentResponse`` with one candidate (``parts``), its finish reason and usage when given."""
    body: dict[str, Any] = {}
    if parts is not None or finish is not None:
        cand: dict[str, Any] = {"content": {"parts": parts or [], "role": "model"}, "index": 0}
        if finish is not None:
            cand["finishReason"] = finish
        body["candidates"] = [cand]
    if usage is not None:
        body["usageMetadata"] = usage
    body.update(extra)
    body.setdefault("modelVersion", MODEL_VERSION)
    body.setdefault("responseId", RESPONSE_ID)
    return sse(body)


def usage(prompt: int = 5, candidates: int = 3, thoughts: int = 0, cached: int = 0) -> dict[str, int]:
    u = {"promptTokenCount": prompt, "candidatesTokenCount": candidates,
         "totalTokenCount": prompt + candidates + thoughts}  # fmt: skip
    if thoughts:
        u["thoughtsTokenCount"] = thoughts
    if cached:
        u["cachedContentTokenCount"] = cached
    return u


def http_error(status: int, code_status: str, message: str) -> Script:
    body = json.dumps({"error": {"code": status, "message": message, "status": code_status}}, indent=2).encode()
    return Script([body + b"\n"], status=status, headers=dict(_JSON_HEADERS))


def text(t: str) -> dict[str, Any]:
    return {"text": t}


def _stream(steps: list[Step]) -> Script:
    return Script(steps, headers=dict(_SSE_HEADERS))


def _scripts() -> dict[str, Script]:
    hel, lo = chunk([text("Hel")]), chunk([text("lo")])
    done = chunk([text("!")], "STOP", usage(5, 3, cached=2))
    thought = {"text": "Thinking about it.", "thought": True}
    return {
        "completed": _stream([hel, lo, done]),
        "pause": _stream([Pause(PAUSE_S), hel, lo, done]),
        "reasoning": _stream([
            chunk([thought]),
            chunk([{"text": " Still thinking.", "thought": True}]),
            chunk([{"text": "Hello", "thoughtSignature": "c2lnbmF0dXJl"}]),
            chunk([text("!")], "STOP", usage(5, 2, thoughts=7)),
        ]),
        "cut": _stream([hel, lo]),
        "error": _stream([hel, sse({"error": {"code": 500, "message": "An internal error has occurred.",
                                              "status": "INTERNAL"}})]),
        "error_exhausted": _stream([hel, sse({"error": {"code": 429, "message": "Resource has been exhausted.",
                                                        "status": "RESOURCE_EXHAUSTED"}})]),
        "max_tokens": _stream([hel, chunk([text("lo")], "MAX_TOKENS", usage(5, 2))]),
        "safety": _stream([sse({"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]},
            "usageMetadata": {"promptTokenCount": 6, "totalTokenCount": 6},
            "modelVersion": MODEL_VERSION, "responseId": RESPONSE_ID})]),
        "http_429": http_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
        "http_503": http_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
        "stall": _stream([hel, Stall()]),
        "reset": _stream([hel, lo[: len(lo) // 2], Reset()]),
    }  # fmt: skip


SCRIPTS: Final = tuple(_scripts())


class GeminiServer(ScriptedCloudServer):
    def __init__(self) -> None:
        super().__init__()
        self.scripts = _scripts()

    def resolve(self, path: str, headers: dict[str, str]) -> tuple[str, Script]:
        match = _PATH.match(unquote(urlsplit(path).path))
        name = headers.get(SCRIPT_HEADER) or (match.group("model") if match else "")
        script = self.custom.get(name) or self.scripts.get(name)
        if match is None or script is None:
            return "", http_error(404, "NOT_FOUND", f"no script for {path}")
        return name, script

    def add_stream(self, steps: list[Step]) -> str:
        """Register a hand-made 200 SSE body (bytes from ``sse``/``chunk``, pauses, breaks); returns its name."""
        return self.add(_stream(steps))
