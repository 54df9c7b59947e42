"""The fake provider's HTTP front: routing (``POST`` a stream on each surface, ``GET`` a background resume), the
chunked SSE body paced step by step, HTTP-level faults (error statuses, ``no_headers``) and each provider's JSON error
shape. One thread per connection (``ThreadingMixIn``, daemon threads, a deep accept queue, TCP_NODELAY so every frame
leaves at once and client-side gaps are real).
"""

from __future__ import annotations

import json
import random
import select
import socket
import sys
import threading
import time
import uuid
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.bodies import build_events, resumed
from otelstream.demo.cloud_http import BEDROCK, CloudRoute, route
from otelstream.demo.events import TERMINAL, Event, StreamSpec, encode_sse
from otelstream.demo.exchange import (
    FAULT_HEADER,
    REQUEST_HEADER,
    TOKENS_HEADER,
    Provider,
    RequestRecord,
    drop_connection,
    parse_int,
)
from otelstream.demo.pacing import Pause, Reset, script

_SURFACE_BY_PATH: Final = {
    "/v1/responses": names.RESPONSES,
    "/v1/chat/completions": names.CHAT_COMPLETIONS,
    "/v1/completions": names.COMPLETIONS,
    "/v1/messages": names.MESSAGES,
}
_RESUME_PREFIX: Final = "/v1/responses/"
_WS_PATHS: Final = ("/v1/responses", "/responses")
_INDEX_TEXT: Final = (
    b"otelstream fake provider: POST /v1/responses, /v1/chat/completions, /v1/completions, /v1/messages,"
    b" /v1beta/models/{model}:streamGenerateContent, /model/{modelId}/converse-stream,"
    b" /model/{modelId}/invoke-with-response-stream;"
    b" GET /v1/responses/{id}?stream=true&starting_after=N; WebSocket /v1/responses on the ws port\n"
)


