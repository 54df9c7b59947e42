"""openai Responses WebSocket mode: what the connection receives. Each parsed event goes to the response open on
its lane (or starts the next one asked for there); each wait for the socket is timed; the socket's end decides how
the open responses ended, and whether the connection did."""

from __future__ import annotations

from typing import Any

from otelstream import _guard
from otelstream.adapters.calls import KEY, RUNTIME, finish
from otelstream.adapters.openai.ws_connection import Ws, created, ws_of

_NOT_A_START = ("response.steer.accepted", "response.steer.pending", "response.steer.failed")
# close codes the SDK reconnects after (openai/types/websocket_reconnection.py: is_recoverable_close)
_RECOVERABLE = frozenset({1001, 1005, 1006, 1011, 1012, 1013, 1015})


def parse_event(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    event = wrapped(*args, **kwargs)
    try:
        _observe(instance, event)
    except Exception as exc:
        _guard.report("openai_ws.parse_event", exc)
    return event


def _observe(conn: Any, event: Any) -> None:
    ws = conn.__dict__.get(KEY)
    if ws is None:
        ws = ws_of(conn)
        if ws is None:
            return
    d = event.__dict__ if hasattr(event, "__dict__") else event
    if type(d) is not dict:
        return
    sid = d.get("stream_id")
    if not isinstance(sid, str):
        sid = None  # (the lanes our sends made are keyed by a string or None)
    lane = ws.lanes.get(sid)
    call = lane.current if lane is not None else None
    if call is None:
        typ = d.get("type")
        if typ in _NOT_A_START:
            return  # a steer acknowledgement between responses belongs to none
        if lane is not None and lane.pending:
            call = lane.pending.popleft()
        elif typ == "response.created":
            # a server-chained successor (after steering or completion): timed from the previous end
            call = created(ws, sid, {})
            lane = ws.lanes.get(sid)
            if call is None or lane is None or call not in lane.pending:
                return
            lane.pending.remove(call)
            if lane.last_end:
                call.tracker.t_request = lane.last_end
        else:
            return  # not part of a response we know of (no lane is made for it: the server names the lanes)
        lane.current = call
    tracker = call.tracker
    if not tracker.t_pull:  # a response that began during this pull (a server-chained successor)
        tracker.t_pull = ws.t_pull
    tracker.event(event, None)
    if tracker.terminal:
        lane.current = None
        lane.last_end = tracker.t_terminal
        finish(call, "eof")
        if len(ws.lanes) > _IDLE_LANES_KEPT:
            _prune(ws)


# idle lanes kept for their last end (a server-chained successor is timed from it); beyond, the oldest idle ones go,
# so a connection that uses a new stream_id per response holds a bounded number of lanes
_IDLE_LANES_KEPT = 32


def _prune(ws: Ws) -> None:
    for sid, lane in list(ws.lanes.items()):
        if lane.current is None and not lane.pending:
            ws.lanes.pop(sid, None)
            if len(ws.lanes) <= _IDLE_LANES_KEPT:
                return


def _closed(instance: Any, exc: BaseException) -> None:
    """recv_bytes raised: the socket is gone. Decide how the open responses ended, and whether the connection did."""
    with _guard.guard("openai_ws.closed"):
        from websockets.exceptions import ConnectionClosed, ConnectionClosedOK

        if not isinstance(exc, ConnectionClosed):
            return
        ws = ws_of(instance, create=False)
        if ws is None:
            return
        code = exc.rcvd.code if exc.rcvd is not None else 1006
        if instance.__dict__.get("_intentionally_closed"):
            ws.end_all("close")
            ws.close(None)  # normally already ended by the close() hook
            return
        normal = isinstance(exc, ConnectionClosedOK) or code == 1000
        if normal:
            ws.end_all("eof")  # a normal close by the server: open responses were cut short
        else:
            ws.end_all("transport_error", f"websocket_close_{code}")
        if not _may_reconnect(instance, code):
            ws.close(None if normal else f"websocket_close_{code}")
        # else: _reconnect decides (a reconnect is an event on the span; giving up ends it)


def _may_reconnect(instance: Any, code: int) -> bool:
    """Could the SDK's ``_reconnect`` bring this connection back (``_websocket_connection.py:291-310``)?"""
    d = instance.__dict__
    return (
        d.get("_on_reconnecting") is not None
        and d.get("_make_ws") is not None
        and not d.get("_intentionally_closed")
        and code in _RECOVERABLE
    )


def _pulling(ws: Ws) -> None:
    """The reader waits for the socket's next event: every response open or asked for on the connection waits with
    it, until an event of its own arrives (a wait that began at an earlier pull goes on: while another lane's events
    come in, a lane the server keeps silent is still waiting, not being consumed). A few lanes at most."""
    now = ws.t_pull = RUNTIME.clock()
    # snapshots (copied in C, under the GIL): the caller's thread may add a create while a session's reader pulls
    for lane in list(ws.lanes.values()):
        call = lane.current
        if call is not None and not call.tracker.t_pull:
            call.tracker.t_pull = now
        for call in tuple(lane.pending):
            if not call.tracker.t_pull:
                call.tracker.t_pull = now


def recv_bytes_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    ws = instance.__dict__.get(KEY)
    if ws is not None:
        try:
            _pulling(ws)
        except Exception as exc:  # our bug: never the caller's
            _guard.report("openai_ws.recv", exc)
    try:
        return wrapped(*args, **kwargs)
    except Exception as exc:
        _closed(instance, exc)
        raise


async def recv_bytes_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    ws = instance.__dict__.get(KEY)
    if ws is not None:
        try:
            _pulling(ws)
        except Exception as exc:  # our bug: never the caller's
            _guard.report("openai_ws.recv", exc)
    try:
        return await wrapped(*args, **kwargs)
    except Exception as exc:
        _closed(instance, exc)
        raise
