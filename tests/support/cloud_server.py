"""The threaded HTTP server on 127.0.0.1 under the Gemini and Bedrock stand-ins: it plays one script per request.

A script is a status, headers and steps. Each step is bytes (one HTTP chunk, written and flushed on its own, so a
pause between two steps is a real gap on the wire), ``Pause`` (sleep; ``close()`` cuts it short), ``Stall`` (send
nothing more until the client gives up or the server closes: the client's read timeout) or ``Reset`` (a TCP RST
without the terminating chunk). A 200 script without a break ends with the terminating chunk: a clean EOF. A non-200
script is sent whole with a content-length (an error body). ``Script(sized=True)`` frames a 200 body with a
content-length instead of chunks (the steps still leave one by one, with their pauses): a client that reads fixed
blocks then waits for the whole body. Subclasses say which script a request plays.
"""

from __future__ import annotations

import itertools
import socket
import struct
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCRIPT_HEADER = "x-script"  # overrides the choice made from the path


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Stall:
    seconds: float = 30.0


@dataclass(frozen=True)
class Reset:
    pass


Step = bytes | Pause | Stall | Reset


@dataclass
class Script:
    steps: list[Step]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    sized: bool = False  # a 200 body with a content-length (the sum of its byte steps), not chunked


@dataclass(frozen=True)
class Request:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes
    script: str  # the name of the script it played ("" when none matched)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # every step leaves at once: client-side gaps are real
    server: _HTTP

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def date_time_string(self, timestamp: float | None = None) -> str:
        # one Date for every response: SDK errors quote the headers, and two runs compared must not differ by a second
        return "Mon, 07 Dec 2026 00:00:00 GMT"

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        heads = {k.lower(): v for k, v in self.headers.items()}
        owner = self.server.owner
        name, script = owner.resolve(self.path, heads)
        with owner.lock:
            owner.requests.append(Request("POST", self.path, heads, body, name))
        try:
            self._play(script)
        except OSError:
            self.close_connection = True
        finally:
            owner.served.release()

    def _play(self, script: Script) -> None:
        self.send_response(script.status)
        for k, v in script.headers.items():
            self.send_header(k, v)
        if script.status != 200:
            body = b"".join(s for s in script.steps if isinstance(s, bytes))
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            return
        if script.sized:
            self.send_header("content-length", str(sum(len(s) for s in script.steps if isinstance(s, bytes))))
        else:
            self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        stop = self.server.owner.stop
        for step in script.steps:
            if isinstance(step, Pause):
                stop.wait(step.seconds)
            elif isinstance(step, Stall):
                stop.wait(step.seconds)
                self._reset()
                return
            elif isinstance(step, Reset):
                self._reset()
                return
            else:
                self.wfile.write(step if script.sized else b"%x\r\n%s\r\n" % (len(step), step))
                self.wfile.flush()
        if not script.sized:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _reset(self) -> None:
        """Close with SO_LINGER 0: the client reads a TCP RST, not a FIN."""
        self.close_connection = True
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()


class _HTTP(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: ScriptedCloudServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # a client that went away mid-body (the tests break streams on purpose)
        super().handle_error(request, client_address)


class ScriptedCloudServer:
    """Start with ``start()`` or ``with``; ``base_url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self) -> None:
        self._http = _HTTP(("127.0.0.1", 0), _Handler)
        self._http.owner = self
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self.served = threading.Semaphore(0)  # released once per request played to its end (or its break)
        self.custom: dict[str, Script] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def start(self) -> ScriptedCloudServer:
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> ScriptedCloudServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def add(self, script: Script) -> str:
        """Register a hand-made script; the returned name selects it like a named one."""
        name = f"custom-{next(self._ids)}"
        self.custom[name] = script
        return name

    def wait_served(self, n: int = 1, timeout: float = 5.0) -> bool:
        """Block until ``n`` more requests were played out (the server's side of a stream is over)."""
        return all(self.served.acquire(timeout=timeout) for _ in range(n))

    def resolve(self, path: str, headers: dict[str, str]) -> tuple[str, Script]:
        raise NotImplementedError
