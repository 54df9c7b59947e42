"""A scripted Responses WebSocket server on 127.0.0.1 (the ``websockets`` sync server), for the probe's faults on
``responses_websocket``: after the client's ``response.create`` it plays a script of events, pauses, a normal close
or a dropped connection; a script can also refuse the handshake with an HTTP status.

    server = WsScriptedServer().start()
    key = server.add([event1, Pause(0.2), event2, Close()])
    base_url = server.url_for(key)       # ws://127.0.0.1:PORT/_script/<key>/v1: the SDK appends /responses
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from websockets.datastructures import Headers
from websockets.http11 import Response
from websockets.sync.server import Server, ServerConnection, serve

from tests.support.scripted_server import PATH_PREFIX, Pause


@dataclass(frozen=True)
class Close:
    """A normal close (1000) with the response still open: the server ended it early."""


@dataclass(frozen=True)
class Drop:
    """The TCP connection aborted without a close frame."""


WsStep = dict[str, Any] | Pause | Close | Drop


@dataclass
class _Script:
    steps: list[WsStep]
    status: int = 101  # anything else refuses the handshake with that status


class WsScriptedServer:
    def __init__(self) -> None:
        self._scripts: dict[str, _Script] = {}
        self._ids = itertools.count()
        self._server: Server = serve(self._handle, "127.0.0.1", 0, process_request=self._process_request,
                                     compression=None, ping_interval=None)  # fmt: skip
        self._thread: threading.Thread | None = None

    def start(self) -> WsScriptedServer:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="ws-scripted")
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()

    def add(self, steps: list[WsStep], *, status: int = 101) -> str:
        key = f"w{next(self._ids)}"
        self._scripts[key] = _Script(list(steps), status)
        return key

    def url_for(self, key: str) -> str:
        port = self._server.socket.getsockname()[1]
        return f"ws://127.0.0.1:{port}/{PATH_PREFIX}/{key}/v1"

    def _script(self, path: str) -> _Script | None:
        parts = path.split("/")
        return self._scripts.get(parts[2]) if len(parts) > 2 and parts[1] == PATH_PREFIX else None

    def _process_request(self, conn: ServerConnection, request: Any) -> Response | None:
        script = self._script(request.path)
        if script is None:
            return conn.respond(404, "no such script\n")
        if script.status != 101:
            body = json.dumps({"error": {"message": "refused", "type": "server_error"}}).encode()
            return Response(script.status, "refused", Headers({"content-type": "application/json",
                                                                "content-length": str(len(body))}), body)  # fmt: skip
        return None

    def _handle(self, conn: ServerConnection) -> None:
        script = self._script(conn.request.path if conn.request else "")
        if script is None:
            return
        with suppress(Exception):
            conn.recv(timeout=5)  # the response.create
        for step in script.steps:
            if isinstance(step, Pause):
                time.sleep(step.seconds)
            elif isinstance(step, Close):
                conn.close(1000)
                return
            elif isinstance(step, Drop):
                with suppress(OSError):
                    conn.socket.shutdown(socket.SHUT_RDWR)
                conn.socket.close()
                return
            else:
                conn.send(json.dumps(step))
        # the script ran to its end: keep the connection until the client closes it, as a real server does
        with suppress(Exception):
            while True:
                conn.recv()
