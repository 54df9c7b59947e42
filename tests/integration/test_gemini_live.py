"""google-genai's ``generate_content`` streams observed live: the real client, sync and async, on each transport it
streams with (sync: httpx2, its default, and httpx; async: aiohttp, its default when installed, and httpx2), against
the Gemini stand-in (tests/support/gemini_server.py). Every scripted fault gives exactly one report with the outcome,
error class, error type, abandonment reason, times and usage the fault asks for, and the caller sees exactly what it
sees uninstrumented."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from google import genai
from google.auth.credentials import Credentials
from google.genai import types

from otelstream import adapters, names
from otelstream.core.report import StreamReport
from tests.support.gemini_server import MODEL_VERSION, PAUSE_S, RESPONSE_ID, SCRIPTS, GeminiServer
from tests.support.instrumented import instrumented
from tests.support.recording import RecordingListener

READ_TIMEOUT_MS = 1000  # above the 0.4 s pause; the stall script waits longer (aiohttp: the total timeout)

# httpx2 is google-genai's default transport from its 2.x/3.x releases on; older ones (the oldest [google] allows:
# .ci/sdk-matrix.sh) stream over httpx alone and need not bring httpx2, nor aiohttp
HAS_HTTPX2 = importlib.util.find_spec("httpx2") is not None
if HAS_HTTPX2:
    import httpx2
needs_httpx2 = pytest.mark.skipif(not HAS_HTTPX2, reason="httpx2 is not installed (older google-genai releases)")
# releases before the ``httpx_client`` option (1.10 has none) stream with their default client only
CLIENT_OPTION = "httpx_client" in types.HttpOptions.model_fields


def _library(cls: type) -> str:
    """The HTTP library (``httpx`` or ``httpx2``) a client class derives its ``Client`` / ``AsyncClient`` from."""
    for base in cls.__mro__:
        root = base.__module__.partition(".")[0]
        if base.__name__ in ("Client", "AsyncClient") and root in ("httpx", "httpx2"):
            return root
    raise LookupError(cls)


def _default_transports() -> tuple[str, str]:
    """What the installed release streams with when the caller passes no client: (sync, async)."""
    api = genai.Client(api_key="x")._api_client
    use_aiohttp = getattr(api, "_use_aiohttp", None)
    sync = _library(type(api._httpx_client))
    return sync, "aiohttp" if use_aiohttp is not None and use_aiohttp() else _library(type(api._async_httpx_client))


def _alternate(default: str) -> list[str]:
    """The other httpx library than the default one, where the release takes a client of it (``httpx_client``)."""
    other = "httpx" if default == "httpx2" else "httpx2" if HAS_HTTPX2 else "httpx"
    return [other] if CLIENT_OPTION and other != default else []


DEFAULT_SYNC, DEFAULT_ASYNC = _default_transports()
SYNC_DEFAULT, ASYNC_DEFAULT = f"sync-{DEFAULT_SYNC}", f"async-{DEFAULT_ASYNC}"
# each way the release streams: its default transports, and a client of the other library passed in (on 3.x: sync
# httpx2 and httpx, async aiohttp and httpx2)
MODES = [SYNC_DEFAULT, *(f"sync-{t}" for t in _alternate(DEFAULT_SYNC)),
         ASYNC_DEFAULT, *(f"async-{t}" for t in _alternate(DEFAULT_ASYNC))]  # fmt: skip


@dataclass(frozen=True)
class Expect:
    outcome: str
    error_class: str | None = None
    error_type: str | None = None
    finish: tuple[str, ...] = ()
    usage: tuple[int | None, int | None] = (None, None)  # input, output tokens
    deltas: int = 0
    named: bool = True  # the stream's response id and model version were read (not for an http_error)


EXPECT: dict[str, Expect] = {
    "completed": Expect(names.COMPLETED, finish=("STOP",), usage=(5, 3), deltas=3),
    "pause": Expect(names.COMPLETED, finish=("STOP",), usage=(5, 3), deltas=3),
    "reasoning": Expect(names.COMPLETED, finish=("STOP",), usage=(5, 9), deltas=4),
    "cut": Expect(names.CUT, names.EC_CUT, deltas=2),
    "error": Expect(names.ERROR, names.EC_SERVER_ERROR, "INTERNAL", deltas=1),
    "error_exhausted": Expect(names.ERROR, names.EC_RATE_LIMITED, "RESOURCE_EXHAUSTED", deltas=1),
    "max_tokens": Expect(names.INCOMPLETE, finish=("MAX_TOKENS",), usage=(5, 2), deltas=2),
    # usageMetadata omits a count that is zero (proto3 JSON): no candidate, 0 tokens came out
    "safety": Expect(names.INCOMPLETE, finish=("SAFETY",), usage=(6, 0)),
    "http_429": Expect(names.HTTP_ERROR, names.EC_RATE_LIMITED, "RESOURCE_EXHAUSTED", named=False),
    "http_503": Expect(names.HTTP_ERROR, names.EC_OVERLOADED, "UNAVAILABLE", named=False),
    "stall": Expect(names.TRANSPORT_ERROR, names.EC_TIMEOUT, deltas=1),
    "reset": Expect(names.TRANSPORT_ERROR, names.EC_CONNECTION, deltas=1),
}


def test_every_script_has_an_expectation() -> None:
    assert set(EXPECT) == set(SCRIPTS)


@pytest.fixture(scope="module")
def server() -> Iterator[GeminiServer]:
    with GeminiServer() as s:
        yield s


def client_for(server: GeminiServer, mode: str) -> genai.Client:
    transport = mode.split("-", 1)[1]
    is_async = mode.startswith("async")
    kw: dict[str, Any] = {"base_url": server.base_url, "timeout": READ_TIMEOUT_MS}
    if transport != (DEFAULT_ASYNC if is_async else DEFAULT_SYNC):
        lib: Any = httpx if transport == "httpx" else httpx2
        client_cls = lib.AsyncClient if is_async else lib.Client
        kw["httpx_async_client" if is_async else "httpx_client"] = client_cls(timeout=READ_TIMEOUT_MS / 1000)
    client = genai.Client(api_key="x", http_options=types.HttpOptions(**kw))
    if is_async and hasattr(client._api_client, "_use_aiohttp"):
        assert client._api_client._use_aiohttp() == (transport == "aiohttp")  # the transport this case is about
    return client


@dataclass
class Seen:
    """What the caller received: each item (as JSON, without the transport's headers), the exception, the kind of
    object the stream was."""

    items: list[Any]
    error: tuple[type[BaseException], str] | None
    kind: str


def _item(chunk: types.GenerateContentResponse) -> Any:
    return chunk.model_dump(mode="json", exclude={"sdk_http_response"}, exclude_none=True)


def consume(client: genai.Client, mode: str, model: str, chat: bool = False) -> Seen:
    if mode.startswith("sync"):
        stream = (client.chats.create(model=model).send_message_stream("hi") if chat
                  else client.models.generate_content_stream(model=model, contents="hi"))  # fmt: skip
        kind = "generator" if inspect.isgenerator(stream) else type(stream).__name__
        items: list[Any] = []
        try:
            for chunk in stream:
                items.append(_item(chunk))
        except Exception as exc:  # the script's failure: compared and judged by the caller
            return Seen(items, (type(exc), str(exc)), kind)
        return Seen(items, None, kind)

    async def go() -> Seen:
        if chat:
            stream = await client.aio.chats.create(model=model).send_message_stream("hi")
        else:
            stream = await client.aio.models.generate_content_stream(model=model, contents="hi")
        kind = "async generator" if inspect.isasyncgen(stream) else type(stream).__name__
        items: list[Any] = []
        try:
            async for chunk in stream:
                items.append(_item(chunk))
        except Exception as exc:
            return Seen(items, (type(exc), str(exc)), kind)
        return Seen(items, None, kind)

    return asyncio.run(go())


def check(report: StreamReport, script: str, expect: Expect, seen: Seen) -> None:
    assert (report.surface, report.provider) == (names.GENERATE_CONTENT, names.PROVIDER_GEMINI)
    assert (report.request_model, report.server_address) == (script, "127.0.0.1")
    assert report.outcome == expect.outcome, report
    assert report.error_class == expect.error_class, report
    assert report.error_type == expect.error_type, report
    assert report.abandoned_reason is None
    assert report.finish_reasons == expect.finish
    assert (report.usage.input_tokens, report.usage.output_tokens) == expect.usage
    assert report.deltas == expect.deltas
    assert report.unobserved == ()
    assert report.retries == 0
    named = (report.response_id, report.response_model)
    # older google-genai releases (1.10) drop a Gemini API chunk's responseId (only their Vertex reader keeps it):
    # an id the caller never received is unknown, not guessed
    response_id = RESPONSE_ID if any(item.get("response_id") for item in seen.items) else None
    assert named == ((response_id, MODEL_VERSION) if expect.named else (None, None))
    if expect.deltas:
        assert report.time_to_first_delta_ns is not None and report.time_to_first_event_ns is not None
    else:
        assert report.time_to_first_delta_ns is None


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("mode", MODES)
def test_every_fault_one_report(server: GeminiServer, rec: RecordingListener, mode: str, script: str) -> None:
    seen = consume(client_for(server, mode), mode, script)
    expect = EXPECT[script]
    if expect.outcome == names.ERROR and seen.error is None:
        # google-genai before 1.50 drops an in-band error object (the caller gets an empty chunk, then the end): what
        # the caller saw is a stream that ended without its finish, and its error's type was never received
        assert script.startswith("error") and seen.items and not seen.items[-1].get("candidates")
        expect = Expect(names.CUT, names.EC_CUT, deltas=expect.deltas)
    check(rec.one(), script, expect, seen)


@pytest.mark.parametrize("mode", MODES)
def test_pause_before_output_is_the_wait(server: GeminiServer, rec: RecordingListener, mode: str) -> None:
    """TTFD counts from the request's send (on the first pull, not the call) to the first delta the caller got."""
    consume(client_for(server, mode), mode, "completed")  # the first stream pays the imports: not this one's time
    rec.clear()
    consume(client_for(server, mode), mode, "pause")  # a client per event loop (an async httpx2 client is bound)
    report = rec.one()
    ttfd, ttfo = report.time_to_first_delta_ns, report.time_to_first_output_ns
    assert ttfd is not None and ttfo is not None
    assert PAUSE_S * 1e9 <= ttfd <= (PAUSE_S + 0.5) * 1e9, ttfd
    assert ttfo == ttfd
    assert report.wait_ns >= PAUSE_S * 1e9


@pytest.mark.parametrize("mode", MODES)
def test_reasoning_first_ttfd_before_ttfo(server: GeminiServer, rec: RecordingListener, mode: str) -> None:
    consume(client_for(server, mode), mode, "reasoning")
    report = rec.one()
    assert report.time_to_first_delta_ns is not None and report.time_to_first_output_ns is not None
    assert report.time_to_first_delta_ns < report.time_to_first_output_ns
    assert report.first_output_event == 2  # two thought chunks before the answer's first text
    assert report.usage.reasoning_output_tokens == 7


@pytest.mark.parametrize("mode", MODES)
def test_break_then_close(server: GeminiServer, rec: RecordingListener, mode: str) -> None:
    client = client_for(server, mode)
    if mode.startswith("sync"):
        stream = client.models.generate_content_stream(model="completed", contents="hi")
        for _ in stream:
            break
        assert rec.reports == []
        stream.close()
    else:

        async def go() -> None:
            stream = await client.aio.models.generate_content_stream(model="completed", contents="hi")
            async for _ in stream:
                break
            assert rec.reports == []
            await stream.aclose()

        asyncio.run(go())
    report = rec.one()
    assert (report.outcome, report.abandoned_reason, report.deltas) == (names.ABANDONED, names.ABANDON_CLOSE, 1)


@pytest.mark.parametrize("mode", MODES)
def test_dropped_stream_is_gc(server: GeminiServer, rec: RecordingListener, mode: str) -> None:
    client = client_for(server, mode)
    if mode.startswith("sync"):
        stream = client.models.generate_content_stream(model="completed", contents="hi")
        next(stream)
        del stream
    else:

        async def go() -> None:
            stream = await client.aio.models.generate_content_stream(model="completed", contents="hi")
            await stream.__anext__()
            del stream
            gc.collect()
            await asyncio.sleep(0)  # the loop's finaliser of the dropped async generator runs its aclose() here

        asyncio.run(go())
    gc.collect()
    report = rec.one()
    assert (report.outcome, report.abandoned_reason) == (names.ABANDONED, names.ABANDON_GC)


@pytest.mark.parametrize("mode", [m for m in MODES if m.startswith("async")])
def test_task_cancel(server: GeminiServer, rec: RecordingListener, mode: str) -> None:
    client = client_for(server, mode)
    got_one = asyncio.Event

    async def go() -> None:
        first = got_one()

        async def consume_stall() -> None:
            async for _ in await client.aio.models.generate_content_stream(model="stall", contents="hi"):
                first.set()

        task = asyncio.ensure_future(consume_stall())
        await first.wait()  # the first chunk reached the caller; the stall follows
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    report = rec.one()
    assert (report.outcome, report.abandoned_reason, report.deltas) == (names.ABANDONED, names.ABANDON_CANCEL, 1)


@pytest.mark.parametrize("mode", MODES)
def test_chat_stream_is_one_report(server: GeminiServer, rec: RecordingListener, mode: str) -> None:
    """A chat's stream runs the models' stream method inside it: one report, for the stream the caller holds."""
    seen = consume(client_for(server, mode), mode, "max_tokens", chat=True)
    assert seen.error is None and len(seen.items) == 2
    report = rec.one()
    assert (report.outcome, report.finish_reasons, report.request_model) == (
        names.INCOMPLETE, ("MAX_TOKENS",), "max_tokens")  # fmt: skip


def test_chat_break_then_close_is_close(server: GeminiServer, rec: RecordingListener) -> None:
    client = client_for(server, SYNC_DEFAULT)  # held: a collected client closes its HTTP client
    stream = client.chats.create(model="completed").send_message_stream("hi")
    next(stream)
    stream.close()
    assert (rec.one().outcome, rec.one().abandoned_reason) == (names.ABANDONED, names.ABANDON_CLOSE)


def test_unpulled_stream_sends_nothing_and_reports_nothing(server: GeminiServer, rec: RecordingListener) -> None:
    before = len(server.requests)
    client = client_for(server, SYNC_DEFAULT)
    stream = client.models.generate_content_stream(model="completed", contents="hi")
    del stream
    gc.collect()
    assert len(server.requests) == before and rec.reports == []


class _StaticToken(Credentials):  # type: ignore[misc]
    def refresh(self, request: Any) -> None:
        self.token = "x"


def test_vertex_client_is_vertex(server: GeminiServer, rec: RecordingListener) -> None:
    opts = types.HttpOptions(base_url=server.base_url, headers={"x-script": "completed"})
    client = genai.Client(vertexai=True, project="p", location="us-central1", credentials=_StaticToken(),
                          http_options=opts)  # fmt: skip
    list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"))
    report = rec.one()
    assert (report.provider, report.request_model, report.outcome) == (
        names.PROVIDER_VERTEX, "gemini-2.5-flash", names.COMPLETED)  # fmt: skip
    assert report.time_to_first_delta_ns is not None and report.unobserved == ()


@pytest.mark.parametrize("mode", MODES)
def test_caller_sees_what_it_sees_uninstrumented(server: GeminiServer, mode: str) -> None:
    adapters.uninstall()
    bare = {script: consume(client_for(server, mode), mode, script) for script in SCRIPTS}
    listener = RecordingListener()
    adapters.install(listener)
    try:
        observed = {script: consume(client_for(server, mode), mode, script) for script in SCRIPTS}
    finally:
        adapters.uninstall()
    assert observed == bare
    assert {seen.kind for seen in observed.values()} == {"generator" if mode.startswith("sync") else "async generator"}
    assert len(listener.reports) == len(SCRIPTS)


# --- the HTTP-level observer ------------------------------------------------------------------------------------
@pytest.mark.parametrize("lib", [pytest.param("httpx2", marks=needs_httpx2), "httpx"])
def test_plain_http_client_gemini_stream(server: GeminiServer, rec: RecordingListener, lib: str) -> None:
    """A client that is not google-genai (litellm's Gemini provider) streaming ``:streamGenerateContent?alt=sse``:
    read by the HTTP-level observer from its bytes (CRLF line ends), the model from the path."""
    url = server.base_url + "/v1beta/models/reasoning:streamGenerateContent?alt=sse"
    http: Any = httpx2 if lib == "httpx2" else httpx
    with http.Client() as c, c.stream("POST", url, json={"contents": [{"parts": [{"text": "hi"}]}]}) as r:
        for _ in r.iter_bytes():
            pass
    report = rec.one()
    assert (report.surface, report.provider, report.request_model, report.outcome) == (
        names.GENERATE_CONTENT, names.PROVIDER_GEMINI, "reasoning", names.COMPLETED)  # fmt: skip
    assert (report.usage.input_tokens, report.usage.output_tokens, report.deltas) == (5, 9, 4)
    assert report.time_to_first_delta_ns is not None and report.time_to_first_output_ns is not None
    assert report.time_to_first_delta_ns < report.time_to_first_output_ns


def test_plain_http_client_gemini_http_error(server: GeminiServer, rec: RecordingListener) -> None:
    url = server.base_url + "/v1beta/models/http_429:streamGenerateContent?alt=sse"
    with httpx.Client() as c, c.stream("POST", url, json={"contents": []}) as r:
        r.read()
    report = rec.one()
    assert (report.outcome, report.error_class) == (names.HTTP_ERROR, names.EC_RATE_LIMITED)


def test_google_genai_request_is_not_taken_by_the_http_observer(server: GeminiServer, rec: RecordingListener) -> None:
    """google-genai names itself (x-goog-api-client): even when its adapter does not observe a stream, the HTTP-level
    observer leaves it alone (one report per stream, never two)."""
    url = server.base_url + "/v1beta/models/completed:streamGenerateContent?alt=sse"
    headers = {names.GOOGLE_SDK_HEADER: "google-genai-sdk/3.6.1 gl-python/3.11.7"}
    with httpx.Client() as c, c.stream("POST", url, json={}, headers=headers) as r:
        for _ in r.iter_bytes():
            pass
    assert rec.reports == []


# --- end to end -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [SYNC_DEFAULT, ASYNC_DEFAULT])
def test_instrument_one_span_one_series(server: GeminiServer, mode: str) -> None:
    with instrumented() as pipe:
        seen = consume(client_for(server, mode), mode, "completed")
        assert seen.error is None and len(seen.items) == 3
        spans = [s for s in pipe.finished() if (s.attributes or {}).get(names.ATTR_PROVIDER_NAME)]
        assert len(spans) == 1
        attrs = spans[0].attributes or {}
        assert attrs[names.ATTR_PROVIDER_NAME] == names.PROVIDER_GEMINI
        assert pipe.streams_total(surface=names.GENERATE_CONTENT, outcome=names.COMPLETED) == 1
        assert pipe.streams_total() == 1


def test_instrument_patches_and_uninstrument_removes() -> None:
    import wrapt
    from google.genai import chats, errors, models

    points = [(models.Models, "generate_content_stream"), (models.AsyncModels, "generate_content_stream"),
              (chats.Chat, "send_message_stream"), (chats.AsyncChat, "send_message_stream"),
              (errors.APIError, "raise_for_response")]  # fmt: skip
    with instrumented():
        assert all(isinstance(cls.__dict__[name], wrapt.FunctionWrapper) for cls, name in points)
    assert not any(isinstance(cls.__dict__[name], wrapt.FunctionWrapper) for cls, name in points)


@pytest.mark.skipif(DEFAULT_ASYNC != "aiohttp", reason="this release does not stream over aiohttp")
def test_aiohttp_connection_refused_before_headers_is_http_error_connection(rec: RecordingListener) -> None:
    """aiohttp's own errors carry their class: a connection refused before any answer is http_error, connection."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    opts = types.HttpOptions(base_url=f"http://127.0.0.1:{port}", timeout=READ_TIMEOUT_MS,
                             retry_options=types.HttpRetryOptions(attempts=1))  # fmt: skip
    client = genai.Client(api_key="x", http_options=opts)
    assert client._api_client._use_aiohttp()
    assert consume(client, "async-aiohttp", "completed").error is not None
    report = rec.one()
    assert (report.outcome, report.error_class) == (names.HTTP_ERROR, names.EC_CONNECTION)


def test_no_send_seen_leaves_the_times_from_the_send_unknown(rec: RecordingListener,
                                                            caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """A transport no send hook sees (google-auth's requests session, releases before 1.10): the answer arrives with
    t_request still the call's start, so the times from the send are unknown, never the start's guess; one WARNING."""
    from otelstream.adapters import _patch
    from otelstream.adapters.calls import begin_call, finish
    from otelstream.adapters.google import wire

    call = begin_call(wire.start_of(None, "m", None), scopes=(_patch.GOOGLE,))
    assert call is not None
    with caplog.at_level("WARNING", logger="otelstream"):
        wire.answered(call, None)
    finish(call, "eof")
    report = rec.one()
    assert set(_patch.T_REQUEST_MEASURES) <= set(report.unobserved)
    assert report.time_to_first_event_ns is None and report.time_to_first_delta_ns is None
    assert [r for r in caplog.records if "transport's send" in r.getMessage()]


@pytest.mark.parametrize("mode", MODES)
def test_span_current_at_the_send_only(server: GeminiServer, rec: RecordingListener, mode: str) -> None:
    """The stream's span is current during the pull that sends the request (an HTTP client span nests under it),
    and only then: once the answer is accepted the later pulls run under the caller's own context."""
    consume(client_for(server, mode), mode, "completed")
    assert (rec.activations, rec.active) == (1, 0)


@pytest.mark.skipif(DEFAULT_SYNC != "httpx2", reason="this release does not stream over httpx2")
def test_http_client_span_nests_under_the_stream_span(server: GeminiServer) -> None:
    from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor

    with instrumented() as pipe:
        instrumentor = HTTPX2ClientInstrumentor()
        instrumentor.instrument(tracer_provider=pipe.tracer_provider)
        try:
            consume(client_for(server, SYNC_DEFAULT), SYNC_DEFAULT, "completed")
        finally:
            instrumentor.uninstrument()
        spans = pipe.finished()
    [stream] = [s for s in spans if (s.attributes or {}).get(names.ATTR_PROVIDER_NAME)]
    http_spans = [s for s in spans if s is not stream]
    assert len(http_spans) == 1 and http_spans[0].parent is not None
    assert http_spans[0].parent.span_id == stream.context.span_id
