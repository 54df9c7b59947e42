"""openai 3.32+ Responses WebSocket mode: ``responses.connect()`` connections (recv, iteration, ``dispatch_events``)
and ``ResponsesWebSocketSession`` lanes, sync and async, plus the beta twins.

A "stream" here is one response on one ``stream_id`` lane (None = the default lane): from the ``response.create``
that asked for it (or, for a server-chained successor, the previous response's end) to its terminal event. Per
connection we keep one ``_Ws`` (in the connection's ``__dict__``) with a ``_Lane`` per ``stream_id``: a FIFO of
calls whose ``response.create`` was sent, and the response currently open.

Patch points (openai 3.57, ``site-packages/openai``):

- ``parse_event`` on the four connection classes (``resources/responses/responses.py:4251``, ``:4579``; beta
  ``resources/beta/responses/responses.py:5074``, ``:5401``): a plain sync method every read path goes through —
  ``recv()``, iteration, ``dispatch_events()``, the session reader thread/task (``_session.py:498``, ``:644``).
- ``recv_bytes`` on the same classes (``:4230``, ``:4556``…): the wait (``t_pull``) and how the socket ended — a
  ``ConnectionClosed`` from here with a response open is ``transport_error`` (abnormal close, also when a reconnect
  follows: the server-side response is lost), ``cut`` (normal server close), or the caller's close.
- ``send`` on the two connection classes and ``WebSocketConnectionBase.send_raw`` / async twin
  (``_websocket_connection.py:246``, ``:474``): ``response.create`` time, lane and model. From 3.42 ``send`` calls
  ``send_raw`` explicitly on the base class; 3.32-3.41 write to the socket from ``send`` itself. The outermost of the
  two registers the create (``_SENDING``), so each message is seen once on every release.
- ``ResponsesWebSocketLane.send`` / ``AsyncResponsesWebSocketLane.send`` (``lib/responses_websocket/_session.py:347``,
  ``:535``): lanes write straight to the socket (``:362``), bypassing ``send_raw``.
- ``close`` (``_websocket_connection.py:281``, ``:505``): the caller's close abandons open responses.
- ``_reconnect`` (``:291``, ``:511``): a reconnect becomes an event on the connection span.
- ``__init__`` of the four connection classes (``resources/responses/responses.py:4177``, ``:4502``; beta
  ``:5000``, ``:5325``), built by the connection manager's ``__enter__`` on the caller's thread: the connection span
  (``otelstream.websocket``) opens there, once, under the caller's current context.

Releases before 3.32 have no ``openai._websocket_connection``: that missing patch module leaves their WebSocket mode
unobserved (one WARNING; no connection span, no report), rather than half observed.

The connection span opens exactly once per connection (at ``__init__``, or lazily under a lock for a connection
built before ``instrument()``) and ends exactly once, on whichever close path comes first: the caller's ``close()``
(also a context exit), the socket ending with no reconnect to follow (a normal server close, or an abnormal drop
with no ``on_reconnecting`` or a non-recoverable code: ``error.type`` = ``websocket_close_<code>``), a reconnect
that gives up, or the connection object being garbage-collected.
"""

from __future__ import annotations

import collections
import contextvars
import json
import threading
import weakref
from collections.abc import Callable
from typing import Any

from otelstream import _guard, attribution, names
from otelstream.adapters import _patch
from otelstream.adapters._patch import LIFECYCLE_MEASURES, Patch, Wrapper
from otelstream.adapters.calls import KEY, RUNTIME, Call, begin_call, finish
from otelstream.adapters.request import fail_unbound, request_params
from otelstream.core.report import Attributes, StreamStart

_CONNECTION_CLASSES = frozenset({"ResponsesConnection", "AsyncResponsesConnection"})
_NOT_A_START = ("response.steer.accepted", "response.steer.pending", "response.steer.failed")
# close codes the SDK reconnects after (openai/types/websocket_reconnection.py: is_recoverable_close)
_RECOVERABLE = frozenset({1001, 1005, 1006, 1011, 1012, 1013, 1015})
# held only while a connection's _Ws is created (once per connection): two threads reaching a new connection at
# once (the caller's send and a session reader's parse) must not open two connection spans
_CREATE_LOCK = threading.Lock()


