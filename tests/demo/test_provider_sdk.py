"""The fake provider through the real openai and anthropic clients, sync and async: what each fault makes the SDK
yield or raise (research/sdk-surfaces.md §2.1 is the reference for every expectation here)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import pytest

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.exchange import FAULT_HEADER
from otelstream.demo.provider import FakeProvider
from tests.demo.harness import TAG_HEADER, record_for, tag
from tests.support.sdk_features import (
    CONNECTION_ERRORS,
    OPENAI_HTTP,
    OPENAI_WEBSOCKET_LANES,
    WITHOUT_WEBSOCKET_LANES,
)
from tests.support.surfaces import SSE_SURFACES

CASES = [(s, f) for f in F.SERVER_FAULTS for s in SSE_SURFACES if F.is_supported(f, s)]


@dataclass
class Seen:
    items: list[Any] = field(default_factory=list)
    exc: BaseException | None = None
    first_delta_s: float | None = None


def _is_delta(surface: str, item: Any) -> bool:
    if surface == names.RESPONSES:
        return str(item.type).endswith(".delta")
    if surface == names.CHAT_COMPLETIONS:
        return any(c.delta.content for c in item.choices)
    if surface == names.COMPLETIONS:
        return any(c.text for c in item.choices)
    return item.type == "content_block_delta"


def _kwargs(surface: str, fault: str, tag_value: str) -> dict[str, Any]:
    headers = {FAULT_HEADER: fault, TAG_HEADER: tag_value}
    if surface == names.RESPONSES:
        return {"model": "gpt-4o-mini", "input": "hi", "stream": True, "extra_headers": headers}
    if surface == names.CHAT_COMPLETIONS:
        return {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                "stream_options": {"include_usage": True}, "extra_headers": headers}  # fmt: skip
    if surface == names.COMPLETIONS:
        return {"model": "gpt-3.5-turbo-instruct", "prompt": "hi", "stream": True, "extra_headers": headers}
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}],
            "stream": True, "extra_headers": headers}  # fmt: skip


def _create(client: Any, surface: str) -> Any:
    return {
        names.RESPONSES: lambda: client.responses.create,
        names.CHAT_COMPLETIONS: lambda: client.chat.completions.create,
        names.COMPLETIONS: lambda: client.completions.create,
        names.MESSAGES: lambda: client.messages.create,
    }[surface]()


def _clients(provider: FakeProvider, surface: str, fault: str, is_async: bool) -> Any:
    timeout = 0.5 if fault == F.NO_HEADERS else 10.0
    if surface == names.MESSAGES:
        cls: Any = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        return cls(**provider.anthropic_kwargs(max_retries=0, timeout=timeout))
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(**provider.openai_kwargs(max_retries=0, timeout=timeout))


def run_sync(provider: FakeProvider, surface: str, fault: str, tag_value: str) -> Seen:
    seen = Seen()
    client = _clients(provider, surface, fault, False)
    t0 = time.monotonic()
    try:
        with _create(client, surface)(**_kwargs(surface, fault, tag_value)) as stream:
            for item in stream:
                if seen.first_delta_s is None and _is_delta(surface, item):
                    seen.first_delta_s = time.monotonic() - t0
                seen.items.append(item)
    except Exception as exc:  # the assertion below says which one was expected
        seen.exc = exc
    finally:
        client.close()
    return seen


async def run_async(provider: FakeProvider, surface: str, fault: str, tag_value: str) -> Seen:
    seen = Seen()
    client = _clients(provider, surface, fault, True)
    t0 = time.monotonic()
    try:
        stream = await _create(client, surface)(**_kwargs(surface, fault, tag_value))
        async with stream:
            async for item in stream:
                if seen.first_delta_s is None and _is_delta(surface, item):
                    seen.first_delta_s = time.monotonic() - t0
                seen.items.append(item)
    except Exception as exc:
        seen.exc = exc
    finally:
        await client.close()
    return seen


def _terminal_ok(surface: str, seen: Seen, finish: str = "stop") -> None:
    assert seen.exc is None, repr(seen.exc)
    items = seen.items
    if surface == names.RESPONSES:
        assert items[-1].type == "response.completed"
        assert items[-1].response.usage.output_tokens > 0
    elif surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS):
        finishes = [c.finish_reason for i in items for c in i.choices if c.finish_reason]
        assert finishes == [finish]
        if surface == names.CHAT_COMPLETIONS:
            assert items[-1].choices == [] and items[-1].usage.completion_tokens > 0
    else:
        assert items[-1].type == "message_stop"
        stop = [i.delta.stop_reason for i in items if i.type == "message_delta"]
        assert stop == ["max_tokens" if finish == "length" else "end_turn"]


def check(provider: FakeProvider, surface: str, fault: str, seen: Seen) -> None:
    anth = surface == names.MESSAGES
    if fault in (F.OK, F.KEEPALIVE, F.SEQ_GAP, F.SEQ_DUP, F.TRAILING_DONE, F.SLOW_FIRST, F.STALL):
        _terminal_ok(surface, seen)
        if surface == names.RESPONSES:
            seqs = [i.sequence_number for i in seen.items]
            if fault == F.SEQ_GAP:
                assert sorted(set(seqs)) != list(range(len(set(seqs)))) and len(seqs) == len(set(seqs))
            elif fault == F.SEQ_DUP:
                assert len(seqs) == len(set(seqs)) + 1
            else:
                assert seqs == list(range(len(seqs)))
        if fault == F.SLOW_FIRST:
            assert seen.first_delta_s is not None and seen.first_delta_s >= provider.pacing.pause_s
    elif fault == F.CUT:
        assert seen.exc is None, "a clean EOF raises nothing in either SDK: the observer must infer the cut"
        assert _is_delta(surface, seen.items[-1])
    elif fault == F.RESET:
        assert isinstance(seen.exc, CONNECTION_ERRORS), repr(seen.exc)
        assert any(_is_delta(surface, i) for i in seen.items)
    elif fault == F.FAILED:
        assert seen.exc is None and seen.items[-1].type == "response.failed"
    elif fault == F.INCOMPLETE:
        if surface == names.RESPONSES:
            assert seen.exc is None and seen.items[-1].type == "response.incomplete"
            assert seen.items[-1].response.incomplete_details.reason == "max_output_tokens"
        else:
            _terminal_ok(surface, seen, finish="length")
    elif fault == F.ERROR:
        if surface == names.RESPONSES:
            assert seen.exc is None, "a Responses `error` event is yielded, not raised"
            assert [i.type for i in seen.items[-2:]] == ["error", "response.failed"]
        elif anth:
            assert isinstance(seen.exc, anthropic.APIStatusError) and seen.exc.status_code == 200
            assert seen.exc.type == "overloaded_error"
        else:
            assert type(seen.exc) is openai.APIError, repr(seen.exc)
    elif fault in (F.HTTP_500, F.HTTP_429, F.OVERLOADED):
        status = {F.HTTP_500: 500, F.HTTP_429: 429, F.OVERLOADED: 529 if anth else 503}[fault]
        expected = (anthropic if anth else openai).APIStatusError
        assert isinstance(seen.exc, expected) and seen.exc.status_code == status
        assert seen.items == []
    elif fault == F.NO_HEADERS:
        expected = (anthropic if anth else openai).APITimeoutError
        assert isinstance(seen.exc, expected), repr(seen.exc)
    else:  # pragma: no cover - every server fault has a row above
        raise AssertionError(fault)


@pytest.mark.parametrize(("surface", "fault"), CASES)
def test_sync_client(provider: FakeProvider, surface: str, fault: str) -> None:
    t = tag()
    seen = run_sync(provider, surface, fault, t)
    check(provider, surface, fault, seen)
    rec = record_for(provider, t)
    assert (rec.surface, rec.fault) == (surface, fault)


@pytest.mark.parametrize(("surface", "fault"), CASES)
async def test_async_client(provider: FakeProvider, surface: str, fault: str) -> None:
    t = tag()
    seen = await run_async(provider, surface, fault, t)
    check(provider, surface, fault, seen)
    assert record_for(provider, t).fault == fault


def test_helpers_consume_every_fault_shape(provider: FakeProvider) -> None:
    """The `.stream()` helpers accumulate state from events: the fake shapes must not break them."""
    client = openai.OpenAI(**provider.openai_kwargs(max_retries=0))
    for fault in (F.OK, F.KEEPALIVE, F.SEQ_DUP, F.TRAILING_DONE):
        with client.responses.stream(model="m", input="x", extra_headers={FAULT_HEADER: fault}) as rs:
            assert rs.get_final_response().status == "completed"
    with client.chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "x"}], n=2, stream_options={"include_usage": True}
    ) as cs:
        final = cs.get_final_completion()
    assert [c.finish_reason for c in final.choices] == ["stop", "stop"] and final.usage is not None
    ac = anthropic.Anthropic(**provider.anthropic_kwargs(max_retries=0))
    with ac.messages.stream(model="c", max_tokens=9, messages=[{"role": "user", "content": "x"}]) as ms:
        text = "".join(ms.text_stream)
        message = ms.get_final_message()
    assert text and message.stop_reason == "end_turn" and message.usage.output_tokens > 0


def test_chat_n_choices_and_usage_option(provider: FakeProvider) -> None:
    client = openai.OpenAI(**provider.openai_kwargs(max_retries=0))
    chunks = list(client.chat.completions.create(model="m", messages=[], stream=True, n=3))
    assert sorted({c.index for ch in chunks for c in ch.choices}) == [0, 1, 2]
    assert all(ch.usage is None for ch in chunks), "no usage chunk unless stream_options.include_usage"
    finishes = [c.finish_reason for ch in chunks for c in ch.choices if c.finish_reason]
    assert finishes == ["stop"] * 3
    legacy = list(client.completions.create(model="m", prompt="x", stream=True, stream_options={"include_usage": True}))
    assert legacy[-1].usage is not None and legacy[-1].choices == []


def test_background_resume(provider: FakeProvider) -> None:
    client = openai.OpenAI(**provider.openai_kwargs(max_retries=0))
    events = list(client.responses.create(model="m", input="x", stream=True, background=True))
    assert [e.type for e in events[:3]] == ["response.created", "response.queued", "response.in_progress"]
    rid = events[0].response.id
    resumed = list(client.responses.retrieve(rid, stream=True, starting_after=4))
    assert [e.sequence_number for e in resumed] == [e.sequence_number for e in events[5:]]
    assert resumed[-1].type == "response.completed"
    # the helper replays from 0 and filters on the client side
    with client.responses.stream(response_id=rid, starting_after=4) as rs:
        seqs = [e.sequence_number for e in rs]
    assert seqs[0] == 5 and seqs[-1] == events[-1].sequence_number
    # a resume can carry its own fault
    cut = list(client.responses.retrieve(rid, stream=True, starting_after=2, extra_headers={FAULT_HEADER: F.CUT}))
    assert cut[-1].type == "response.output_text.delta"
    with pytest.raises(openai.NotFoundError):
        list(client.responses.retrieve("resp_nope", stream=True))
    assert client.responses.retrieve(rid).status == "completed"


def test_bad_fault_requests_are_refused(provider: FakeProvider) -> None:
    client = openai.OpenAI(**provider.openai_kwargs(max_retries=0))
    with pytest.raises(openai.BadRequestError, match="does not apply"):
        client.chat.completions.create(model="m", messages=[], stream=True, extra_headers={FAULT_HEADER: F.FAILED})
    with pytest.raises(openai.BadRequestError, match="unknown fault"):
        client.responses.create(model="m", input="x", stream=True, extra_headers={FAULT_HEADER: "nonsense"})
    with pytest.raises(openai.BadRequestError, match="only streams"):
        client.responses.create(model="m", input="x")


# --- WebSocket mode ----------------------------------------------------------------------------------

WS_TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")


def _ws_collect(conn: Any, want: int) -> list[Any]:
    got, ended = [], 0
    for event in conn:
        got.append(event)
        if event.type in WS_TERMINAL:
            ended += 1
            if ended == want:
                break
    return got


@pytest.mark.skipif(not OPENAI_WEBSOCKET_LANES, reason=WITHOUT_WEBSOCKET_LANES)
def test_websocket_lanes_interleave_and_echo_stream_id(provider: FakeProvider) -> None:
    client = openai.OpenAI(**provider.openai_kwargs(max_retries=0))
    with client.responses.connect() as conn:
        conn.response.create(model="m", input="a", stream_id="lane-a")
        conn.response.create(model="m", input="b", stream_id="lane-b")
        conn.response.create(model="m", input="c")  # default lane: no stream_id on its events
        events = _ws_collect(conn, 3)
    by_lane: dict[str | None, list[Any]] = {}
    for e in events:
        by_lane.setdefault(e.stream_id, []).append(e)
    assert set(by_lane) == {"lane-a", "lane-b", None}
    for lane_events in by_lane.values():
        assert [e.sequence_number for e in lane_events] == list(range(len(lane_events)))
        assert lane_events[-1].type == "response.completed"


@pytest.mark.skipif(not OPENAI_WEBSOCKET_LANES, reason=WITHOUT_WEBSOCKET_LANES)
@pytest.mark.parametrize("fault", [F.OK, F.SLOW_FIRST, F.STALL, F.FAILED, F.INCOMPLETE, F.ERROR, F.SEQ_GAP, F.SEQ_DUP])
def test_websocket_faults(provider: FakeProvider, fault: str) -> None:
    client = openai.OpenAI(**provider.openai_kwargs(max_retries=0))
    with client.responses.connect() as conn:
        conn.response.create(model="m", input="x", stream_id="s", metadata={"otelstream_fault": fault})
        events = _ws_collect(conn, 1)
    last = events[-1]
    expected_last = {F.FAILED: "response.failed", F.INCOMPLETE: "response.incomplete", F.ERROR: "error"}
    assert last.type == expected_last.get(fault, "response.completed")
    assert last.stream_id == "s"
    seqs = [e.sequence_number for e in events]
    if fault == F.SEQ_DUP:
        assert len(seqs) == len(set(seqs)) + 1
    elif fault == F.SEQ_GAP:
        assert seqs != list(range(len(seqs))) and len(set(seqs)) == len(seqs)
    else:
        assert seqs == list(range(len(seqs)))


def test_websocket_cut_and_reset(provider: FakeProvider) -> None:
    client = openai.OpenAI(**provider.openai_kwargs(max_retries=0))
    with client.responses.connect() as conn:
        conn.response.create(model="m", input="x", metadata={"otelstream_fault": F.CUT})
        events = list(conn)  # a normal close (1000) ends the iteration quietly
    assert events and events[-1].type == "response.output_text.delta"
    from websockets.exceptions import ConnectionClosedError

    with pytest.raises(ConnectionClosedError), client.responses.connect() as conn:
        conn.response.create(model="m", input="x", metadata={"otelstream_fault": F.RESET})
        list(conn)


async def test_websocket_async(provider: FakeProvider) -> None:
    client = openai.AsyncOpenAI(**provider.openai_kwargs(max_retries=0))
    async with client.responses.connect(extra_headers={FAULT_HEADER: F.INCOMPLETE}) as conn:
        await conn.response.create(model="m", input="x")  # the connect-time header picks the fault
        async for event in conn:
            if event.type in WS_TERMINAL:
                break
    assert event.type == "response.incomplete"
    await client.close()


async def test_many_concurrent_streams(provider: FakeProvider) -> None:
    """A few hundred streams at once: none refused, none mixed up, all complete."""
    n = 300
    http = OPENAI_HTTP.AsyncClient(limits=OPENAI_HTTP.Limits(max_connections=n, max_keepalive_connections=n))
    client = openai.AsyncOpenAI(**provider.openai_kwargs(max_retries=0, http_client=http))

    async def one(i: int) -> tuple[str, int]:
        stream = await client.responses.create(model="m", input=str(i), stream=True)
        last = None
        async for event in stream:
            last = event
        assert last is not None
        return last.type, last.sequence_number

    t0 = time.monotonic()
    results = await asyncio.gather(*(one(i) for i in range(n)))
    assert all(kind == "response.completed" for kind, _ in results)
    assert time.monotonic() - t0 < 30
    await client.close()
