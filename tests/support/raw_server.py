"""A raw HTTP/1.1 server on 127.0.0.1 that misbehaves at the socket level, chosen per request by a header.

Faults the fake provider does not make: a reset in the middle of an event, a chunk declared longer than what is
sent, a slow drip (one byte per interval), silence after the first event (client read timeout), no response at all,
headers then close before any body byte.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterator

FAULT = "x-rel-fault"
DRIP = "x-rel-drip-s"


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = b""
        while b"\r\n\r\n" not in head:
            data = sock.recv(65536)
            if not data:
                return
            head += data
        header_blob, _, rest = head.partition(b"\r\n\r\n")
        headers = {}
        for line in header_blob.split(b"\r\n")[1:]:
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        need = int(headers.get("content-length", "0")) - len(rest)
        while need > 0:
            data = sock.recv(65536)
            if not data:
                return
            need -= len(data)
        fault = headers.get(FAULT, "ok")
        body = self.server.body
        status = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-request-id: req_raw\r\n"
        if fault == "no_headers":
            self.server.stop.wait(30)
            return
        if fault == "close_before_body":
            sock.sendall(status + b"content-length: %d\r\n\r\n" % len(body))
            _reset(sock)
            return
        if fault == "drip":
            interval = float(headers.get(DRIP, "0.1"))
            sock.sendall(status + b"content-length: %d\r\n\r\n" % len(body))
            for i in range(len(body)):
                if self.server.stop.wait(interval):
                    return
                sock.sendall(body[i : i + 1])
            return
        sock.sendall(status + b"transfer-encoding: chunked\r\n\r\n")
        first_end = body.find(b"\n\n") + 2
        if fault == "reset_mid_event":
            second = body.find(b"\n\n", first_end) + 2
            mid = first_end + (second - first_end) // 2
            _chunk(sock, body[:mid])
            time.sleep(0.01)
            _reset(sock)
        elif fault == "half_chunk":
            piece = body[first_end:]
            _chunk(sock, body[:first_end])
            sock.sendall(b"%x\r\n" % len(piece) + piece[: len(piece) // 2])  # promised more than sent
            time.sleep(0.01)
            sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        elif fault == "timeout_after_first":
            _chunk(sock, body[:first_end])
            self.server.stop.wait(30)
        else:
            _chunk(sock, body)
            sock.sendall(b"0\r\n\r\n")


def _chunk(sock: socket.socket, data: bytes) -> None:
    sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))


def _reset(sock: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets a TCP RST, not a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.stop = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)


@contextlib.contextmanager
def raw_server(body: bytes) -> Iterator[str]:
    """Serve ``body`` (an SSE body) with per-request faults; yields ``http://127.0.0.1:PORT``."""
    server = _Server(body)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