class _Lane:
    __slots__ = ("current", "last_end", "pending")

    def __init__(self) -> None:
        self.pending: collections.deque[Call] = collections.deque()
        self.current: Call | None = None
        self.last_end = 0


class _Ws:
    __slots__ = (
        "__weakref__",
        "close_lock",
        "closed",
        "finalizer",
        "handle",
        "host",
        "lanes",
        "listener",
        "port",
        "queued",
        "t_pull",
    )  # fmt: skip

    def __init__(self, listener: Any, host: str | None, port: int | None) -> None:
        self.listener = listener
        self.host = host
        self.port = port
        self.handle: object = None  # the connection span's handle, set once by _ws_of right after construction
        self.lanes: dict[str | None, _Lane] = {}
        self.t_pull = 0
        self.queued: list[Call] = []  # creates sent while the SDK reconnects: it queues them until the new socket
        self.closed = False
        self.close_lock = threading.Lock()
        self.finalizer: weakref.finalize[Any, Any] | None = None

    def lane(self, stream_id: str | None) -> _Lane:
        lane = self.lanes.get(stream_id)
        if lane is None:
            lane = self.lanes.setdefault(stream_id, _Lane())
        return lane

    def end_all(self, how: str, error_type: str | None = None) -> None:
        for lane in list(self.lanes.values()):
            call = lane.current
            lane.current = None
            if call is not None:
                finish(call, how, error_type)
            while lane.pending:
                try:
                    finish(lane.pending.popleft(), how, error_type)
                except IndexError:
                    break

    def close(self, error_type: str | None) -> None:
        """End the connection span: exactly once, whichever close path (and thread) gets here first."""
        with self.close_lock:
            if self.closed:
                return
            self.closed = True
            fin = self.finalizer
            self.finalizer = None
        if fin is not None:
            fin.detach()
        self.listener.connection_closed(self.handle, error_type)


def _ws_of(conn: Any, create: bool = True) -> _Ws | None:
    ws = conn.__dict__.get(KEY)
    if ws is not None or not create:
        return ws  # type: ignore[no-any-return]
    listener = RUNTIME.listener
    if listener is None or type(conn).__name__ not in _CONNECTION_CLASSES:
        return None
    if names.MEASURE_STREAM in _patch.PATCHER.unobserved(_patch.OPENAI_WEBSOCKET):
        return None  # a patch point of this mode is missing from the SDK: not observed (no connection span either)
    with _CREATE_LOCK:
        ws = conn.__dict__.get(KEY)
        if ws is not None:  # another thread won the race: its span is the connection's one span
            return ws  # type: ignore[no-any-return]
        host, port = _peer(conn)
        ws = _Ws(listener, host, port)
        ws.handle = listener.connection_opened(host, port)
        fin = weakref.finalize(conn, _dropped, ws)
        fin.atexit = False
        ws.finalizer = fin
        conn.__dict__[KEY] = ws  # published last: a reader never sees a _Ws without its span
    return ws


def _peer(conn: Any) -> tuple[str | None, int | None]:
    try:
        addr = conn._connection.remote_address
        if isinstance(addr, tuple) and len(addr) >= 2:
            return str(addr[0]), int(addr[1])
    except Exception:
        pass
    return None, None


def _dropped(ws: _Ws) -> None:
    with _guard.guard("openai_ws.dropped"):
        ws.end_all("gc")
        ws.close(None)


