"""A tiny scripted SSE server on 127.0.0.1 for the cases the fake provider cannot serve: ``event: ping`` on the
OpenAI surfaces, a read timeout in the middle of a body, a half-written chunk, arbitrary byte sequences.

    server = ScriptedServer().start()
    key = server.add([frame1, Pause(0.2), frame2, Half(b"data: {"), ...])
    client.responses.create(..., extra_headers={SCRIPT_HEADER: key})
    # or, for clients that only take a base URL (the frameworks): base_url=server.url_for(key) + "/v1"

Each step is bytes (sent as one HTTP chunk), a ``Pause``, ``Half`` (the chunk header for these bytes, then only the
first half of them, then the connection dies) or ``Reset`` (socket shutdown without the terminating chunk). A script
without a break ends with the terminating chunk: a clean EOF. ``add(..., fail_first=N)`` answers the first N
requests for the script with a retryable 503 (a 1 ms ``retry-after-ms``): the SDKs' retries.
"""

from __future__ import annotations

import itertools
import socket
import sys
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCRIPT_HEADER = "x-script"
PATH_PREFIX = "_script"  # or the key as the first path segments: /_script/<key>/v1/chat/completions


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Half:
    data: bytes


@dataclass(frozen=True)
class Reset:
    pass


Step = bytes | Pause | Half | Reset


@dataclass
class Script:
    steps: list[Step]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    served: threading.Event = field(default_factory=threading.Event)
    fail_first: int = 0  # requests still to answer with a retryable 503
    bodies: list[bytes] = field(default_factory=list)  # the request bodies received, in order
    heads: list[dict[str, str]] = field(default_factory=list)  # their headers (lower-case names), in order
    lock: threading.Lock = field(default_factory=threading.Lock)
    open_now: int = 0  # responses being played right now
    most_open: int = 0  # the most played at once


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # every frame leaves at once: client-side gaps are real
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self._serve(self.rfile.read(length) if length else b"")

    def do_GET(self) -> None:
        self._serve(b"")

    def _serve(self, request_body: bytes) -> None:
        key = self.headers.get(SCRIPT_HEADER) or _path_key(self.path)
        script = self.server.scripts.get(key)
        if script is None:
            body = b'{"error": {"message": "no such script", "type": "not_found"}}'
            self.send_response(404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.send_header("x-should-retry", "false")
            self.end_headers()
            self.wfile.write(body)
            return
        with script.lock:
            script.bodies.append(request_body)
            script.heads.append({k.lower(): v for k, v in self.headers.items()})
            retry = script.fail_first > 0
            script.fail_first -= retry
        if retry:
            body = b'{"error": {"message": "overloaded, retry", "type": "server_error"}}'
            self.send_response(503)
            for k, v in (("content-type", "application/json"), ("content-length", str(len(body))),
                         ("x-should-retry", "true"), ("retry-after-ms", "1")):  # fmt: skip
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
            return
        with script.lock:
            script.open_now += 1
            script.most_open = max(script.most_open, script.open_now)
        try:
            self._run(script)
        except OSError:
            self.close_connection = True
        finally:
            with script.lock:
                script.open_now -= 1
            script.served.set()

    def _run(self, script: Script) -> None:
        self.send_response(script.status)
        headers = {"content-type": "text/event-stream", "x-request-id": "req_scripted", "request-id": "req_scripted",
                   **script.headers}  # fmt: skip
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for step in script.steps:
            if isinstance(step, Pause):
                time.sleep(step.seconds)
            elif isinstance(step, Half):
                self.wfile.write(b"%x\r\n%s" % (len(step.data), step.data[: len(step.data) // 2]))
                self.wfile.flush()
                self._kill()
                return
            elif isinstance(step, Reset):
                self.wfile.flush()
                self._kill()
                return
            else:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(step), step))
                self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _kill(self) -> None:
        self.close_connection = True
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


def _path_key(path: str) -> str:
    """The key in a ``/{PATH_PREFIX}/<key>/...`` path (``ScriptedServer.url_for``), or ``""``."""
    parts = path.split("/", 3)
    return parts[2] if len(parts) > 2 and parts[1] == PATH_PREFIX else ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    scripts: dict[str, Script]

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # a client resetting an idle keep-alive connection (the tests break streams on purpose)
        super().handle_error(request, client_address)


class ScriptedServer:
    def __init__(self) -> None:
        self._http = _Server(("127.0.0.1", 0), _Handler)
        self._http.scripts = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def url_for(self, key: str) -> str:
        """A base URL that selects the script by path: for clients that cannot add a header to every request."""
        return f"{self.base_url}/{PATH_PREFIX}/{key}"

    def add(
        self, steps: list[Step], *, status: int = 200, headers: dict[str, str] | None = None, fail_first: int = 0
    ) -> str:
        key = f"s{next(self._ids)}"
        self._http.scripts[key] = Script(list(steps), status, dict(headers or {}), fail_first=fail_first)
        return key

    def bodies(self, key: str) -> list[bytes]:
        """The request bodies the script has received (what the client asked for)."""
        return list(self._http.scripts[key].bodies)

    def headers(self, key: str) -> list[dict[str, str]]:
        """The headers of each request the script has received (names in lower case)."""
        return list(self._http.scripts[key].heads)

    def most_open(self, key: str) -> int:
        """The most responses of the script played at the same time."""
        return self._http.scripts[key].most_open

    def served(self, key: str, timeout: float = 5.0) -> bool:
        return self._http.scripts[key].served.wait(timeout)
