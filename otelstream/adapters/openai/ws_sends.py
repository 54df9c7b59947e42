"""openai Responses WebSocket mode: the ``response.create`` messages seen where they are sent (a connection's
``send`` / ``send_raw``, a session lane's ``send``, the connection manager's ``send`` before the connection exists),
each registered on its lane before the write and withdrawn if the write raises."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable
from typing import Any

from otelstream import _guard, attribution
from otelstream.adapters._patch import Wrapper
from otelstream.adapters.calls import KEY, RUNTIME, Call
from otelstream.adapters.openai.ws_connection import Ws, created, withdrawn, ws_of


def _create_payload(data: Any) -> dict[str, Any] | None:
    if isinstance(data, (bytes, bytearray)):
        if b'"response.create"' not in data:
            return None
    elif not isinstance(data, str) or '"response.create"' not in data:
        return None
    payload = json.loads(data)
    return payload if isinstance(payload, dict) and payload.get("type") == "response.create" else None


Sent = tuple["Ws | None", "Call | None"]


def _connection_created(instance: Any, payload: dict[str, Any]) -> Sent:
    """A connection is sending the ``response.create`` ``payload`` (its fields)."""
    ws = ws_of(instance)
    if ws is None:
        return None, None
    sid = payload.get("stream_id")
    response = payload.get("response")  # older shape nested the params under "response"
    params = response if isinstance(response, dict) and not payload.get("model") else payload
    call = created(ws, sid if isinstance(sid, str) else None, params)
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
        ws = ws_of(instance._session.connection)
        if ws is not None:
            return ws, created(ws, instance._state.stream_id, fields)
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
            withdrawn(ws, call, exc)
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
            withdrawn(ws, call, exc)
            raise
        finally:
            _SENDING.reset(token)

    return sync, async_


send_raw_sync, send_raw_async = _send_wrappers(_before_send_raw)
send_sync, send_async = _send_wrappers(_before_send)
lane_send_sync, lane_send_async = _send_wrappers(_before_lane_send)

_QUEUED = KEY + "_queued"  # on a connection manager: the creates its send() queued before the connection existed


def manager_send(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
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
        ws = ws_of(connection) if queued else None
        if ws is not None:
            for sid, params, attrs in queued:
                created(ws, sid, params, attrs)


def manager_enter(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    connection = wrapped(*args, **kwargs)
    _entered(instance, connection)
    return connection


async def manager_aenter(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    connection = await wrapped(*args, **kwargs)
    _entered(instance, connection)
    return connection
