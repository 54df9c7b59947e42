"""API preservation, instrumented vs not, per surface: the same probe runs with otelstream off and on and must
observe exactly the same thing — the SDK's own classes (``isinstance(s, openai.Stream)`` / ``anthropic.Stream``),
``with`` / ``async with`` returning the stream itself, ``close()`` / ``aclose()``, ``.response``, the helpers
(``get_final_response``, ``get_final_completion``, ``text_stream``, ``get_final_message``, ``until_done``),
``with_raw_response…parse()``, ``with_streaming_response`` (including the caller-parsed ``iter_lines`` path), and the
Responses WebSocket session lanes. With otelstream on, each probe must also have produced its reports."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from otelstream import adapters
from otelstream.demo.provider import FakeProvider
from tests.support.clients import anthropic_client, async_anthropic_client, async_openai_client, openai_client
from tests.support.recording import RecordingListener
from tests.support.sdk_features import OPENAI_HTTP, lacking

MSGS: Any = [{"role": "user", "content": "x"}]

Probe = Callable[[], dict[str, Any]]


def _stream_facts(s: Any, sdk: Any, is_async: bool) -> dict[str, Any]:
    return {
        "type": type(s).__qualname__,
        "isinstance": isinstance(s, sdk.AsyncStream if is_async else sdk.Stream),
        "response": (type(s.response).__qualname__, s.response.status_code, s.response.headers.get("content-type")),
        "is_httpx2": isinstance(s.response, httpx2.Response),  # openai 2.x: False with and without otelstream
    }


# --- raw streams ---------------------------------------------------------------------------------------------
RAW_SYNC: dict[str, Callable[[], Any]] = {
    "responses.create": lambda: openai_client().responses.create(model="gpt-test", input="x", stream=True),
    "beta.responses.create": lambda: openai_client().beta.responses.create(model="gpt-test", input="x", stream=True),
    "responses.retrieve": lambda: openai_client().responses.retrieve("resp_1", stream=True, starting_after=3),
    "chat.create": lambda: openai_client().chat.completions.create(model="gpt-test", messages=MSGS, stream=True),
    "completions.create": lambda: openai_client().completions.create(model="gpt-test", prompt="x", stream=True),
    "messages.create": lambda: anthropic_client().messages.create(model="c", max_tokens=5, messages=MSGS,
                                                                  stream=True),
    "beta.messages.create": lambda: anthropic_client().beta.messages.create(model="c", max_tokens=5, messages=MSGS,
                                                                            stream=True),
}  # fmt: skip
RAW_ASYNC: dict[str, Callable[[], Any]] = {
    "responses.create": lambda: async_openai_client().responses.create(model="gpt-test", input="x", stream=True),
    "beta.responses.create": lambda: async_openai_client().beta.responses.create(model="gpt-test", input="x",
                                                                                 stream=True),
    "responses.retrieve": lambda: async_openai_client().responses.retrieve("resp_1", stream=True, starting_after=3),
    "chat.create": lambda: async_openai_client().chat.completions.create(model="gpt-test", messages=MSGS,
                                                                         stream=True),
    "completions.create": lambda: async_openai_client().completions.create(model="gpt-test", prompt="x",
                                                                           stream=True),
    "messages.create": lambda: async_anthropic_client().messages.create(model="c", max_tokens=5, messages=MSGS,
                                                                        stream=True),
    "beta.messages.create": lambda: async_anthropic_client().beta.messages.create(model="c", max_tokens=5,
                                                                                  messages=MSGS, stream=True),
}  # fmt: skip


def _sdk(name: str) -> Any:
    return anthropic if "messages" in name else openai


def probe_raw_sync(name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    s = RAW_SYNC[name]()
    out["facts"] = _stream_facts(s, _sdk(name), False)
    with s as entered:
        out["enter_is_self"] = entered is s
        out["items"] = [repr(e) for e in entered]
    out["closed_after_with"] = s.response.is_closed
    s2 = RAW_SYNC[name]()
    out["first"] = repr(next(iter(s2)))
    s2.close()
    out["closed_after_close"] = s2.response.is_closed
    return out


def probe_raw_async(name: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        s = await RAW_ASYNC[name]()
        out["facts"] = _stream_facts(s, _sdk(name), True)
        async with s as entered:
            out["enter_is_self"] = entered is s
            out["items"] = [repr(e) async for e in entered]
        out["closed_after_with"] = s.response.is_closed
        s2 = await RAW_ASYNC[name]()
        out["first"] = repr(await s2.__anext__())
        await s2.close()
        out["closed_after_close"] = s2.response.is_closed
        if hasattr(s2, "aclose"):
            s3 = await RAW_ASYNC[name]()
            await s3.aclose()
            out["closed_after_aclose"] = s3.response.is_closed
        return out

    return asyncio.run(go())


# --- helpers, raw and streaming responses ----------------------------------------------------------------------
def probe_helpers_sync() -> dict[str, Any]:
    out: dict[str, Any] = {}
    oa, an = openai_client(), anthropic_client()
    with oa.responses.stream(model="gpt-test", input="x") as s:
        out["responses.stream.type"] = type(s).__qualname__
        out["responses.stream.events"] = [e.type for e in s]
        out["responses.stream.final"] = repr(s.get_final_response())
    with oa.responses.stream(model="gpt-test", input="x") as s:
        s.until_done()
        out["responses.stream.until_done"] = repr(s.get_final_response())
    with oa.responses.stream(response_id="resp_1", starting_after=3) as s:
        out["responses.stream.resume"] = [e.sequence_number for e in s]
    with oa.chat.completions.stream(model="gpt-test", messages=MSGS) as c:
        out["chat.stream.events"] = [e.type for e in c]
        out["chat.stream.final"] = repr(c.get_final_completion())
    with an.messages.stream(model="c", max_tokens=5, messages=MSGS) as m:
        out["messages.stream.type"] = type(m).__qualname__
        out["messages.stream.text"] = list(m.text_stream)
        out["messages.stream.final"] = repr(m.get_final_message())
        out["messages.stream.request_id"] = m.request_id
    with an.messages.stream(model="c", max_tokens=5, messages=MSGS) as m:
        out["messages.stream.final_text"] = m.get_final_text()
    with an.beta.messages.stream(model="c", max_tokens=5, messages=MSGS) as m:
        m.until_done()
        out["beta.messages.stream.final"] = repr(m.get_final_message())
    raw = oa.responses.with_raw_response.create(model="gpt-test", input="x", stream=True)
    out["raw.headers"] = raw.headers.get("x-request-id")
    parsed = raw.parse()
    out["raw.parse"] = (type(parsed).__qualname__, isinstance(parsed, openai.Stream), [e.type for e in parsed])
    araw = an.messages.with_raw_response.create(model="c", max_tokens=5, messages=MSGS, stream=True)
    aparsed = araw.parse()
    out["anthropic.raw.parse"] = (isinstance(aparsed, anthropic.Stream), [e.type for e in aparsed])
    with oa.chat.completions.with_streaming_response.create(model="gpt-test", messages=MSGS, stream=True) as resp:
        chunks = resp.parse()
        out["streaming.parse"] = (isinstance(chunks, openai.Stream), len(list(chunks)))
    with oa.chat.completions.with_streaming_response.create(model="gpt-test", messages=MSGS, stream=True) as resp:
        out["streaming.iter_lines"] = list(resp.iter_lines())  # the caller parses SSE: untouched, not observed
    with an.messages.with_streaming_response.create(model="c", max_tokens=5, messages=MSGS, stream=True) as resp:
        out["anthropic.streaming.parse"] = [e.type for e in resp.parse()]
    return out


def probe_helpers_async() -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        oa, an = async_openai_client(), async_anthropic_client()
        async with oa.responses.stream(model="gpt-test", input="x") as s:
            out["responses.stream.events"] = [e.type async for e in s]
            out["responses.stream.final"] = repr(await s.get_final_response())
        async with oa.chat.completions.stream(model="gpt-test", messages=MSGS) as c:
            await c.until_done()
            out["chat.stream.final"] = repr(await c.get_final_completion())
        async with an.messages.stream(model="c", max_tokens=5, messages=MSGS) as m:
            out["messages.stream.text"] = [t async for t in m.text_stream]
            out["messages.stream.final"] = repr(await m.get_final_message())
        raw = await oa.responses.with_raw_response.create(model="gpt-test", input="x", stream=True)
        parsed = raw.parse()  # LegacyAPIResponse.parse() is synchronous on the async client too
        out["raw.parse"] = (isinstance(parsed, openai.AsyncStream), [e.type async for e in parsed])
        async with oa.chat.completions.with_streaming_response.create(model="gpt-test", messages=MSGS,
                                                                      stream=True) as resp:  # fmt: skip
            chunks = await resp.parse()
            out["streaming.parse"] = len([c async for c in chunks])
        return out

    return asyncio.run(go())


def off_on(probe: Probe) -> tuple[dict[str, Any], dict[str, Any], RecordingListener]:
    adapters.uninstall()
    off = probe()
    listener = RecordingListener()
    adapters.install(listener)
    try:
        on = probe()
    finally:
        adapters.uninstall()
    return off, on, listener


@pytest.mark.parametrize("name", list(RAW_SYNC))
def test_raw_stream_api_sync(name: str) -> None:
    if (reason := lacking(name)) is not None:
        pytest.skip(reason)
    off, on, listener = off_on(lambda: probe_raw_sync(name))
    assert on == off
    assert on["facts"]["isinstance"] and on["enter_is_self"] and on["closed_after_close"]
    assert len(listener.reports) == 2


@pytest.mark.parametrize("name", list(RAW_ASYNC))
def test_raw_stream_api_async(name: str) -> None:
    if (reason := lacking(name)) is not None:
        pytest.skip(reason)
    off, on, listener = off_on(lambda: probe_raw_async(name))
    assert on == off
    assert on["facts"]["isinstance"] and on["enter_is_self"] and on["closed_after_close"]
    assert len(listener.reports) == (3 if "closed_after_aclose" in on else 2)


def test_helpers_and_response_wrappers_sync() -> None:
    off, on, listener = off_on(probe_helpers_sync)
    assert on == off
    # every call was observed once (11 Stream-building calls, plus the iter_lines one)
    assert len(listener.reports) == 12
    # with_streaming_response + iter_lines: the caller parses the SSE itself, no Stream is built, so otelstream sees
    # no event; the body close ends the call as abandoned(close) with 0 events (research §1.2: "not covered")
    lines = listener.reports[10]
    assert (lines.surface, lines.events, lines.outcome, lines.abandoned_reason) == (
        "chat_completions",
        0,
        "abandoned",
        "close",
    )


def test_helpers_and_response_wrappers_async() -> None:
    off, on, listener = off_on(probe_helpers_async)
    assert on == off
    assert len(listener.reports) == 5


def test_websocket_session_lanes_unchanged(provider: FakeProvider) -> None:
    session_mod = pytest.importorskip("openai.lib.responses_websocket._session")

    def probe() -> dict[str, Any]:
        client = openai.OpenAI(**provider.openai_kwargs(max_retries=0, http_client=OPENAI_HTTP.Client(verify=False)))
        limits = session_mod.ResponsesWebSocketLimits(8, 1000, 4000, 1 << 20, 1 << 22)
        out: dict[str, Any] = {}
        with client.responses.connect() as conn:
            out["conn"] = type(conn).__qualname__
            conn.response.create(model="gpt-4o-mini", input="hi", metadata={"otelstream_tokens": "4"})
            out["events"] = []
            for event in conn:
                out["events"].append((type(event).__qualname__, event.type, event.sequence_number))
                if event.type == "response.completed":
                    break
            with session_mod.ResponsesWebSocketSession(conn, limits=limits) as session:
                lane = session.lane("p")
                out["lane"] = type(lane).__qualname__
                lane.send({"type": "response.create", "model": "gpt-4o-mini", "input": "hi",
                           "metadata": {"otelstream_tokens": "4"}})  # fmt: skip
                final = lane.get_final_response(timeout=5)
                out["final"] = (final.status, final.model, len(final.output))
        return out

    off, on, listener = off_on(probe)
    assert on == off
    assert [r.stream_id for r in listener.reports] == [None, "p"]
