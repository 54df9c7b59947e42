"""A fake LLM provider on 127.0.0.1: OpenAI Responses (SSE + background resume + WebSocket mode), Chat
Completions, legacy Completions and Anthropic Messages, with realistic pacing and one fault per request.

    from otelstream.demo.provider import serve, FAULT_HEADER

    with serve(record=True) as provider:
        client = openai.OpenAI(**provider.openai_kwargs())
        for event in client.responses.create(model="m", input="hi", stream=True,
                                             extra_headers={FAULT_HEADER: "cut"}):
            ...
        provider.wait_idle()
        provider.requests[-1].fault, provider.requests[-1].wire  # "cut", the SSE body exactly as sent

The fault is taken from the ``x-otelstream-fault`` request header (WebSocket: ``metadata.otelstream_fault`` on
``response.create``, or the header at connect), else drawn from the server's ``mix``, else ``ok``. Pacing can be
overridden per request with ``x-otelstream-ttfd`` / ``-gap`` / ``-pause`` (seconds) and ``x-otelstream-tokens``
(WebSocket: ``metadata.otelstream_ttfd`` …). Every response names what it served in ``x-otelstream-fault`` and
``x-otelstream-request`` (the index into ``provider.requests``).

The HTTP side is one thread per connection (``ThreadingMixIn``, daemon threads, a deep accept queue, TCP_NODELAY
so every frame leaves at once and client-side gaps are real); the WebSocket side is the ``websockets`` sync server
on its own port (``ws_base_url``; pass it as the openai client's ``websocket_base_url``). Pauses wait on a stop
event, so ``close()`` returns promptly even with hundreds of streams mid-pause.
"""

from __future__ import annotations

import json
import random
import select
import socket
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs, urlsplit

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo import streams as S

if TYPE_CHECKING:
    from websockets.sync.server import Server as WsServer
    from websockets.sync.server import ServerConnection

FAULT_HEADER: Final = "x-otelstream-fault"
TTFD_HEADER: Final = "x-otelstream-ttfd"
GAP_HEADER: Final = "x-otelstream-gap"
PAUSE_HEADER: Final = "x-otelstream-pause"
TOKENS_HEADER: Final = "x-otelstream-tokens"
REQUEST_HEADER: Final = "x-otelstream-request"  # response header: index of the record in provider.requests
WS_FAULT_KEY: Final = "otelstream_fault"  # response.create metadata key on the WebSocket

_SURFACE_BY_PATH: Final = {
    "/v1/responses": names.RESPONSES,
    "/v1/chat/completions": names.CHAT_COMPLETIONS,
    "/v1/completions": names.COMPLETIONS,
    "/v1/messages": names.MESSAGES,
}
_RESUME_PREFIX: Final = "/v1/responses/"
_WS_PATHS: Final = ("/v1/responses", "/responses")
_SPEC_MEMORY: Final = 4096
_INDEX_TEXT: Final = (
    b"otelstream fake provider: POST /v1/responses, /v1/chat/completions, /v1/completions, /v1/messages;"
    b" GET /v1/responses/{id}?stream=true&starting_after=N; WebSocket /v1/responses on the ws port\n"
)  # responses remembered for background resume


@dataclass(slots=True)
class RequestRecord:
    """One request (one ``response.create`` on a WebSocket) and what was served for it."""

    index: int
    method: str  # POST / GET / WS
    path: str
    surface: str | None
    fault: str
    request_headers: dict[str, str]
    request_json: Any
    response_id: str | None = None
    stream_id: str | None = None
    status: int = 0  # HTTP status sent (101 for WebSocket responses, 0 when none was sent)
    events_sent: int = 0
    ended: str = ""  # eof / reset / close / client_gone / http_error / no_headers / bad_request / shutdown
    t_start: float = 0.0  # time.monotonic()
    t_end: float = 0.0
    body: bytearray = field(default_factory=bytearray)  # SSE body (de-chunked) or JSONL transcript, if recording
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def wire(self) -> bytes:
        """The response body exactly as sent (``.sse``), or the WebSocket transcript (``.jsonl``)."""
        return bytes(self.body)

    @property
    def suffix(self) -> str:
        """File suffix ``otelstream check`` expects for :attr:`wire`."""
        return ".jsonl" if self.method == "WS" else ".sse"


