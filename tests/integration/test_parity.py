"""Live/offline parity ("the live path and check agree"): every capture of a supported surface in
``../shared/captures``, fed through the real SDK over ``httpx2.MockTransport`` with otelstream on, gives the same
report as ``otelstream check --json`` on the same file — outcome, events, deltas, usage, finish reasons, error type
and class, failure phase, the first output's event index, ``[DONE]``, sequence, response id and model — except where
the SDK itself stops early (``EARLY_STOP`` below, each with its reason; there the live report is compared with what
the SDK could see).

Keepalives too: a comment line is invisible to both SDKs' decoders, and the live path counts it where the body's
bytes pass, as ``check`` counts it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from otelstream import names
from otelstream.core.report import StreamReport
from tests.support.paths import CAPTURES
from tests.support.recording import RecordingListener
from tests.support.sdk_features import ANTHROPIC_HTTP, OPENAI_HTTP

SURFACE_DIRS = {
    "responses": names.RESPONSES,
    "chat-completions": names.CHAT_COMPLETIONS,
    "completions": names.COMPLETIONS,
    "messages": names.MESSAGES,
}  # anthropic/complete (legacy /v1/complete) is out of scope: check refuses it, no SDK surface streams it


def _captures() -> list[Path]:
    if not CAPTURES.is_dir():
        return []
    return sorted(
        p for p in CAPTURES.glob("*/*/*")
        if p.parent.name in SURFACE_DIRS and (p.suffix == ".sse" or p.name.endswith(".payloads.jsonl"))
    )  # fmt: skip


FILES = _captures()
IDS = [str(p.relative_to(CAPTURES)) for p in FILES]

# Where the SDK stops before the end of the body, so the live path cannot see what `check` sees: the reason, how
# many of check's events the caller never gets, and which report fields legitimately differ because of that. In every
# case the outcome (error) and the error type agree.
EARLY_STOP: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "groq/chat-completions/error-event-tool-use-failed.sse": (
        "openai raises APIError on the in-band {'error': …} chunk (_streaming.py:95-108) instead of yielding it",
        1, ()),
    "openrouter/chat-completions/keepalive-comments-error-chunk.sse": (
        "openai raises APIError on the chunk carrying 'error' (which also carries the usage), so that usage and the "
        "[DONE] after it are never read", 1, ("usage", "done_sentinel")),
    "openai/responses/error-then-failed.payloads.jsonl": (
        "the recorded Responses `error` event nests its details under 'error' (not the flat code/message shape), so "
        "openai raises APIError on it like on any payload with a truthy 'error' key (_streaming.py:95-108); the "
        "response.failed after it is never read", 2, ("finish_reasons", "sequence")),
}  # fmt: skip


def _body(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".payloads.jsonl"):
        # payload-only recording (no SSE framing kept): framed as the bare `data:` events `check` reads it as
        return b"".join(b"data: " + line + b"\n\n" for line in data.splitlines() if line.strip())
    return data


def _sidecar(path: Path) -> dict[str, Any]:
    side = path.parent / (path.name.split(".")[0] + ".json")
    return json.loads(side.read_text()) if side.exists() else {}


@pytest.fixture(scope="module")
def offline() -> dict[str, dict[str, Any]]:
    if not FILES:
        pytest.skip(f"real captures not available at {CAPTURES} (they live beside the repo in ../shared/captures)")
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from otelstream.cli import main; sys.exit(main())", "check", "--json",
         *map(str, FILES)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr
    reports = json.loads(out.stdout)
    return {str(Path(r["file"]).relative_to(CAPTURES)): r for r in reports}


def _handler(body: bytes, is_async: bool, lib: Any) -> Any:
    def handle(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "text/event-stream", "x-request-id": "req_parity", "request-id": "req_parity"}
        if is_async:

            async def agen() -> Any:
                yield body

            return lib.Response(200, headers=headers, content=agen())
        return lib.Response(200, headers=headers, content=iter([body]))

    return handle


def _open(surface: str, side: dict[str, Any], is_async: bool, body: bytes) -> tuple[Any, dict[str, Any]]:
    """The SDK call the capture was recorded from (model, n, stream_options as the sidecar says)."""
    lib = ANTHROPIC_HTTP if surface == names.MESSAGES else OPENAI_HTTP  # the SDK's client library
    transport = lib.MockTransport(_handler(body, is_async, lib))
    http: Any = lib.AsyncClient(transport=transport) if is_async else lib.Client(transport=transport)
    req = side.get("request") or {}
    model = req.get("model") or "model"
    if surface == names.MESSAGES:
        cls: Any = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        c = cls(api_key="k", base_url="http://mock.test", http_client=http, max_retries=0)
        return c.messages.create, {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "x"}],
                                   "stream": True}  # fmt: skip
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    c = cls(api_key="k", base_url="http://mock.test/v1", http_client=http, max_retries=0)
    extra: dict[str, Any] = {}
    if isinstance(req.get("stream_options"), dict):
        extra["stream_options"] = req["stream_options"]
    if isinstance(req.get("n"), int):
        extra["n"] = req["n"]
    url = side.get("request_url") or ""
    if surface == names.RESPONSES and "starting_after=" in url:
        rid = url.split("/responses/")[1].split("?")[0]
        after = int(url.split("starting_after=")[1].split("&")[0])
        return c.responses.retrieve, {"response_id": rid, "stream": True, "starting_after": after}
    if surface == names.RESPONSES:
        return c.responses.create, {"model": model, "input": "x", "stream": True}
    if surface == names.CHAT_COMPLETIONS:
        return c.chat.completions.create, {"model": model, "messages": [{"role": "user", "content": "x"}],
                                           "stream": True, **extra}  # fmt: skip
    return c.completions.create, {"model": model, "prompt": "x", "stream": True, **extra}


def live(rec: RecordingListener, path: Path, is_async: bool) -> tuple[StreamReport, int, BaseException | None]:
    surface = SURFACE_DIRS[path.parent.name]
    create, kwargs = _open(surface, _sidecar(path), is_async, _body(path))
    items = 0
    exc: BaseException | None = None
    if not is_async:
        try:
            with create(**kwargs) as stream:
                for _ in stream:
                    items += 1
        except Exception as e:
            exc = e
    else:

        async def go() -> tuple[int, BaseException | None]:
            n = 0
            try:
                stream = await create(**kwargs)
                async with stream:
                    async for _ in stream:
                        n += 1
            except Exception as e:
                return n, e
            return n, None

        items, exc = asyncio.run(go())
    return rec.one(), items, exc


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_live_matches_check(rec: RecordingListener, offline: dict[str, dict[str, Any]], path: Path,
                            is_async: bool) -> None:  # fmt: skip
    key = str(path.relative_to(CAPTURES))
    want = offline[key]
    r, items, exc = live(rec, path, is_async)
    got = {**r.to_json(), "file": want["file"]}
    reason, unseen, differ = EARLY_STOP.get(key, ("", 0, ()))
    compare = ["surface", "outcome", "finish_reasons", "error_type", "error_class", "failure_phase", "deltas",
               "first_output_event_index", "done_sentinel", "usage", "response_id", "response_model",
               "sequence"]  # fmt: skip
    compare = [k for k in compare if k not in differ]
    mismatch = {k: (got.get(k), want.get(k)) for k in compare if _norm(k, got.get(k)) != _norm(k, want.get(k))}
    assert not mismatch, f"live vs check: {mismatch} (caller got {items} items, {exc!r})"
    assert r.keepalives == want["keepalives"]
    assert r.events == want["events"] - unseen, reason or "no early stop expected"
    if unseen:
        assert isinstance(exc, openai.APIError) and r.outcome == names.ERROR, reason
    elif want["outcome"] != names.TRANSPORT_ERROR:
        assert exc is None, repr(exc)
    if r.outcome == names.TRANSPORT_ERROR:
        assert exc is not None  # the SDK raised (undecodable data): the caller saw the same break


def _norm(key: str, value: Any) -> Any:
    if key == "finish_reasons":
        return sorted(value or [])
    if key == "sequence" and isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "missing"}
    return value
