"""The fake provider's WebSocket front: OpenAI's Responses WebSocket mode on its own port (the ``websockets`` sync
server, imported only when started). A connection's ``response.create`` commands run on lanes keyed by
``stream_id``: one lane's responses in order, lanes interleaved, every frame sent under one per-connection lock.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from otelstream import names
from otelstream.demo.bodies import build_events
from otelstream.demo.events import ERROR_EVENT, Event, encode_ws
from otelstream.demo.exchange import Provider, RequestRecord, drop_connection
from otelstream.demo.pacing import Pause, Reset, script

if TYPE_CHECKING:
    from websockets.sync.server import Server, ServerConnection

_WS_PATHS: Final = ("/v1/responses", "/responses")


class _ClientLeftInHandshake(logging.Filter):
    """A client that went away before its handshake request was whole (a connect cancelled by Ctrl-C, SIGTERM or an
    abandoned stream) is routine for a provider: websockets logs it as an error with a traceback; the demo does not.
    Every other handshake failure is still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        from websockets.exceptions import InvalidMessage

        left = record.exc_info is not None and isinstance(record.exc_info[1], InvalidMessage)
        return not (left and record.msg == "opening handshake failed")


_LOG = logging.getLogger("otelstream.demo.websocket")
_LOG.addFilter(_ClientLeftInHandshake())


class FakeWebSocketServer:
    """Serves on a daemon thread from construction until :meth:`close`."""

    def __init__(self, provider: Provider, host: str, port: int) -> None:
        from websockets.sync.server import serve  # optional dependency: only when asked for

        self._provider = provider
        self._lock = threading.Lock()
        self._conns: set[ServerConnection] = set()
        self._server: Server = serve(
            self._handler,
            host,
            port,
            process_request=self._process_request,
            compression=None,  # the real endpoint's frames are what the SDK parses; keep them plain
            ping_interval=None,
            logger=_LOG,
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="otelstream-fake-ws", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.socket.getsockname()[1])

    def close(self) -> None:
        """Stop accepting and drop every open connection without a close frame."""
        with self._lock:
            conns = list(self._conns)
        self._server.shutdown()
        for conn in conns:
            drop_connection(conn.socket)

    def _process_request(self, conn: ServerConnection, request: Any) -> Any:
        if urlsplit(request.path).path.rstrip("/") not in _WS_PATHS:
            return conn.respond(404, "otelstream fake provider: WebSocket mode lives at /v1/responses\n")
        return None

    def _handler(self, conn: ServerConnection) -> None:
        with self._lock:
            self._conns.add(conn)
        lanes: dict[str | None, tuple[threading.Thread, deque[dict[str, Any]], threading.Event]] = {}
        send_lock = threading.Lock()
        request = conn.request
        headers = {k.lower(): v for k, v in request.headers.raw_items()} if request is not None else {}
        try:
            for message in conn:
                try:
                    cmd = json.loads(message)
                except ValueError:
                    continue
                if not isinstance(cmd, dict) or cmd.get("type") != "response.create":
                    continue  # steer / other client events: not modelled
                lane_id = cmd.get("stream_id") if isinstance(cmd.get("stream_id"), str) else None
                lane = lanes.get(lane_id)
                if lane is None or not lane[0].is_alive():
                    queue: deque[dict[str, Any]] = deque()
                    wake = threading.Event()
                    thread = threading.Thread(
                        target=self._lane,
                        args=(conn, lane_id, queue, wake, headers, send_lock),
                        name="otelstream-fake-ws-lane",
                        daemon=True,
                    )
                    lane = (thread, queue, wake)
                    lanes[lane_id] = lane
                    thread.start()
                lane[1].append(cmd)
                lane[2].set()
        except Exception:
            pass
        finally:
            for _, queue, wake in lanes.values():
                queue.append({})  # sentinel: the lane thread exits
                wake.set()
            with self._lock:
                self._conns.discard(conn)

    def _lane(
        self,
        conn: ServerConnection,
        lane_id: str | None,
        queue: deque[dict[str, Any]],
        wake: threading.Event,
        headers: Mapping[str, str],
        send_lock: threading.Lock,
    ) -> None:
        """One lane: its responses run one after another (FIFO), lanes interleave."""
        while not self._provider.stopping:
            if not queue:
                wake.wait(0.5)
                wake.clear()
                continue
            cmd = queue.popleft()
            if not cmd:
                return
            if not self._response(conn, lane_id, cmd, headers, send_lock):
                return

    def _response(
        self,
        conn: ServerConnection,
        lane_id: str | None,
        cmd: dict[str, Any],
        headers: Mapping[str, str],
        send_lock: threading.Lock,
    ) -> bool:
        """Serve one response.create; False when the connection is gone."""
        provider = self._provider
        surface = names.RESPONSES_WEBSOCKET
        metadata = cmd.get("metadata") if isinstance(cmd.get("metadata"), dict) else {}
        assert isinstance(metadata, dict)

        def get(key: str) -> Any:
            value = metadata.get(f"otelstream_{key}")
            return value if value is not None else headers.get(f"x-otelstream-{key}")

        fault, problem = provider.choose_fault(get("fault"), surface)
        rec = provider.new_record("WS", "/v1/responses", surface, fault, headers, cmd)
        rec.stream_id, rec.status = lane_id, 101
        try:
            if problem is not None:
                err = {
                    "type": "invalid_request_error",
                    "code": "otelstream_unsupported_fault",
                    "message": problem,
                    "param": None,
                }
                payload: dict[str, Any] = {"type": "error", "error": err, "status": 400}
                if lane_id is not None:
                    payload["stream_id"] = lane_id
                return self._send(conn, rec, Event(payload, ERROR_EVENT), send_lock)
            spec = provider.spec_for(rec, surface, cmd, fault, get("tokens"), stream_id=lane_id)
            pacing = provider.pacing_for(get)
            steps = script(build_events(spec), spec, pacing, random.Random(f"{provider.seed}:{rec.index}:t"))
            for step in steps:
                if isinstance(step, Pause):
                    if provider.pause(step.seconds):
                        rec.ended = "shutdown"
                        return False
                elif isinstance(step, Event):
                    if not self._send(conn, rec, step, send_lock):
                        return False
                elif isinstance(step, Reset):
                    rec.ended = "reset"
                    drop_connection(conn.socket)  # TCP teardown without a close frame: 1006 on the client
                    return False
                else:  # Close
                    rec.ended = "close"
                    conn.close(1000)
                    return False
            rec.ended = "eof"
            return True
        finally:
            rec.t_end = time.monotonic()
            rec.done.set()

    def _send(self, conn: ServerConnection, rec: RequestRecord, event: Event, lock: threading.Lock) -> bool:
        text = encode_ws(event)
        try:
            with lock:
                conn.send(text)
        except Exception:
            rec.ended = "client_gone"
            return False
        rec.events_sent += 1
        if self._provider.record:
            rec.body += text.encode() + b"\n"
        return True