class _HTTPServer(ThreadingMixIn, HTTPServer):
    daemon_threads = True  # a stuck client never keeps the process alive
    block_on_close = False  # close() must not wait for streams parked in keep-alive reads
    request_queue_size = 1024  # hundreds of clients connect at once at the start of a run
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], provider: FakeProvider) -> None:
        self.provider = provider
        super().__init__(addr, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client resetting an idle keep-alive connection is routine, not worth a traceback on stderr
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class FakeProvider:
    """The running fake provider. Use :func:`serve` (a context manager) or ``start()`` / ``close()``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        websocket: bool = True,
        ws_port: int = 0,
        pacing: S.Pacing | None = None,
        mix: F.FaultMix | str | Mapping[str, float] | None = None,
        seed: int = 0,
        tokens: tuple[int, int] = (8, 24),
        record: bool = False,
        log_limit: int = 10_000,
    ) -> None:
        self.host = host
        self.pacing = pacing or S.Pacing()
        self.mix = F.FaultMix.parse(mix) if mix is not None else None
        self.seed = seed
        self.tokens = tokens
        self.record = record
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._next_index = 0
        self._log: deque[RequestRecord] = deque(maxlen=log_limit)
        self._mix_rng = random.Random(seed)
        self._specs: OrderedDict[str, S.StreamSpec] = OrderedDict()
        self._conns: set[socket.socket] = set()
        self._http = _HTTPServer((host, port), self)
        self._http_thread: threading.Thread | None = None
        self._ws: WsServer | None = None
        self._ws_thread: threading.Thread | None = None
        self._ws_conns: set[ServerConnection] = set()
        self._want_ws = websocket
        self._ws_port_wanted = ws_port

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        self._http_thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, name="otelstream-fake-http", daemon=True
        )
        self._http_thread.start()
        if self._want_ws:
            from websockets.sync.server import serve as ws_serve  # optional dependency: only when asked for

            self._ws = ws_serve(
                self._ws_handler,
                self.host,
                self._ws_port_wanted,
                process_request=self._ws_process_request,
                compression=None,  # the real endpoint's frames are what the SDK parses; keep them plain
                ping_interval=None,
            )
            self._ws_thread = threading.Thread(target=self._ws.serve_forever, name="otelstream-fake-ws", daemon=True)
            self._ws_thread.start()
        return self

    def close(self) -> None:
        """Stop accepting, wake every pause, drop every open connection. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._http.shutdown()
        self._http.server_close()
        with self._lock:
            conns, ws_conns = list(self._conns), list(self._ws_conns)
        for sock in conns:
            _shutdown(sock)
        if self._ws is not None:
            self._ws.shutdown()
            for conn in ws_conns:
                _shutdown(conn.socket)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- addresses -------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    @property
    def ws_port(self) -> int | None:
        if self._ws is None:
            return None
        return int(self._ws.socket.getsockname()[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the Anthropic client's ``base_url``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (the OpenAI client's ``base_url``)."""
        return self.base_url + "/v1"

    @property
    def ws_base_url(self) -> str | None:
        """``ws://127.0.0.1:WSPORT/v1`` (the OpenAI client's ``websocket_base_url``)."""
        return None if self.ws_port is None else f"ws://{self.host}:{self.ws_port}/v1"

    def openai_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for ``openai.OpenAI`` / ``AsyncOpenAI`` pointed at this provider."""
        kwargs: dict[str, Any] = {"api_key": "sk-otelstream-demo", "base_url": self.openai_base_url}
        if self.ws_base_url is not None:
            kwargs["websocket_base_url"] = self.ws_base_url
        kwargs.update(overrides)
        return kwargs

    def anthropic_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for ``anthropic.Anthropic`` / ``AsyncAnthropic`` pointed at this provider."""
        return {"api_key": "sk-ant-otelstream-demo", "base_url": self.base_url, **overrides}

    # --- the log -----------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of the request log, oldest first (the last ``log_limit`` requests)."""
        with self._lock:
            return list(self._log)

    def clear(self) -> None:
        with self._lock:
            self._log.clear()

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until every logged request has been fully served (or broken off); False on timeout."""
        deadline = time.monotonic() + timeout
        return all(rec.done.wait(max(0.0, deadline - time.monotonic())) for rec in self.requests)

    # --- shared request logic ------------------------------------------------------------------------
    def _new_record(
        self, method: str, path: str, surface: str | None, fault: str, headers: Mapping[str, str], payload: Any
    ) -> RequestRecord:
        with self._lock:
            rec = RequestRecord(
                self._next_index, method, path, surface, fault, dict(headers), payload, t_start=time.monotonic()
            )
            self._next_index += 1
            self._log.append(rec)
        return rec

    def _choose_fault(self, asked: str | None, surface: str) -> tuple[str, str | None]:
        """(fault, problem): the fault asked for, else one drawn from the mix, else ok."""
        if asked:
            asked = asked.strip()
            if asked == F.ABANDON:  # a caller behaviour, not something the server does
                return F.OK, None
            if asked not in F.SERVER_FAULTS:
                return F.OK, f"unknown fault {asked!r}; known: {', '.join(F.SERVER_FAULTS)}"
            if not F.is_supported(asked, surface):
                return F.OK, f"fault {asked!r} does not apply to {surface}"
            return asked, None
        if self.mix is None:
            return F.OK, None
        usable = [(f, w) for f, w in self.mix.weights if f in F.SERVER_FAULTS and F.is_supported(f, surface)]
        if not usable:
            return F.OK, None
        with self._lock:
            return self._mix_rng.choices([f for f, _ in usable], weights=[w for _, w in usable])[0], None

    def _pacing(self, get: Any) -> S.Pacing:
        pacing = self.pacing
        overrides: dict[str, float] = {}
        for key, attr in (("ttfd", "ttfd_s"), ("gap", "gap_s"), ("pause", "pause_s")):
            value = _float(get(key))
            if value is not None:
                overrides[attr] = value
        return replace(pacing, **overrides) if overrides else pacing

    def _spec(
        self,
        rec: RequestRecord,
        surface: str,
        payload: Mapping[str, Any],
        fault: str,
        tokens: Any,
        stream_id: str | None = None,
    ) -> S.StreamSpec:
        rng = random.Random(f"{self.seed}:{rec.index}")  # str seeds are hashed stably: same seed, same bodies
        count = _int(tokens)
        if count is None:
            count = rng.randint(*self.tokens)
        stream_options = payload.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
        n = payload.get("n")
        spec = S.StreamSpec(
            surface=surface,
            fault=fault,
            model=str(payload.get("model") or "fake-model"),
            response_id=f"resp_{self.seed & 0xFFFF:04x}{rec.index:024x}",
            words=S.words_for(rng, count),
            input_tokens=rng.randint(8, 64),
            n=n if isinstance(n, int) and 1 <= n <= 16 else 1,
            include_usage=include_usage,
            background=surface == names.RESPONSES and bool(payload.get("background")),
            stream_id=stream_id,
        )
        rec.response_id = spec.response_id
        if surface == names.RESPONSES:
            with self._lock:
                self._specs[spec.response_id] = replace(spec, fault=F.OK)
                while len(self._specs) > _SPEC_MEMORY:
                    self._specs.popitem(last=False)
        return spec

    def _remembered(self, response_id: str) -> S.StreamSpec | None:
        with self._lock:
            return self._specs.get(response_id)

    def _pause(self, seconds: float) -> bool:
        """Sleep; True if the provider is shutting down (the caller then drops the stream)."""
        return self._stop.wait(seconds)

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(sock)
            else:
                self._conns.discard(sock)

    # --- WebSocket ---------------------------------------------------------------------------------
    def _ws_process_request(self, conn: ServerConnection, request: Any) -> Any:
        if urlsplit(request.path).path.rstrip("/") not in _WS_PATHS:
            return conn.respond(404, "otelstream fake provider: WebSocket mode lives at /v1/responses\n")
        return None

    def _ws_handler(self, conn: ServerConnection) -> None:
        with self._lock:
            self._ws_conns.add(conn)
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
                        target=self._ws_lane,
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
                self._ws_conns.discard(conn)

    def _ws_lane(
        self,
        conn: ServerConnection,
        lane_id: str | None,
        queue: deque[dict[str, Any]],
        wake: threading.Event,
        headers: Mapping[str, str],
        send_lock: threading.Lock,
    ) -> None:
        """One lane: its responses run one after another (FIFO), lanes interleave."""
        while not self._stop.is_set():
            if not queue:
                wake.wait(0.5)
                wake.clear()
                continue
            cmd = queue.popleft()
            if not cmd:
                return
            if not self._ws_response(conn, lane_id, cmd, headers, send_lock):
                return

    def _ws_response(
        self,
        conn: ServerConnection,
        lane_id: str | None,
        cmd: dict[str, Any],
        headers: Mapping[str, str],
        send_lock: threading.Lock,
    ) -> bool:
        """Serve one response.create; False when the connection is gone."""
        surface = names.RESPONSES_WEBSOCKET
        metadata = cmd.get("metadata") if isinstance(cmd.get("metadata"), dict) else {}
        assert isinstance(metadata, dict)

        def get(key: str) -> Any:
            value = metadata.get(f"otelstream_{key}")
            return value if value is not None else headers.get(f"x-otelstream-{key}")

        fault, problem = self._choose_fault(get("fault"), surface)
        rec = self._new_record("WS", "/v1/responses", surface, fault, headers, cmd)
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
                return self._ws_send(conn, rec, S.Event(payload, S.ERROR_EVENT), send_lock)
            spec = self._spec(rec, surface, cmd, fault, get("tokens"), stream_id=lane_id)
            pacing = self._pacing(get)
            steps = S.script(S.build_events(spec), spec, pacing, random.Random(f"{self.seed}:{rec.index}:t"))
            for step in steps:
                if isinstance(step, S.Pause):
                    if self._pause(step.seconds):
                        rec.ended = "shutdown"
                        return False
                elif isinstance(step, S.Event):
                    if not self._ws_send(conn, rec, step, send_lock):
                        return False
                elif isinstance(step, S.Reset):
                    rec.ended = "reset"
                    _shutdown(conn.socket)  # TCP teardown without a close frame: 1006 on the client
                    return False
                else:  # S.Close
                    rec.ended = "close"
                    conn.close(1000)
                    return False
            rec.ended = "eof"
            return True
        finally:
            rec.t_end = time.monotonic()
            rec.done.set()

    def _ws_send(self, conn: ServerConnection, rec: RequestRecord, event: S.Event, lock: threading.Lock) -> bool:
        text = S.encode_ws(event)
        try:
            with lock:
                conn.send(text)
        except Exception:
            rec.ended = "client_gone"
            return False
        rec.events_sent += 1
        if self.record:
            rec.body += text.encode() + b"\n"
        return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive + chunked bodies, like the real APIs
    disable_nagle_algorithm = True  # without it small frames wait for delayed ACKs (~40 ms) and gaps lie
    server: _HTTPServer
    server_version = "otelstream-fake/1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.provider._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.provider._track(self.connection, False)

    # --- routing ---------------------------------------------------------------------------------------
    def do_POST(self) -> None:
        provider = self.server.provider
        path = _normalise(urlsplit(self.path).path)
        raw = self._read_body()
        surface = _SURFACE_BY_PATH.get(path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            payload = json.loads(raw) if raw else {}
        except ValueError:
            payload = None
        fault, problem = (F.OK, None) if surface is None else provider._choose_fault(headers.get(FAULT_HEADER), surface)
        rec = provider._new_record("POST", path, surface, fault, headers, payload)
        try:
            if surface is None:
                self._json_error(rec, 404, "not_found", f"no such endpoint: POST {path}")
            elif not isinstance(payload, dict):
                self._json_error(rec, 400, "invalid_request_error", "request body is not a JSON object")
            elif problem is not None:
                self._json_error(rec, 400, "invalid_request_error", problem)
            elif not payload.get("stream"):
                self._json_error(
                    rec, 400, "invalid_request_error", "the otelstream fake provider only streams: pass stream=True"
                )
            else:
                spec = provider._spec(rec, surface, payload, fault, headers.get(TOKENS_HEADER))
                self._serve(rec, spec, S.build_events(spec))
        finally:
            rec.t_end = time.monotonic()
            rec.done.set()

    def do_GET(self) -> None:
        provider = self.server.provider
        url = urlsplit(self.path)
        path = _normalise(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        if not path.startswith(_RESUME_PREFIX):
            rec = provider._new_record("GET", path, None, F.OK, headers, None)
            try:
                body = _INDEX_TEXT
                self._send_plain(rec, 200 if path in ("/", "/v1/healthz") else 404, body)
            finally:
                rec.t_end = time.monotonic()
                rec.done.set()
            return
        response_id = path[len(_RESUME_PREFIX) :]
        fault, problem = provider._choose_fault(headers.get(FAULT_HEADER), names.RESPONSES)
        rec = provider._new_record("GET", path, names.RESPONSES, fault, headers, query)
        rec.response_id = response_id
        try:
            spec = provider._remembered(response_id)
            if problem is not None:
                self._json_error(rec, 400, "invalid_request_error", problem)
            elif spec is None:
                self._json_error(rec, 404, "invalid_request_error", f"No response found with id '{response_id}'.")
            elif query.get("stream", "").lower() != "true":
                final = next(e for e in S.build_events(spec) if e.kind == S.TERMINAL)
                assert isinstance(final.data, dict)
                self._send_json(rec, 200, final.data["response"])
            else:
                spec = replace(spec, fault=fault)
                self._serve(rec, spec, S.resumed(S.build_events(spec), _int(query.get("starting_after"))))
        finally:
            rec.t_end = time.monotonic()
            rec.done.set()

    # --- responses -------------------------------------------------------------------------------------
    def _serve(self, rec: RequestRecord, spec: S.StreamSpec, events: list[S.Event]) -> None:
        provider = self.server.provider
        if spec.fault in (F.HTTP_500, F.HTTP_429, F.OVERLOADED):
            # each provider's own shape: Anthropic says overloaded with 529 overloaded_error, OpenAI with a 503
            overloaded = 529 if spec.surface == names.MESSAGES else 503
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
        pacing = provider._pacing(lambda key: self.headers.get(f"x-otelstream-{key}"))
        steps = S.script(events, spec, pacing, random.Random(f"{provider.seed}:{rec.index}:t"))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self._common_headers(rec, spec.surface)
        self.end_headers()
        rec.status = 200
        try:
            for step in steps:
                if isinstance(step, S.Pause):
                    if provider._pause(step.seconds):
                        rec.ended = "shutdown"
                        self.close_connection = True
                        return
                elif isinstance(step, S.Event):
                    data = S.encode_sse(step)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    rec.events_sent += 1
                    if provider.record:
                        rec.body += data
                elif isinstance(step, S.Reset):
                    # the peer sees the body end without the terminating chunk: a transport error, not an EOF
                    rec.ended = "reset"
                    self.close_connection = True
                    _shutdown(self.connection)
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
        while not provider._stop.is_set() and time.monotonic() < deadline:
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return  # the client closed (read timeout): free the thread now
                except OSError:
                    return
                time.sleep(0.05)  # pipelined bytes: keep holding
        _shutdown(self.connection)

    def _common_headers(self, rec: RequestRecord, surface: str | None) -> None:
        request_id = f"req_{rec.index:016x}"
        self.send_header("request-id" if surface == names.MESSAGES else "x-request-id", request_id)
        self.send_header(REQUEST_HEADER, str(rec.index))
        self.send_header(FAULT_HEADER, rec.fault)

    def _json_error(self, rec: RequestRecord, status: int, kind: str, message: str, surface: str | None = None) -> None:
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
        length = _int(self.headers.get("content-length")) or 0
        return self.rfile.read(length) if length > 0 else b""


@contextmanager
def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    websocket: bool = True,
    ws_port: int = 0,
    pacing: S.Pacing | None = None,
    mix: F.FaultMix | str | Mapping[str, float] | None = None,
    seed: int = 0,
    tokens: tuple[int, int] = (8, 24),
    record: bool = False,
    log_limit: int = 10_000,
) -> Iterator[FakeProvider]:
    """Run a :class:`FakeProvider` for the duration of the ``with`` block (port 0: any free port)."""
    provider = FakeProvider(
        host,
        port,
        websocket=websocket,
        ws_port=ws_port,
        pacing=pacing,
        mix=mix,
        seed=seed,
        tokens=tokens,
        record=record,
        log_limit=log_limit,
    )
    provider.start()
    try:
        yield provider
    finally:
        provider.close()


def _normalise(path: str) -> str:
    """Accept paths with or without the ``/v1`` prefix (clients configured with a bare host)."""
    path = path.rstrip("/") or "/"
    if path != "/" and not path.startswith("/v1/"):
        path = "/v1" + path
    return path


def _shutdown(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _float(value: Any) -> float | None:
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if result >= 0 else None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