def _init(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A connection object is being built (the manager's ``__enter__``, caller's thread): open its span now, under
    the caller's context, rather than lazily on whichever thread first touches it."""
    result = wrapped(*args, **kwargs)
    with _guard.guard("openai_ws.init"):
        _ws_of(instance)
    return result


def _provider(ws: _Ws) -> str:
    host = ws.host
    return names.PROVIDER_AZURE if host is not None and host.endswith(".azure.com") else names.PROVIDER_OPENAI


def _created(
    ws: _Ws, stream_id: str | None, params: dict[str, Any], attributes: Attributes | None = None
) -> Call | None:
    """A ``response.create`` is being sent (``params``: its fields): start its span and queue it on its lane. The
    application attributes current at the send are the response's (``begin_call`` captures them, unless given)."""
    model = params.get("model")
    listener = ws.listener
    start = StreamStart(
        surface=names.RESPONSES_WEBSOCKET,
        provider=_provider(ws),
        request_model=model[:256] if isinstance(model, str) else None,
        server_address=ws.host,
        server_port=ws.port,
        api_type="responses",
        t_request_ns=RUNTIME.clock(),
        stream_id=stream_id,
        **request_params(params),
    )
    call = begin_call(start, scopes=_WS, parent=ws.handle, listener=listener, attributes=attributes)
    if call is not None:
        ws.lane(stream_id).pending.append(call)
    return call


def _withdrawn(ws: _Ws | None, call: Call | None, exc: BaseException) -> None:
    """The send of a ``response.create`` raised (the SDK refused it, or the socket was gone): no response will answer
    it, so it must not wait on its lane for the next one; it ends as a request that never produced a stream."""
    if ws is None or call is None:
        return
    with _guard.guard("openai_ws.send"):
        for lane in ws.lanes.values():
            if call in lane.pending:
                lane.pending.remove(call)
                fail_unbound(call, exc)
                return


# --- sends ----------------------------------------------------------------------------------------------
def _create_payload(data: Any) -> dict[str, Any] | None:
    if isinstance(data, (bytes, bytearray)):
        if b'"response.create"' not in data:
            return None
    elif not isinstance(data, str) or '"response.create"' not in data:
        return None
    payload = json.loads(data)
    return payload if isinstance(payload, dict) and payload.get("type") == "response.create" else None


Sent = tuple["_Ws | None", "Call | None"]


def _connection_created(instance: Any, payload: dict[str, Any]) -> Sent:
    """A connection is sending the ``response.create`` ``payload`` (its fields)."""
    ws = _ws_of(instance)
    if ws is None:
        return None, None
    sid = payload.get("stream_id")
    response = payload.get("response")  # older shape nested the params under "response"
    params = response if isinstance(response, dict) and not payload.get("model") else payload
    call = _created(ws, sid if isinstance(sid, str) else None, params)
    if call is not None and instance.__dict__.get("_is_reconnecting"):
        ws.queued.append(call)  # sent when the reconnect completes (_after_reconnect)
    return ws, call


def _before_send_raw(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sent:
    with _guard.guard("openai_ws.send"):
        payload = _create_payload(args[0] if args else kwargs.get("data"))
        if payload is not None:
            return _connection_created(instance, payload)
    return None, None


def _before_send(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sent:
    """The connection's ``send(event)``: releases before 3.42 write it to the socket themselves, later ones pass it
    to ``send_raw`` (then this outer send is the one that registers it: ``_SENDING``)."""
    with _guard.guard("openai_ws.send"):
        fields = _create_event(args, kwargs)
        if fields is not None:
            return _connection_created(instance, fields)
    return None, None


def _create_event(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The fields of a ``send(event)``'s event (a dict or an SDK model) when it is a ``response.create``."""
    event = args[0] if args else kwargs.get("event")
    fields: Any = event if isinstance(event, dict) else getattr(event, "__dict__", {})
    return fields if fields.get("type") == "response.create" else None  # type: ignore[no-any-return]


# inside a patched send: a send it makes through another patched one (3.42+: send -> send_raw) is the same message
_SENDING: contextvars.ContextVar[bool] = contextvars.ContextVar("otelstream_ws_sending", default=False)


def _before_lane_send(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sent:
    with _guard.guard("openai_ws.lane_send"):
        fields = _create_event(args, kwargs)
        if fields is None:
            return None, None
        ws = _ws_of(instance._session.connection)
        if ws is not None:
            return ws, _created(ws, instance._state.stream_id, fields)
    return None, None


def _send_wrappers(before: Callable[[Any, tuple[Any, ...], dict[str, Any]], Sent]) -> tuple[Wrapper, Wrapper]:
    """Sync and async wrappers of a send: the create is registered before the write (the session's reader thread may
    parse response.created before send returns) and withdrawn if the send raises."""

    def sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _SENDING.get():
            return wrapped(*args, **kwargs)
        ws, call = before(instance, args, kwargs)
        token = _SENDING.set(True)
        try:
            return wrapped(*args, **kwargs)
        except BaseException as exc:
            _withdrawn(ws, call, exc)
            raise
        finally:
            _SENDING.reset(token)

    async def async_(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _SENDING.get():
            return await wrapped(*args, **kwargs)
        ws, call = before(instance, args, kwargs)
        token = _SENDING.set(True)
        try:
            return await wrapped(*args, **kwargs)
        except BaseException as exc:
            _withdrawn(ws, call, exc)
            raise
        finally:
            _SENDING.reset(token)

    return sync, async_


_send_raw_sync, _send_raw_async = _send_wrappers(_before_send_raw)
_send_sync, _send_async = _send_wrappers(_before_send)
_lane_send_sync, _lane_send_async = _send_wrappers(_before_lane_send)

_QUEUED = KEY + "_queued"  # on a connection manager: the creates its send() queued before the connection existed


def _manager_send(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``ResponsesConnectionManager.send``: callable before the connection exists; the SDK queues the event and its
    ``__enter__`` sends it (through the connection's queue, not ``send_raw``). Remember the creates until then."""
    result = wrapped(*args, **kwargs)
    with _guard.guard("openai_ws.manager_send"):
        fields = _create_event(args, kwargs)
        if fields is not None:
            sid = fields.get("stream_id")
            queued = instance.__dict__.setdefault(_QUEUED, [])
            # the attributes current at this send, not at the later __enter__ that writes it
            attrs = attribution.capture(RUNTIME.baggage_keys)
            queued.append((sid if isinstance(sid, str) else None, dict(fields), attrs))
    return result


def _entered(manager: Any, connection: Any) -> None:
    """The manager's ``__enter__`` built the connection and sent what was queued: those creates were sent now."""
    with _guard.guard("openai_ws.manager_enter"):
        queued = manager.__dict__.pop(_QUEUED, None)
        ws = _ws_of(connection) if queued else None
        if ws is not None:
            for sid, params, attrs in queued:
                _created(ws, sid, params, attrs)


def _manager_enter(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    connection = wrapped(*args, **kwargs)
    _entered(instance, connection)
    return connection


async def _manager_aenter(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    connection = await wrapped(*args, **kwargs)
    _entered(instance, connection)
    return connection


# --- receives -------------------------------------------------------------------------------------------
def _parse_event(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    event = wrapped(*args, **kwargs)
    try:
        _observe(instance, event)
    except Exception as exc:
        _guard.report("openai_ws.parse_event", exc)
    return event


def _observe(conn: Any, event: Any) -> None:
    ws = conn.__dict__.get(KEY)
    if ws is None:
        ws = _ws_of(conn)
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
            call = _created(ws, sid, {})
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


def _prune(ws: _Ws) -> None:
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
        ws = _ws_of(instance, create=False)
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


def _pulling(ws: _Ws) -> None:
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


def _recv_bytes_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
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


async def _recv_bytes_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
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


# --- close and reconnect --------------------------------------------------------------------------------
def _before_close(instance: Any) -> None:
    with _guard.guard("openai_ws.close"):
        ws = _ws_of(instance, create=False)
        if ws is None:
            return
        ws.end_all("close")
        ws.close(None)


def _close_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    _before_close(instance)
    return wrapped(*args, **kwargs)


async def _close_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    _before_close(instance)
    return await wrapped(*args, **kwargs)


def _after_reconnect(instance: Any, exc: Any, ok: object) -> None:
    with _guard.guard("openai_ws.reconnect"):
        ws = _ws_of(instance, create=False)
        if ws is None:
            return
        rcvd = getattr(exc, "rcvd", None)
        code = int(rcvd.code) if rcvd is not None else 1006
        queued, ws.queued = ws.queued, []
        if ok is True:
            # the SDK sent what it queued during the backoff just now, at the end of its reconnect
            now = RUNTIME.clock()
            for call in queued:
                call.tracker.t_request = call.tracker.t_last_ns = now
            ws.listener.connection_event(ws.handle, names.SPAN_EVENT_RECONNECT, {"close_code": code})
            return
        # No new socket: the connection is over (also when the caller closed it, or it ended normally).
        if instance.__dict__.get("_intentionally_closed") or code == 1000:
            ws.close(None)
        else:
            ws.close(f"websocket_close_{code}")


def _reconnect_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    ok = wrapped(*args, **kwargs)
    _after_reconnect(instance, args[0] if args else kwargs.get("exc"), ok)
    return ok


async def _reconnect_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    ok = await wrapped(*args, **kwargs)
    _after_reconnect(instance, args[0] if args else kwargs.get("exc"), ok)
    return ok


_RESOURCES = ("openai.resources.responses.responses", "openai.resources.beta.responses.responses")
# Every WebSocket patch point takes part in attributing how a response ended (its events, the socket's end, the
# caller's close, a reconnect, the create that starts it): without any one of them no response is reported, rather
# than misreported
_WS = (_patch.OPENAI_WEBSOCKET,)


def _ws_patch(module: str, path: str, wrapper: Wrapper) -> Patch:
    return Patch(module, path, wrapper, measures=LIFECYCLE_MEASURES, scopes=_WS)


PATCHES = (
    *(
        _ws_patch(module, f"{cls}.{method}", wrapper)
        for module in _RESOURCES
        for cls, method, wrapper in (
            ("ResponsesConnection", "send", _send_sync),
            ("AsyncResponsesConnection", "send", _send_async),
            ("ResponsesConnection", "parse_event", _parse_event),
            ("AsyncResponsesConnection", "parse_event", _parse_event),
            ("ResponsesConnection", "recv_bytes", _recv_bytes_sync),
            ("AsyncResponsesConnection", "recv_bytes", _recv_bytes_async),
            ("ResponsesConnection", "__init__", _init),
            ("AsyncResponsesConnection", "__init__", _init),
            ("ResponsesConnectionManager", "send", _manager_send),
            ("AsyncResponsesConnectionManager", "send", _manager_send),
            ("ResponsesConnectionManager", "__enter__", _manager_enter),
            ("AsyncResponsesConnectionManager", "__aenter__", _manager_aenter),
        )
    ),
    _ws_patch("openai._websocket_connection", "WebSocketConnectionBase.send_raw", _send_raw_sync),
    _ws_patch("openai._websocket_connection", "AsyncWebSocketConnectionBase.send_raw", _send_raw_async),
    _ws_patch("openai._websocket_connection", "WebSocketConnectionBase.close", _close_sync),
    _ws_patch("openai._websocket_connection", "AsyncWebSocketConnectionBase.close", _close_async),
    _ws_patch("openai._websocket_connection", "WebSocketConnectionBase._reconnect", _reconnect_sync),
    _ws_patch("openai._websocket_connection", "AsyncWebSocketConnectionBase._reconnect", _reconnect_async),
    _ws_patch("openai.lib.responses_websocket._session", "ResponsesWebSocketLane.send", _lane_send_sync),
    _ws_patch("openai.lib.responses_websocket._session", "AsyncResponsesWebSocketLane.send", _lane_send_async),
)