class FakeHTTPServer(ThreadingMixIn, HTTPServer):
    """The HTTP front: one daemon thread per connection, each connection tracked so ``close()`` can drop it."""

    daemon_threads = True  # a stuck client never keeps the process alive
    block_on_close = False  # close() must not wait for streams parked in keep-alive reads
    request_queue_size = 1024  # hundreds of clients connect at once at the start of a run
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], provider: Provider) -> None:
        self.provider = provider
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        super().__init__(addr, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client resetting an idle keep-alive connection is routine, not worth a traceback on stderr
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def track(self, sock: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(sock)
            else:
                self._conns.discard(sock)

    def close(self) -> None:
        """Stop accepting and drop every open connection, mid-stream or idle."""
        self.shutdown()
        self.server_close()
        with self._lock:
            conns = list(self._conns)
        for sock in conns:
            drop_connection(sock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive + chunked bodies, like the real APIs
    disable_nagle_algorithm = True  # without it small frames wait for delayed ACKs (~40 ms) and gaps lie
    server: FakeHTTPServer
    server_version = "otelstream-fake/1"
    _cloud: CloudRoute | None = None  # the request being answered is a Gemini or Bedrock one

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    # --- routing ---------------------------------------------------------------------------------------
    def do_POST(self) -> None:
        provider = self.server.provider
        path = urlsplit(self.path).path
        cloud = self._cloud = route(path)
        if cloud is None:
            path = _normalise(path)
        raw = self._read_body()
        surface = cloud.surface if cloud is not None else _SURFACE_BY_PATH.get(path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            payload = json.loads(raw) if raw else {}
        except ValueError:
            payload = None
        fault, problem = (F.OK, None) if surface is None else provider.choose_fault(headers.get(FAULT_HEADER), surface)
        if cloud is not None and problem is None and not cloud.supports(fault):  # a mix's keepalive on invoke
            asked = headers.get(FAULT_HEADER)
            fault, problem = F.OK, (f"fault {fault!r} does not apply to Bedrock invoke streams" if asked else None)
        rec = provider.new_record("POST", path, surface, fault, headers, payload)
        try:
            if surface is None:
                self._json_error(rec, 404, "not_found", f"no such endpoint: POST {path}")
            elif not isinstance(payload, dict):
                self._json_error(rec, 400, "invalid_request_error", "request body is not a JSON object")
            elif problem is not None:
                self._json_error(rec, 400, "invalid_request_error", problem)
            elif cloud is None and not payload.get("stream"):  # the clouds stream by path, not by a flag
                self._json_error(
                    rec, 400, "invalid_request_error", "the otelstream fake provider only streams: pass stream=True"
                )
            else:
                if cloud is not None:
                    payload = {**payload, "model": cloud.model}
                spec = provider.spec_for(rec, surface, payload, fault, headers.get(TOKENS_HEADER))
                self._serve(rec, spec, build_events(spec))
        finally:
            rec.t_end = time.monotonic()
            rec.done.set()

    def do_GET(self) -> None:
        provider = self.server.provider
        self._cloud = None
        url = urlsplit(self.path)
        path = _normalise(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        if not path.startswith(_RESUME_PREFIX):
            rec = provider.new_record("GET", path, None, F.OK, headers, None)
            try:
                body = _INDEX_TEXT
                self._send_plain(rec, 200 if path in ("/", "/v1/healthz") else 404, body)
            finally:
                rec.t_end = time.monotonic()
                rec.done.set()
            return
        response_id = path[len(_RESUME_PREFIX) :]
        fault, problem = provider.choose_fault(headers.get(FAULT_HEADER), names.RESPONSES)
        rec = provider.new_record("GET", path, names.RESPONSES, fault, headers, query)
        rec.response_id = response_id
        try:
            spec = provider.remembered(response_id)
            if problem is not None:
                self._json_error(rec, 400, "invalid_request_error", problem)
            elif spec is None:
                self._json_error(rec, 404, "invalid_request_error", f"No response found with id '{response_id}'.")
            elif query.get("stream", "").lower() != "true":
                final = next(e for e in build_events(spec) if e.kind == TERMINAL)
                assert isinstance(final.data, dict)
                self._send_json(rec, 200, final.data["response"])
            else:
                spec = replace(spec, fault=fault)
                self._serve(rec, spec, resumed(build_events(spec), parse_int(query.get("starting_after"))))
        finally:
            rec.t_end = time.monotonic()
            rec.done.set()

    # --- responses -------------------------------------------------------------------------------------
    def _serve(self, rec: RequestRecord, spec: StreamSpec, events: list[Event]) -> None:
        provider = self.server.provider
        if spec.fault in (F.HTTP_500, F.HTTP_429, F.OVERLOADED):
            # each provider's own shape: Anthropic says overloaded with 529 overloaded_error, OpenAI with a 503
            overloaded = 529 if spec.surface == names.MESSAGES and self._cloud is None else 503
            status = {F.HTTP_500: 500, F.HTTP_429: 429, F.OVERLOADED: overloaded}[spec.fault]
            kind = "rate_limit_exceeded" if status == 429 else "server_error"
            message = {
                500: "The server had an error while processing your request.",
                429: "Rate limit reached for requests (fake).",
            }.get(status, "The engine is currently overloaded, please try again later (fake).")
            self._json_error(rec, status, kind, message, surface=spec.surface)
            return
        if spec.fault == F.NO_HEADERS:
            self._hold(rec, provider.pacing.no_headers_s)
            return
        pacing = provider.pacing_for(lambda key: self.headers.get(f"x-otelstream-{key}"))
        steps = script(events, spec, pacing, random.Random(f"{provider.seed}:{rec.index}:t"))
        cloud = self._cloud
        encode = encode_sse if cloud is None else cloud.encoder(spec)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8" if cloud is None else cloud.content_type)
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self._common_headers(rec, spec.surface)
        self.end_headers()
        rec.status = 200
        try:
            for step in steps:
                if isinstance(step, Pause):
                    if provider.pause(step.seconds):
                        rec.ended = "shutdown"
                        self.close_connection = True
                        return
                elif isinstance(step, Event):
                    data = encode(step)
                    if not data:  # an event this wire does not carry (a ping on Bedrock's event stream)
                        continue
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    rec.events_sent += 1
                    if provider.record:
                        rec.body += data
                elif isinstance(step, Reset):
                    # the peer sees the body end without the terminating chunk: a transport error, not an EOF
                    rec.ended = "reset"
                    self.close_connection = True
                    drop_connection(self.connection)
                    return
            self.wfile.write(b"0\r\n\r\n")
            rec.ended = "eof"
        except OSError:  # BrokenPipe / ConnectionReset: the client closed the stream early
            rec.ended = "client_gone"
            self.close_connection = True

    def _hold(self, rec: RequestRecord, seconds: float) -> None:
        """``no_headers``: keep the request unanswered until the client gives up, shutdown, or ``seconds``."""
        rec.ended = "no_headers"
        self.close_connection = True
        deadline = time.monotonic() + seconds
        provider = self.server.provider
        while not provider.stopping and time.monotonic() < deadline:
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return  # the client closed (read timeout): free the thread now
                except OSError:
                    return
                time.sleep(0.05)  # pipelined bytes: keep holding
        drop_connection(self.connection)

    def _common_headers(self, rec: RequestRecord, surface: str | None) -> None:
        self.send_header(REQUEST_HEADER, str(rec.index))
        self.send_header(FAULT_HEADER, rec.fault)
        if self._cloud is not None:  # Gemini and Bedrock send no rate-limit headroom headers
            if self._cloud.cloud == BEDROCK:
                self.send_header(names.BEDROCK_REQUEST_ID_HEADER, _aws_request_id(rec))
            return
        request_id = f"req_{rec.index:016x}"
        self.send_header("request-id" if surface == names.MESSAGES else "x-request-id", request_id)
        rec.ratelimit_headers = self.server.provider.ratelimit_headers(rec, surface, rec.fault == F.HTTP_429)
        for name, value in rec.ratelimit_headers.items():
            self.send_header(name, value)

    def _json_error(self, rec: RequestRecord, status: int, kind: str, message: str, surface: str | None = None) -> None:
        if self._cloud is not None:
            self._cloud_error(rec, self._cloud, status, message)
            return
        surface = surface or rec.surface
        if surface == names.MESSAGES:
            kinds = {500: "api_error", 429: "rate_limit_error", 404: "not_found_error", 529: "overloaded_error"}
            anthropic_kind = kinds.get(status, "invalid_request_error")
            body: dict[str, Any] = {"type": "error", "error": {"type": anthropic_kind, "message": message}}
        else:
            code = kind if kind in ("rate_limit_exceeded",) else None
            body = {
                "error": {
                    "message": message,
                    "type": kind if status != 429 else "requests",
                    "param": None,
                    "code": code,
                }
            }
        rec.ended = "http_error" if status >= 500 or status == 429 else "bad_request"
        self._send_json(rec, status, body, retry=False)

    def _send_json(self, rec: RequestRecord, status: int, body: Any, retry: bool = True) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        if not retry:
            # both SDKs honour this: a fault asked for is served once, not hidden behind the client's retries
            self.send_header("x-should-retry", "false")
        self._common_headers(rec, rec.surface)
        self._finish_error(rec, status, data)

    def _cloud_error(self, rec: RequestRecord, cloud: CloudRoute, status: int, message: str) -> None:
        headers, data = cloud.error(status, message, _aws_request_id(rec))
        rec.ended = "http_error" if status >= 500 or status == 429 else "bad_request"
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.send_header(REQUEST_HEADER, str(rec.index))
        self.send_header(FAULT_HEADER, rec.fault)
        self._finish_error(rec, status, data)

    def _finish_error(self, rec: RequestRecord, status: int, data: bytes) -> None:
        """The headers sent: the error body, recorded when the provider records."""
        self.end_headers()
        rec.status = status
        if self.server.provider.record:
            rec.body += data
        try:
            self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def _send_plain(self, rec: RequestRecord, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        rec.status = status
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        length = parse_int(self.headers.get("content-length")) or 0
        return self.rfile.read(length) if length > 0 else b""


def _aws_request_id(rec: RequestRecord) -> str:
    return str(uuid.UUID(int=rec.index + 1))


def _normalise(path: str) -> str:
    """Accept paths with or without the ``/v1`` prefix (clients configured with a bare host)."""
    path = path.rstrip("/") or "/"
    if path != "/" and not path.startswith("/v1/"):
        path = "/v1" + path
    return path
