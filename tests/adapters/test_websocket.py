"""Responses WebSocket mode over a local websockets server: one report per response per lane."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from otelstream import adapters, names
from otelstream.adapters import _patch
from tests.support.recording import RecordingListener
from tests.support.sdk_features import OPENAI_WEBSOCKET_OBSERVED, WITHOUT_WEBSOCKET

pytest.importorskip("websockets")
observed = pytest.mark.skipif(not OPENAI_WEBSOCKET_OBSERVED, reason=WITHOUT_WEBSOCKET)


async def _handler(ws: Any) -> None:
    tasks = set()
    async for message in ws:
        cmd = json.loads(message)
        if cmd.get("stream_id"):  # named lanes are answered concurrently, the default lane in order
            task = asyncio.create_task(_respond(ws, cmd))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        else:
            await _respond(ws, cmd)


async def _respond(ws: Any, cmd: dict[str, Any]) -> None:
    sid = {"stream_id": cmd["stream_id"]} if cmd.get("stream_id") else {}
    fault = (cmd.get("metadata") or {}).get("fault", "ok")
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": "r1", "status": "in_progress"}},
        {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "m", "output_index": 0,
         "content_index": 0, "delta": "Hi", "logprobs": []},
        {"type": "response.completed", "sequence_number": 2, "response": {
            "id": "r1", "status": "completed",
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}},
    ]  # fmt: skip
    if fault == "long":  # 40 deltas over ~0.8 s
        events[1:2] = [{**events[1], "sequence_number": n} for n in range(1, 41)]
        events[-1] = {**events[-1], "sequence_number": 41}
    for i, ev in enumerate(events):
        if i == 2 and fault == "drop":
            ws.transport.abort()
            return
        if i == 2 and fault == "close":
            await ws.close(1000)
            return
        await asyncio.sleep(0.6 if i == 2 and fault == "slow" else 0.02 if fault == "long" else 0.01)
        await ws.send(json.dumps({**ev, **sid}))


@pytest.fixture(scope="module")
def ws_url() -> Iterator[str]:
    from websockets.asyncio.server import serve

    ready, port, stop = threading.Event(), [], []

    def run() -> None:
        async def main() -> None:
            async with serve(_handler, "127.0.0.1", 0) as server:
                port.append(server.sockets[0].getsockname()[1])
                stop.append((asyncio.get_running_loop(), asyncio.Event()))
                ready.set()
                await stop[0][1].wait()

        asyncio.run(main())

    t = threading.Thread(target=run, daemon=True)
    t.start()
    ready.wait(5)
    yield f"http://127.0.0.1:{port[0]}/v1"
    loop, ev = stop[0]
    loop.call_soon_threadsafe(ev.set)
    t.join(5)


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url=url)


@observed
def test_ws_two_lanes_iteration(rec: RecordingListener, ws_url: str) -> None:
    with _client(ws_url).responses.connect() as conn:
        conn.response.create(model="gpt-test", input="hi", stream_id="a")
        conn.response.create(model="gpt-test", input="hi", stream_id="b")
        done = 0
        for event in conn:
            if event.type == "response.completed":
                done += 1
                if done == 2:
                    break
    assert sorted((r.stream_id, r.outcome, r.events, r.deltas) for r in rec.reports) == [
        ("a", names.COMPLETED, 3, 1),
        ("b", names.COMPLETED, 3, 1),
    ]
    assert all(r.surface == names.RESPONSES_WEBSOCKET and r.request_model == "gpt-test" for r in rec.reports)
    assert all(r.time_to_first_delta_ns and r.usage.output_tokens == 1 for r in rec.reports)
    assert [k for k, _ in rec.connections] == ["opened", "closed"]


@observed
def test_ws_recv_and_caller_close_abandons(rec: RecordingListener, ws_url: str) -> None:
    with _client(ws_url).responses.connect() as conn:
        conn.response.create(model="gpt-test", input="hi")
        assert conn.recv().type == "response.created"
    r = rec.one()
    assert (r.outcome, r.abandoned_reason, r.stream_id) == (names.ABANDONED, names.ABANDON_CLOSE, None)


@observed
def test_ws_abnormal_drop_is_transport_error(rec: RecordingListener, ws_url: str) -> None:
    with _client(ws_url).responses.connect() as conn:
        conn.response.create(model="gpt-test", input="hi", metadata={"fault": "drop"})
        with pytest.raises(Exception):  # noqa: B017 - websockets' ConnectionClosedError
            for _ in conn:
                pass
    assert rec.one().outcome == names.TRANSPORT_ERROR


@observed
def test_ws_normal_server_close_is_cut(rec: RecordingListener, ws_url: str) -> None:
    with _client(ws_url).responses.connect() as conn:
        conn.response.create(model="gpt-test", input="hi", metadata={"fault": "close"})
        for _ in conn:
            pass
    assert rec.one().outcome == names.CUT


@observed
def test_ws_async(rec: RecordingListener, ws_url: str) -> None:
    async def go() -> None:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=ws_url)
        async with client.responses.connect() as conn:
            await conn.response.create(model="gpt-test", input="hi")
            async for event in conn:
                if event.type == "response.completed":
                    break

    asyncio.run(go())
    assert rec.one().outcome == names.COMPLETED


@observed
def test_ws_session_lanes(rec: RecordingListener, ws_url: str) -> None:
    from openai.lib.responses_websocket._session import ResponsesWebSocketLimits, ResponsesWebSocketSession

    with (
        _client(ws_url).responses.connect() as conn,
        ResponsesWebSocketSession(conn, limits=ResponsesWebSocketLimits(8, 1000, 4000, 1 << 20, 1 << 22)) as session,
    ):
        lane = session.lane("x")
        lane.send({"type": "response.create", "model": "gpt-test", "input": "hi"})
        final = lane.get_final_response(timeout=5)
        assert final.id == "r1"
    r = rec.one()
    assert (r.stream_id, r.outcome, r.deltas) == ("x", names.COMPLETED, 1)


@observed
def test_ws_a_silent_lane_waits_while_another_streams(rec: RecordingListener, ws_url: str) -> None:
    """Lane a's server pauses 0.6 s while lane b streams and the caller pulls without pause: a's pause is a wait
    (its max wait, a live stall over a 0.3 s threshold), not time its consumer spent."""
    with _client(ws_url).responses.connect() as conn:
        conn.response.create(model="gpt-test", input="hi", stream_id="a", metadata={"fault": "slow"})
        conn.response.create(model="gpt-test", input="hi", stream_id="b", metadata={"fault": "long"})
        done = 0
        for event in conn:
            done += event.type == "response.completed"
            if done == 2:
                break
    a = next(r for r in rec.reports if r.stream_id == "a")
    assert a.outcome == names.COMPLETED
    assert a.max_wait_ns >= 500_000_000 and a.consumer_ns < 200_000_000


@observed
def test_ws_create_that_cannot_be_sent_is_not_left_waiting(rec: RecordingListener, ws_url: str) -> None:
    """A create sent after the caller closed the connection raises: it ends as a request that never produced a
    stream, instead of waiting on its lane for a response that will not come."""
    with _client(ws_url).responses.connect() as conn:
        conn.response.create(model="gpt-test", input="hi")
        for event in conn:
            if event.type == "response.completed":
                break
        conn.close()
        with pytest.raises(Exception):  # noqa: B017 - websockets' ConnectionClosedOK
            conn.response.create(model="gpt-test", input="again")
    assert [r.outcome for r in rec.reports] == [names.COMPLETED, names.HTTP_ERROR]


@observed
def test_ws_create_sent_during_a_reconnect_is_timed_from_its_send(rec: RecordingListener, ws_url: str) -> None:
    """A create sent from on_reconnecting waits in the SDK's queue through the backoff (0.5 s here): its TTFD starts
    when the new socket sends it, not when it was queued."""
    holder: dict[str, Any] = {}

    def on_reconnecting(event: Any) -> None:
        holder["conn"].response.create(model="gpt-test", input="again")

    with _client(ws_url).responses.connect(on_reconnecting=on_reconnecting, initial_delay=0.5, max_delay=0.5) as conn:
        holder["conn"] = conn
        conn.response.create(model="gpt-test", input="hi", metadata={"fault": "drop"})
        for event in conn:
            if event.type == "response.completed":
                break
    dropped, resent = rec.reports
    assert (dropped.outcome, resent.outcome) == (names.TRANSPORT_ERROR, names.COMPLETED)
    assert resent.time_to_first_delta_ns is not None and resent.time_to_first_delta_ns < 400_000_000


@observed
def test_ws_create_queued_on_the_manager_before_the_connection(rec: RecordingListener, ws_url: str) -> None:
    """The manager's send() may queue a create before the connection exists; entering sends it: it is the caller's
    request (model, its own t_request), not a response the server chained on its own."""
    manager = _client(ws_url).responses.connect()
    manager.send({"type": "response.create", "model": "gpt-test", "input": "hi"})
    with manager as conn:
        for event in conn:
            if event.type == "response.completed":
                break
    r = rec.one()
    assert (r.outcome, r.request_model) == (names.COMPLETED, "gpt-test")


@observed
def test_ws_a_new_stream_id_per_response_holds_a_bounded_number_of_lanes(rec: RecordingListener, ws_url: str) -> None:
    """A long-lived connection that names a new lane for every response: finished lanes are let go beyond a few
    dozen (each held ≈1 KB, and every pull walked them all)."""
    from otelstream.adapters.calls import KEY
    from otelstream.adapters.openai import ws_receives as openai_ws_receives

    with _client(ws_url).responses.connect() as conn:
        for i in range(80):
            conn.response.create(model="gpt-test", input="hi", stream_id=f"lane-{i}")
            for event in conn:
                if event.type == "response.completed":
                    break
        lanes = len(conn.__dict__[KEY].lanes)
    assert len(rec.reports) == 80 and all(r.outcome == names.COMPLETED for r in rec.reports)
    assert lanes <= openai_ws_receives._IDLE_LANES_KEPT


@pytest.mark.skipif(OPENAI_WEBSOCKET_OBSERVED, reason="this openai release has the WebSocket base class: observed")
def test_ws_on_a_release_without_its_patch_module_is_not_observed(
    ws_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """openai < 3.32 has WebSocket mode but not ``openai._websocket_connection``: one WARNING names a missing patch
    point (the others would repeat it), and a response streamed over the socket is not reported at all (no connection
    span either) rather than half observed; what the caller reads is the SDK's."""
    _patch.PATCHER._warned.clear()
    caplog.set_level(logging.WARNING, logger="otelstream")
    listener = RecordingListener()
    adapters.install(listener)
    try:
        with _client(ws_url).responses.connect() as conn:
            conn.response.create(model="gpt-test", input="hi")
            types = []
            for event in conn:
                types.append(event.type)
                if event.type == "response.completed":
                    break
        gc.collect()
    finally:
        adapters.uninstall()
        _patch.PATCHER._warned.clear()
    assert types == ["response.created", "response.output_text.delta", "response.completed"]
    assert listener.reports == [] and listener.started == [] and listener.connections == []
    warnings = [r.getMessage() for r in caplog.records if "openai WebSocket-mode" in r.getMessage()]
    assert len(warnings) == 1 and "WebSocket-mode responses are not observed at all" in warnings[0], warnings
