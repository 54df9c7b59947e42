"""openai Responses WebSocket mode: the state kept per connection (a ``Ws`` in the connection's ``__dict__``, with a
``_Lane`` per ``stream_id``: the calls whose ``response.create`` was sent, the response open) and its span.

The connection span opens exactly once per connection (at ``__init__``, or lazily under a lock for a connection
built before ``instrument()``) and ends exactly once, on whichever close path comes first: the caller's ``close()``
(also a context exit), the socket ending with no reconnect to follow (a normal server close, or an abnormal drop
with no ``on_reconnecting`` or a non-recoverable code: ``error.type`` = ``websocket_close_<code>``), a reconnect
that gives up, or the connection object being garbage-collected.
"""

from __future__ import annotations

import collections
import threading
import weakref
from typing import Any

from otelstream import _guard, names
from otelstream.adapters import _patch
from otelstream.adapters.calls import KEY, RUNTIME, Call, begin_call, finish
from otelstream.adapters.request import fail_unbound, request_params
from otelstream.core.report import Attributes, StreamStart

_CONNECTION_CLASSES = frozenset({"ResponsesConnection", "AsyncResponsesConnection"})
# held only while a connection's Ws is created (once per connection): two threads reaching a new connection at
# once (the caller's send and a session reader's parse) must not open two connection spans
_CREATE_LOCK = threading.Lock()
# Every WebSocket patch point takes part in attributing how a response ended (its events, the socket's end, the
# caller's close, a reconnect, the create that starts it): without any one of them no response is reported, rather
# than misreported
WS_SCOPES = (_patch.OPENAI_WEBSOCKET,)


class _Lane:
    __slots__ = ("current", "last_end", "pending")

    def __init__(self) -> None:
        self.pending: collections.deque[Call] = collections.deque()
        self.current: Call | None = None
        self.last_end = 0


class Ws:
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
        self.handle: object = None  # the connection span's handle, set once by ws_of right after construction
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


def ws_of(conn: Any, create: bool = True) -> Ws | None:
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
        ws = Ws(listener, host, port)
        ws.handle = listener.connection_opened(host, port)
        fin = weakref.finalize(conn, _dropped, ws)
        fin.atexit = False
        ws.finalizer = fin
        conn.__dict__[KEY] = ws  # published last: a reader never sees a Ws without its span
    return ws


def _peer(conn: Any) -> tuple[str | None, int | None]:
    try:
        addr = conn._connection.remote_address
        if isinstance(addr, tuple) and len(addr) >= 2:
            return str(addr[0]), int(addr[1])
    except Exception:
        pass
    return None, None


def _dropped(ws: Ws) -> None:
    with _guard.guard("openai_ws.dropped"):
        ws.end_all("gc")
        ws.close(None)


def init(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A connection object is being built (the manager's ``__enter__``, caller's thread): open its span now, under
    the caller's context, rather than lazily on whichever thread first touches it."""
    result = wrapped(*args, **kwargs)
    with _guard.guard("openai_ws.init"):
        ws_of(instance)
    return result


def _provider(ws: Ws) -> str:
    host = ws.host
    return names.PROVIDER_AZURE if host is not None and host.endswith(".azure.com") else names.PROVIDER_OPENAI


def created(
    ws: Ws, stream_id: str | None, params: dict[str, Any], attributes: Attributes | None = None
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
    call = begin_call(start, scopes=WS_SCOPES, parent=ws.handle, listener=listener, attributes=attributes)
    if call is not None:
        ws.lane(stream_id).pending.append(call)
    return call


def withdrawn(ws: Ws | None, call: Call | None, exc: BaseException) -> None:
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


# --- close and reconnect --------------------------------------------------------------------------------
def _before_close(instance: Any) -> None:
    with _guard.guard("openai_ws.close"):
        ws = ws_of(instance, create=False)
        if ws is None:
            return
        ws.end_all("close")
        ws.close(None)


def close_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    _before_close(instance)
    return wrapped(*args, **kwargs)


async def close_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    _before_close(instance)
    return await wrapped(*args, **kwargs)


def _after_reconnect(instance: Any, exc: Any, ok: object) -> None:
    with _guard.guard("openai_ws.reconnect"):
        ws = ws_of(instance, create=False)
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


def reconnect_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    ok = wrapped(*args, **kwargs)
    _after_reconnect(instance, args[0] if args else kwargs.get("exc"), ok)
    return ok


async def reconnect_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    ok = await wrapped(*args, **kwargs)
    _after_reconnect(instance, args[0] if args else kwargs.get("exc"), ok)
    return ok
