"""Equivalence (hypothesis over scripted streams): with otelstream on (the SDK's own generators, observed from
outside) the caller receives the same items in the same order and the same exception (type and message) as with it
off — random event sequences drawn from each surface's real frames plus keepalive comments, `event: ping`, in-band
errors, `[DONE]`, unknown and undecodable events; random chunking; clean EOF, a dropped connection or a read
timeout at the end; a consumer that reads all or breaks early and closes. Then the same with an exception injected
into every otelstream hook (tracker.event, tracker.end, tracker.keepalive, tracker.done_sentinel, every listener
method): it never reaches the caller."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelstream import _guard, adapters, names
from otelstream.core.tracker import StreamTracker
from tests.support import bodies
from tests.support.recording import RecordingListener
from tests.support.sdk_features import ANTHROPIC_HTTP, OPENAI_HTTP
from tests.support.surfaces import SSE_SURFACES

MSGS: Any = [{"role": "user", "content": "x"}]
EXTRA = [
    bodies.KEEPALIVE,
    b'event: ping\ndata: {"type": "ping"}\n\n',
    b"data: [DONE]\n\n",
    b"data: {oops\n\n",
    b'event: mystery\ndata: {"type": "response.future_thing", "sequence_number": 99}\n\n',
]


def _pool(surface: str) -> list[bytes]:
    frames = {
        names.RESPONSES: bodies.responses,
        names.CHAT_COMPLETIONS: bodies.chat,
        names.COMPLETIONS: bodies.completions,
        names.MESSAGES: bodies.messages,
    }[surface]
    pool = list(dict.fromkeys([*frames("ok"), *frames("error"), *frames("incomplete")]))
    if surface == names.RESPONSES:
        pool += bodies.responses("failed")[-1:]
    return pool + EXTRA


POOLS = {s: _pool(s) for s in SSE_SURFACES}


@dataclass(frozen=True)
class Case:
    surface: str
    frames: tuple[bytes, ...]
    end: str  # eof / drop / timeout
    split_seed: int
    stop_after: int | None  # the consumer breaks after this many items and closes
    is_async: bool


@st.composite
def cases(draw: st.DrawFn) -> Case:
    surface = draw(st.sampled_from(SSE_SURFACES))
    pool = POOLS[surface]
    idx = draw(st.lists(st.integers(0, len(pool) - 1), max_size=14))
    return Case(
        surface=surface,
        frames=tuple(pool[i] for i in idx),
        end=draw(st.sampled_from(["eof", "eof", "drop", "timeout"])),
        split_seed=draw(st.integers(0, 2**16)),
        stop_after=draw(st.one_of(st.none(), st.integers(0, 6))),
        is_async=draw(st.booleans()),
    )


def _chunks(case: Case) -> list[bytes]:
    body = b"".join(case.frames)
    rng = random.Random(case.split_seed)
    out, i = [], 0
    while i < len(body):
        n = rng.choice((1, 5, 40, 300, 5000))
        out.append(body[i : i + n])
        i += n
    return out


def _lib(case: Case) -> Any:
    """The SDK's HTTP client library (openai 2.x: httpx)."""
    return ANTHROPIC_HTTP if case.surface == names.MESSAGES else OPENAI_HTTP


def _fail(case: Case, request: httpx2.Request) -> BaseException:
    if case.end == "drop":
        return _lib(case).RemoteProtocolError("peer closed connection without sending complete message body")
    return _lib(case).ReadTimeout("timed out", request=request)


def _handler(case: Case) -> Any:
    def handle(request: httpx2.Request) -> httpx2.Response:
        chunks = _chunks(case)

        def body() -> Iterator[bytes]:
            yield from chunks
            if case.end != "eof":
                raise _fail(case, request)

        async def abody() -> AsyncIterator[bytes]:
            for c in chunks:
                yield c
            if case.end != "eof":
                raise _fail(case, request)

        headers = {"content-type": "text/event-stream", "x-request-id": "req_eq"}
        return _lib(case).Response(200, headers=headers, content=abody() if case.is_async else body())

    return handle


