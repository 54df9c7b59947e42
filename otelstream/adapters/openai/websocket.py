"""openai 3.32+ Responses WebSocket mode: ``responses.connect()`` connections (recv, iteration, ``dispatch_events``)
and ``ResponsesWebSocketSession`` lanes, sync and async, plus the beta twins.

A "stream" here is one response on one ``stream_id`` lane (None = the default lane): from the ``response.create``
that asked for it (or, for a server-chained successor, the previous response's end) to its terminal event. Per
connection we keep one ``Ws`` (in the connection's ``__dict__``) with a ``_Lane`` per ``stream_id``: a FIFO of
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
  two registers the create (``ws_sends._SENDING``), so each message is seen once on every release.
- ``ResponsesWebSocketLane.send`` / ``AsyncResponsesWebSocketLane.send`` (``lib/responses_websocket/_session.py:347``,
  ``:535``): lanes write straight to the socket (``:362``), bypassing ``send_raw``.
- ``close`` (``_websocket_connection.py:281``, ``:505``): the caller's close abandons open responses.
- ``_reconnect`` (``:291``, ``:511``): a reconnect becomes an event on the connection span.
- ``__init__`` of the four connection classes (``resources/responses/responses.py:4177``, ``:4502``; beta
  ``:5000``, ``:5325``), built by the connection manager's ``__enter__`` on the caller's thread: the connection span
  (``otelstream.websocket``) opens there, once, under the caller's current context.

Releases before 3.32 have no ``openai._websocket_connection``: that missing patch module leaves their WebSocket mode
unobserved (one WARNING; no connection span, no report), rather than half observed.

The state per connection and its span are kept by ``ws_connection``; the creates are seen at the sends by
``ws_sends``, the events and the socket's end at the receives by ``ws_receives``.
"""

from __future__ import annotations

from otelstream.adapters._patch import LIFECYCLE_MEASURES, Patch, Wrapper
from otelstream.adapters.openai.ws_connection import (
    WS_SCOPES,
    close_async,
    close_sync,
    init,
    reconnect_async,
    reconnect_sync,
)
from otelstream.adapters.openai.ws_receives import parse_event, recv_bytes_async, recv_bytes_sync
from otelstream.adapters.openai.ws_sends import (
    lane_send_async,
    lane_send_sync,
    manager_aenter,
    manager_enter,
    manager_send,
    send_async,
    send_raw_async,
    send_raw_sync,
    send_sync,
)

_RESOURCES = ("openai.resources.responses.responses", "openai.resources.beta.responses.responses")


def _ws_patch(module: str, path: str, wrapper: Wrapper) -> Patch:
    return Patch(module, path, wrapper, measures=LIFECYCLE_MEASURES, scopes=WS_SCOPES)


PATCHES = (
    *(
        _ws_patch(module, f"{cls}.{method}", wrapper)
        for module in _RESOURCES
        for cls, method, wrapper in (
            ("ResponsesConnection", "send", send_sync),
            ("AsyncResponsesConnection", "send", send_async),
            ("ResponsesConnection", "parse_event", parse_event),
            ("AsyncResponsesConnection", "parse_event", parse_event),
            ("ResponsesConnection", "recv_bytes", recv_bytes_sync),
            ("AsyncResponsesConnection", "recv_bytes", recv_bytes_async),
            ("ResponsesConnection", "__init__", init),
            ("AsyncResponsesConnection", "__init__", init),
            ("ResponsesConnectionManager", "send", manager_send),
            ("AsyncResponsesConnectionManager", "send", manager_send),
            ("ResponsesConnectionManager", "__enter__", manager_enter),
            ("AsyncResponsesConnectionManager", "__aenter__", manager_aenter),
        )
    ),
    _ws_patch("openai._websocket_connection", "WebSocketConnectionBase.send_raw", send_raw_sync),
    _ws_patch("openai._websocket_connection", "AsyncWebSocketConnectionBase.send_raw", send_raw_async),
    _ws_patch("openai._websocket_connection", "WebSocketConnectionBase.close", close_sync),
    _ws_patch("openai._websocket_connection", "AsyncWebSocketConnectionBase.close", close_async),
    _ws_patch("openai._websocket_connection", "WebSocketConnectionBase._reconnect", reconnect_sync),
    _ws_patch("openai._websocket_connection", "AsyncWebSocketConnectionBase._reconnect", reconnect_async),
    _ws_patch("openai.lib.responses_websocket._session", "ResponsesWebSocketLane.send", lane_send_sync),
    _ws_patch("openai.lib.responses_websocket._session", "AsyncResponsesWebSocketLane.send", lane_send_async),
)
