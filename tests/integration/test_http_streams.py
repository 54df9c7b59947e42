"""The HTTP-level observer: LLM streams read with a plain ``httpx`` / ``httpx2`` client (no SDK), sync and async,
against the scripted server on 127.0.0.1. One report per stream with the outcome, TTFD, usage and request facts;
the caller's bytes untouched; SDK streams still reported once (by the SDK adapter); ``http_streams=False`` off."""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import httpx
import httpx2
import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otelstream import adapters, names, offline
from otelstream.adapters.http.decoding import inflater
from otelstream.core import client_rules
from otelstream.export import Pipeline
from tests.support import bodies
from tests.support.recording import RecordingListener
from tests.support.scripted_server import SCRIPT_HEADER, Pause, Reset, ScriptedServer, Step

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "secret prompt"}], "stream": True,
        "stream_options": {"include_usage": True}}  # fmt: skip
MESSAGES = {"model": "claude-test", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "stream": True}


@dataclass
class Got:
    body: bytes
    status: int
    exc: BaseException | None = None


@pytest.fixture(params=["httpx", "httpx2"])
def mod(request: pytest.FixtureRequest) -> ModuleType:
    return httpx if request.param == "httpx" else httpx2


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def is_async(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def read(mod: ModuleType, url: str, body: dict[str, Any] | bytes, key: str, is_async: bool, *, how: str = "stream",
         stop_after: int | None = None, timeout: float = 5.0) -> Got:  # fmt: skip
    """POST ``body`` and read the answer as a caller would: ``client.stream`` + ``iter_bytes`` (``how="stream"``),
    ``client.post`` (the client reads the body inside ``send``), or ``iter_lines`` with a break after
    ``stop_after`` lines then the context exit."""
    headers = {SCRIPT_HEADER: key}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    if not is_async:
        with mod.Client(timeout=timeout) as client:
            try:
                if how == "post":
                    r = client.post(url, content=content, headers=headers)
                    return Got(r.content, r.status_code)
                with client.stream("POST", url, content=content, headers=headers) as r:
                    if stop_after is not None:
                        for i, _ in enumerate(r.iter_lines()):
                            if i + 1 >= stop_after:
                                break
                        return Got(b"", r.status_code)
                    return Got(b"".join(r.iter_bytes()), r.status_code)
            except Exception as exc:
                return Got(b"", 0, exc)

    async def go() -> Got:
        async with mod.AsyncClient(timeout=timeout) as client:
            try:
                if how == "post":
                    r = await client.post(url, content=content, headers=headers)
                    return Got(r.content, r.status_code)
                async with client.stream("POST", url, content=content, headers=headers) as r:
                    if stop_after is not None:
                        i = 0
                        async for _ in r.aiter_lines():
                            i += 1
                            if i >= stop_after:
                                break
                        return Got(b"", r.status_code)
                    return Got(b"".join([b async for b in r.aiter_bytes()]), r.status_code)
            except Exception as exc:
                return Got(b"", 0, exc)

    return asyncio.run(go())


def chat(scripted: ScriptedServer, steps: list[Step], mod: ModuleType, is_async: bool, **kw: Any) -> Got:
    return read(mod, scripted.base_url + "/v1/chat/completions", CHAT, scripted.add(steps), is_async, **kw)



@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_compressed_chat_stream_is_decoded(rec: RecordingListener, scripted: ScriptedServer, mod: ModuleType,
                                           is_async: bool, coding: str) -> None:  # fmt: skip
    """A server that compresses its SSE (the clients ask for gzip and deflate by default): the observer undoes the
    coding chunk by chunk, the caller still reads the decoded answer."""
    frames = bodies.chat("ok")
    plain = b"".join(frames)
    packer = zlib.compressobj(wbits=zlib.MAX_WBITS | 16 if coding == "gzip" else zlib.MAX_WBITS)
    packed = [packer.compress(f) + packer.flush(zlib.Z_SYNC_FLUSH) for f in frames] + [packer.flush()]
    key = scripted.add([packed[0], Pause(0.2), *packed[1:]], headers={"content-encoding": coding})
    got = read(mod, scripted.base_url + "/v1/chat/completions", CHAT, key, is_async)
    assert got.exc is None and got.body == plain
    r = rec.one()
    assert r.outcome == names.COMPLETED and r.deltas == 2 and r.usage.output_tokens == 2
    assert r.time_to_first_delta_ns is not None and r.time_to_first_delta_ns >= 200_000_000


@pytest.mark.parametrize("how", ["stream", "post"])
def test_chat_stream_complete(rec: RecordingListener, scripted: ScriptedServer, mod: ModuleType, is_async: bool,
                              how: str) -> None:  # fmt: skip
    frames = bodies.chat("ok")
    got = chat(scripted, [frames[0], Pause(0.3), *frames[1:]], mod, is_async, how=how)
    assert got.exc is None and got.body == b"".join(frames)  # the caller's bytes, untouched
    r = rec.one()
    assert (r.surface, r.provider, r.request_model, r.outcome) == (names.CHAT_COMPLETIONS, "openai", "gpt-test",
                                                                   names.COMPLETED)  # fmt: skip
    assert r.deltas == 2 and r.done_sentinel and r.usage.input_tokens == 5 and r.usage.output_tokens == 2
    assert r.time_to_first_delta_ns is not None and r.time_to_first_delta_ns >= 300_000_000  # from the send
    assert r.server_address == "127.0.0.1" and r.request_id == "req_scripted"
    assert r.anomaly_counts == ()


def test_messages_stream_complete(rec: RecordingListener, scripted: ScriptedServer, mod: ModuleType,
                                  is_async: bool) -> None:  # fmt: skip
    frames = bodies.messages("ok")
    got = read(mod, scripted.base_url + "/anthropic/v1/messages", MESSAGES, scripted.add(frames), is_async)
    assert got.exc is None and got.body == b"".join(frames)
    r = rec.one()
    assert (r.surface, r.provider, r.outcome, r.finish_reasons) == (names.MESSAGES, "anthropic", names.COMPLETED,
                                                                    ("end_turn",))  # fmt: skip
    assert r.deltas == 2 and r.usage.output_tokens == 2


def test_cut_body(rec: RecordingListener, scripted: ScriptedServer, mod: ModuleType, is_async: bool) -> None:
    got = chat(scripted, bodies.chat("ok")[:3], mod, is_async)
    assert got.exc is None
    r = rec.one()
    assert r.outcome == names.CUT and r.deltas == 2


def test_connection_reset_mid_body(rec: RecordingListener, scripted: ScriptedServer, mod: ModuleType,
                                   is_async: bool) -> None:  # fmt: skip
    got = chat(scripted, [*bodies.chat("ok")[:2], Reset()], mod, is_async)
    assert got.exc is not None  # the client's own exception reaches the caller
    assert rec.one().outcome == names.TRANSPORT_ERROR


def test_in_band_error(rec: RecordingListener, scripted: ScriptedServer, mod: ModuleType, is_async: bool) -> None:
    frames = bodies.chat("ok")
    error = b'data: {"error": {"message": "boom", "type": "server_error", "code": "server_error"}}\n\n'
    chat(scripted, [*frames[:2], error], mod, is_async)
    r = rec.one()
    assert (r.outcome, r.error_type) == (names.ERROR, "server_error")


def test_http_500(rec: RecordingListener, scripted: ScriptedServer, mod: ModuleType, is_async: bool) -> None:
    key = scripted.add([b'{"error": {"message": "down"}}'], status=500, headers={"content-type": "application/json"})
    got = read(mod, scripted.base_url + "/v1/chat/completions", CHAT, key, is_async)
    assert got.status == 500
    r = rec.one()
    assert (r.outcome, r.error_type, r.request_id) == (names.HTTP_ERROR, "500", "req_scripted")


def test_connection_refused_is_http_error(rec: RecordingListener, mod: ModuleType, is_async: bool) -> None:
    got = read(mod, "http://127.0.0.1:9/v1/chat/completions", CHAT, "-", is_async)
    assert got.exc is not None
    assert rec.one().outcome == names.HTTP_ERROR


def test_caller_breaks_then_closes(rec: RecordingListener, scripted: ScriptedServer, mod: ModuleType,
                                   is_async: bool) -> None:  # fmt: skip
    frames = bodies.chat("ok")
    chat(scripted, [*frames[:2], Pause(0.2), *frames[2:]], mod, is_async, stop_after=2)
    r = rec.one()
    assert (r.outcome, r.abandoned_reason) == (names.ABANDONED, names.ABANDON_CLOSE)


def test_messages_closed_after_the_final_stop_reason_is_complete(rec: RecordingListener, scripted: ScriptedServer,
                                                                 mod: ModuleType) -> None:  # fmt: skip
    """A client that stops at the ``message_delta`` carrying the stop reason (litellm's sync streams) got the whole
    answer: only the empty ``message_stop`` is unread."""
    frames = bodies.messages("ok")
    lines = b"".join(frames[:-1]).count(b"\n")
    read(mod, scripted.base_url + "/v1/messages", MESSAGES, scripted.add([*frames[:-1], Pause(0.2), frames[-1]]),
         False, stop_after=lines)  # fmt: skip
    r = rec.one()
    assert (r.outcome, r.finish_reasons) == (names.COMPLETED, ("end_turn",))


def test_requests_that_are_not_llm_streams_are_left_alone(rec: RecordingListener, scripted: ScriptedServer,
                                                          mod: ModuleType) -> None:  # fmt: skip
    frames = bodies.chat("ok")
    for path, body in [("/v1/chat/completions", {**CHAT, "stream": False}), ("/v1/embeddings", CHAT),
                       ("/v1/chat/completions/x", CHAT)]:  # fmt: skip
        got = read(mod, scripted.base_url + path, body, scripted.add(frames), False)
        assert got.body == b"".join(frames)
    assert rec.reports == [] and rec.started == []


def test_unreadable_body_is_observed_from_its_event_stream_answer(rec: RecordingListener, scripted: ScriptedServer,
                                                                  mod: ModuleType) -> None:  # fmt: skip
    """A body the client streams (not in memory): whether it asked for a stream is unknown, the answer decides."""
    frames = bodies.chat("ok")
    key = scripted.add(frames)
    with mod.Client() as client:
        content = iter([json.dumps(CHAT).encode()])
        with client.stream("POST", scripted.base_url + "/v1/chat/completions", content=content,
                           headers={SCRIPT_HEADER: key}) as r:  # fmt: skip
            assert b"".join(r.iter_bytes()) == b"".join(frames)
    r = rec.one()
    assert r.outcome == names.COMPLETED and r.request_model is None


def test_off_switch(scripted: ScriptedServer, mod: ModuleType) -> None:
    listener = RecordingListener()
    adapters.install(listener, http_streams=False)
    try:
        chat(scripted, bodies.chat("ok"), mod, False)
    finally:
        adapters.uninstall()
    assert listener.reports == [] and listener.started == []


def test_sdk_streams_are_reported_once(rec: RecordingListener, scripted: ScriptedServer, is_async: bool) -> None:
    """The SDK adapter owns an SDK's stream: the HTTP observer underneath it reports nothing."""
    frames = bodies.chat("ok")
    key = scripted.add(frames)
    kw: dict[str, Any] = {"model": "gpt-test", "messages": [{"role": "user", "content": "x"}], "stream": True,
                          "stream_options": {"include_usage": True}, "extra_headers": {SCRIPT_HEADER: key}}  # fmt: skip
    if not is_async:
        c = openai.OpenAI(api_key="k", base_url=scripted.base_url + "/v1", max_retries=0)
        for _ in c.chat.completions.create(**kw):
            pass
    else:

        async def go() -> None:
            c = openai.AsyncOpenAI(api_key="k", base_url=scripted.base_url + "/v1", max_retries=0)
            async for _ in await c.chat.completions.create(**kw):
                pass

        asyncio.run(go())
    assert len(rec.started) == 1
    assert rec.one().outcome == names.COMPLETED


class _SeeSpan(httpx2.HTTPTransport):
    """Records the span current while the request is on the wire."""

    seen: ClassVar[list[Any]] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append(trace.get_current_span())
        return super().handle_request(request)


def test_span_is_the_stream_span_current_during_the_send(
    make_pipeline: Any, span_exporter: InMemorySpanExporter, scripted: ScriptedServer
) -> None:
    pipeline: Pipeline = make_pipeline()
    adapters.install(pipeline)
    try:
        key = scripted.add(bodies.chat("ok"))
        with (
            httpx2.Client(transport=_SeeSpan()) as client,
            client.stream(
                "POST", scripted.base_url + "/v1/chat/completions", json=CHAT, headers={SCRIPT_HEADER: key}
            ) as r,
        ):
            r.read()
    finally:
        adapters.uninstall()
    assert pipeline.flush()
    (span,) = span_exporter.get_finished_spans()
    assert span.name == "chat gpt-test" and span.kind == trace.SpanKind.CLIENT
    assert _SeeSpan.seen[-1].get_span_context().span_id == span.context.span_id
    attrs = dict(span.attributes or {})
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED and attrs[names.ATTR_SURFACE] == names.CHAT_COMPLETIONS
    assert "secret prompt" not in repr(attrs)


CAPTURED = ["openai/chat-completions/text-include-usage.sse", "openai/chat-completions/n2-interleaved-choices.sse",
            "vllm/chat-completions/text.sse", "openrouter/chat-completions/keepalive-comments-error-chunk.sse",
            "anthropic/messages/text.sse", "anthropic/messages/prompt-cache-read.sse",
            "anthropic/messages/thinking-then-tool-use.sse"]  # fmt: skip


@pytest.fixture
def capture_chunks(captures_dir: Path) -> Iterator[Any]:
    def load(name: str) -> tuple[bytes, list[bytes]]:
        raw = (captures_dir / name).read_bytes()
        blocks = [b + b"\n\n" for b in raw.split(b"\n\n") if b]  # one event per HTTP chunk, as servers send them
        return raw, blocks

    yield load


@pytest.mark.parametrize("name", CAPTURED)
def test_real_captures_agree_with_check(
    rec: RecordingListener,
    scripted: ScriptedServer,
    capture_chunks: Any,
    captures_dir: Path,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real providers' compact JSON (where the plain deltas are recognised on the bytes) gives what
    ``otelstream check`` gives for the same recording."""
    raw, blocks = capture_chunks(name)
    parsed = []
    decode = client_rules.decode
    monkeypatch.setattr(client_rules, "decode", lambda data, *a: (parsed.append(1), decode(data, *a))[1])
    messages = "/messages" in name
    body = MESSAGES if messages else {**CHAT, "stream_options": {"include_usage": b'"usage":{' in raw}}
    if "n2-" in name:
        body = {**body, "n": 2}
    path = "/v1/messages" if messages else "/v1/chat/completions"
    got = read(httpx2, scripted.base_url + path, body, scripted.add(blocks), False)
    assert got.body == b"".join(blocks)
    live = rec.one()
    if "text" in name or "cache" in name:  # the captures of plain single-choice text answers
        assert len(parsed) < live.events  # plain deltas were recognised on the bytes, without json.loads
    want = offline.analyse(str(captures_dir / name)).reports[0]
    assert (live.outcome, live.events, live.deltas, live.keepalives, live.usage, live.finish_reasons,
            live.error_type) == (want.outcome, want.events, want.deltas, want.keepalives, want.usage,
                                 want.finish_reasons, want.error_type)  # fmt: skip


def test_content_codings_the_observer_can_and_cannot_undo() -> None:
    assert inflater("identity") is None
    packed = zlib.compress(b"data: {}\n\n")
    assert inflater("deflate")(packed) == b"data: {}\n\n"
    both = inflater("deflate, gzip")  # applied in that order: undone gzip first
    gz = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)
    assert both(gz.compress(packed) + gz.flush()) == b"data: {}\n\n"
    with pytest.raises(LookupError):
        inflater("compress")
    try:
        import brotli  # noqa: F401
    except ImportError:
        with pytest.raises(LookupError):
            inflater("br")