def _create(case: Case) -> Any:
    lib = _lib(case)
    transport = lib.MockTransport(_handler(case))
    http: Any = lib.AsyncClient(transport=transport) if case.is_async else lib.Client(transport=transport)
    if case.surface == names.MESSAGES:
        cls: Any = anthropic.AsyncAnthropic if case.is_async else anthropic.Anthropic
        c = cls(api_key="k", base_url="http://mock.test", http_client=http, max_retries=0)
        return lambda: c.messages.create(model="m", max_tokens=5, messages=MSGS, stream=True)
    cls = openai.AsyncOpenAI if case.is_async else openai.OpenAI
    c = cls(api_key="k", base_url="http://mock.test/v1", http_client=http, max_retries=0)
    if case.surface == names.RESPONSES:
        return lambda: c.responses.create(model="m", input="x", stream=True)
    if case.surface == names.CHAT_COMPLETIONS:
        return lambda: c.chat.completions.create(model="m", messages=MSGS, stream=True,
                                                 stream_options={"include_usage": True})  # fmt: skip
    return lambda: c.completions.create(model="m", prompt="x", stream=True)


@dataclass(frozen=True)
class Seen:
    items: tuple[str, ...]
    error: tuple[str, str] | None


def consume(case: Case) -> Seen:
    create = _create(case)
    items: list[str] = []
    if not case.is_async:
        try:
            stream = create()
            for item in stream:
                items.append(repr(item))
                if case.stop_after is not None and len(items) >= case.stop_after:
                    break
            stream.close()
        except Exception as exc:
            return Seen(tuple(items), (type(exc).__qualname__, str(exc)))
        return Seen(tuple(items), None)

    async def go() -> Seen:
        try:
            stream = await create()
            async for item in stream:
                items.append(repr(item))
                if case.stop_after is not None and len(items) >= case.stop_after:
                    break
            await stream.close()
        except Exception as exc:
            return Seen(tuple(items), (type(exc).__qualname__, str(exc)))
        return Seen(tuple(items), None)

    return asyncio.run(go())


def on_off(case: Case, listener: RecordingListener) -> tuple[Seen, Seen]:
    adapters.uninstall()
    off = consume(case)
    adapters.install(listener)
    try:
        on = consume(case)
    finally:
        adapters.uninstall()
    return off, on


SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip


@SETTINGS
@given(case=cases())
def test_caller_sees_the_same_with_otelstream_on(case: Case) -> None:
    listener = RecordingListener()
    off, on = on_off(case, listener)
    assert on == off
    assert len(listener.reports) == 1  # exactly one report, whatever the end (a close ends it at once)
    r = listener.reports[0]
    assert r.outcome in names.OUTCOMES
    if off.error is None and case.stop_after is None:
        assert r.outcome not in (names.TRANSPORT_ERROR, names.ABANDONED), r


def _boom(*args: object, **kwargs: object) -> Any:
    raise RuntimeError("otelstream hook failure (injected)")


class FailAfterStart(RecordingListener):
    """The span starts fine; then every other listener method raises (activate, deactivate, stream_finished)."""

    def stream_started(self, start: Any, tracker: Any, parent: object | None = None) -> object:
        self.fail = False
        try:
            return super().stream_started(start, tracker, parent)
        finally:
            self.fail = True


@pytest.mark.allow_internal_errors
@pytest.mark.parametrize("broken", ["tracker", "listener_start", "listener_rest"])
@settings(SETTINGS, max_examples=60)
@given(case=cases())
def test_failing_hooks_never_reach_the_caller(broken: str, case: Case) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTELSTREAM_RAISE_INTERNAL_ERRORS", "0")
        adapters.uninstall()
        off = consume(case)
        listener = RecordingListener()
        if broken == "tracker":
            for hook in ("event", "conclude", "end", "keepalive", "done_sentinel"):  # the ends: conclude
                mp.setattr(StreamTracker, hook, _boom)
        elif broken == "listener_start":
            listener.fail = True
        else:
            listener = FailAfterStart()
        _guard.errors.clear()
        adapters.install(listener)
        try:
            on = consume(case)
        finally:
            adapters.uninstall()
        assert on == off
        assert _guard.errors  # the failures happened, and were recorded instead of raised
    _guard.errors.clear()
