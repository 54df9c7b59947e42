"""Responses WebSocket mode against the fake provider's WebSocket endpoint: ``responses.connect()`` (iteration,
sync and async) under every fault the provider serves there, two lanes at once, and ``ResponsesWebSocketSession`` /
``AsyncResponsesWebSocketSession`` lanes; one report per response per lane, checked against the transcript the
provider recorded."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx2
import openai
import pytest

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.provider import FakeProvider
from tests.integration import wire
from tests.support.recording import RecordingListener
from tests.support.sdk_features import OPENAI_WEBSOCKET_OBSERVED, WITHOUT_WEBSOCKET

pytest.importorskip("websockets")
pytestmark = pytest.mark.skipif(not OPENAI_WEBSOCKET_OBSERVED, reason=WITHOUT_WEBSOCKET)

TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")
WS_FAULTS = [f for f in F.SERVER_FAULTS if F.is_supported(f, names.RESPONSES_WEBSOCKET)]
_tags = itertools.count()


def _meta(fault: str, tag: str) -> dict[str, str]:
    return {"otelstream_fault": fault, "otelstream_tokens": "6", "test_tag": tag}


def _records(provider: FakeProvider, tag: str) -> list[Any]:
    recs = [r for r in provider.requests if (r.request_json.get("metadata") or {}).get("test_tag") == tag]
    for r in recs:
        assert r.done.wait(5)
    return recs


def _client(provider: FakeProvider, is_async: bool) -> Any:
    http = httpx2.AsyncClient(verify=False) if is_async else httpx2.Client(verify=False)
    cls: Any = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(**provider.openai_kwargs(max_retries=0, http_client=http))


def _drive_sync(provider: FakeProvider, lanes: list[str | None], fault: str, tag: str) -> BaseException | None:
    try:
        with _client(provider, False).responses.connect() as conn:
            for lane in lanes:
                extra = {"stream_id": lane} if lane is not None else {}
                conn.response.create(model="gpt-4o-mini", input="hi", metadata=_meta(fault, tag), **extra)
            done = 0
            for event in conn:
                if event.type in TERMINAL:
                    done += 1
                    if done == len(lanes):
                        break
    except Exception as exc:
        return exc
    return None


async def _drive_async(provider: FakeProvider, lanes: list[str | None], fault: str, tag: str) -> BaseException | None:
    try:
        async with _client(provider, True).responses.connect() as conn:
            for lane in lanes:
                extra = {"stream_id": lane} if lane is not None else {}
                await conn.response.create(model="gpt-4o-mini", input="hi", metadata=_meta(fault, tag), **extra)
            done = 0
            async for event in conn:
                if event.type in TERMINAL:
                    done += 1
                    if done == len(lanes):
                        break
    except Exception as exc:
        return exc
    return None


def _drive(provider: FakeProvider, lanes: list[str | None], fault: str, tag: str, is_async: bool) -> Any:
    if is_async:
        return asyncio.run(_drive_async(provider, lanes, fault, tag))
    return _drive_sync(provider, lanes, fault, tag)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("fault", WS_FAULTS)
def test_ws_fault_matrix(provider: FakeProvider, rec: RecordingListener, fault: str, is_async: bool) -> None:
    tag = f"w{next(_tags)}"
    exc = _drive(provider, [None], fault, tag, is_async)
    (record,) = _records(provider, tag)
    if fault == F.RESET:
        assert exc is not None  # websockets' ConnectionClosedError (no reconnect without on_reconnecting)
    else:
        assert exc is None, repr(exc)
    r = rec.one()
    assert (r.surface, r.stream_id, r.request_model) == (names.RESPONSES_WEBSOCKET, None, "gpt-4o-mini")
    assert r.outcome == F.EXPECTED_OUTCOME[fault], (r.outcome, r.error_type)
    want = wire.expected(names.RESPONSES_WEBSOCKET, wire.jsonl_events(record.wire))
    assert (r.events, r.deltas) == (want.events, want.deltas)
    assert (r.usage.input_tokens, r.usage.output_tokens) == (want.input_tokens, want.output_tokens)
    assert r.response_id == record.response_id
    assert (r.sequence.gaps, r.sequence.duplicates) == (int(fault == F.SEQ_GAP), int(fault == F.SEQ_DUP))
    assert r.time_to_first_delta_ns is not None
    if fault == F.SLOW_FIRST:
        assert r.time_to_first_delta_ns >= 200_000_000  # from the response.create send
    if fault == F.STALL:
        assert r.max_wait_ns >= 180_000_000
    assert [k for k, _ in rec.connections] == ["opened", "closed"]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_ws_two_lanes_interleaved(provider: FakeProvider, rec: RecordingListener, is_async: bool) -> None:
    tag = f"w{next(_tags)}"
    assert _drive(provider, ["a", "b"], F.OK, tag, is_async) is None
    records = {r.stream_id: r for r in _records(provider, tag)}
    assert sorted(r.stream_id or "" for r in rec.reports) == ["a", "b"]
    for r in rec.reports:
        want = wire.expected(names.RESPONSES_WEBSOCKET, wire.jsonl_events(records[r.stream_id].wire))
        got = (r.outcome, r.events, r.deltas, r.usage.output_tokens)
        assert got == (names.COMPLETED, want.events, want.deltas, want.output_tokens)
        assert r.response_id == records[r.stream_id].response_id


def test_ws_session_lanes_sync(provider: FakeProvider, rec: RecordingListener) -> None:
    session_mod = pytest.importorskip("openai.lib.responses_websocket._session")
    tag = f"w{next(_tags)}"
    limits = session_mod.ResponsesWebSocketLimits(8, 1000, 4000, 1 << 20, 1 << 22)
    with (
        _client(provider, False).responses.connect() as conn,
        session_mod.ResponsesWebSocketSession(conn, limits=limits) as session,
    ):
        finals = {}
        for lane_id, fault in (("x", F.OK), ("y", F.INCOMPLETE)):
            lane = session.lane(lane_id)
            lane.send({"type": "response.create", "model": "gpt-4o-mini", "input": "hi", "metadata": _meta(fault, tag)})
            finals[lane_id] = lane
        statuses = {k: lane.get_final_response(timeout=5).status for k, lane in finals.items()}
    assert statuses == {"x": "completed", "y": "incomplete"}
    by_lane = {r.stream_id: r for r in rec.reports}
    assert {k: r.outcome for k, r in by_lane.items()} == {"x": names.COMPLETED, "y": names.INCOMPLETE}
    records = {r.stream_id: r for r in _records(provider, tag)}
    for k, r in by_lane.items():
        want = wire.expected(names.RESPONSES_WEBSOCKET, wire.jsonl_events(records[k].wire))
        assert (r.events, r.deltas, r.usage.output_tokens) == (want.events, want.deltas, want.output_tokens)
        assert r.time_to_first_delta_ns is not None


def test_ws_session_lanes_async(provider: FakeProvider, rec: RecordingListener) -> None:
    session_mod = pytest.importorskip("openai.lib.responses_websocket._session")
    tag = f"w{next(_tags)}"

    async def go() -> str:
        limits = session_mod.ResponsesWebSocketLimits(8, 1000, 4000, 1 << 20, 1 << 22)
        async with (
            _client(provider, True).responses.connect() as conn,
            session_mod.AsyncResponsesWebSocketSession(conn, limits=limits) as session,
        ):
            lane = session.lane("z")
            await lane.send(
                {"type": "response.create", "model": "gpt-4o-mini", "input": "hi", "metadata": _meta(F.OK, tag)}
            )
            final = await asyncio.wait_for(lane.get_final_response(), 5)
            return str(final.status)

    assert asyncio.run(go()) == "completed"
    r = rec.one()
    assert (r.stream_id, r.outcome, r.surface) == ("z", names.COMPLETED, names.RESPONSES_WEBSOCKET)
    (record,) = _records(provider, tag)
    want = wire.expected(names.RESPONSES_WEBSOCKET, wire.jsonl_events(record.wire))
    assert (r.events, r.deltas) == (want.events, want.deltas)
