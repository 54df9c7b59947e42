"""A fake LLM provider on 127.0.0.1: OpenAI Responses (SSE + background resume + WebSocket mode), Chat
Completions, legacy Completions and Anthropic Messages, with realistic pacing and one fault per request.

    from otelstream.demo.exchange import FAULT_HEADER
    from otelstream.demo.provider import serve

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

This module is the provider's state: the request log, the fault choice, the spec each response is built from and
the specs remembered for background resume. Its two fronts serve the wire: ``http_server`` (one thread per
connection) and ``ws_server`` (the ``websockets`` sync server on its own port: ``ws_base_url``, the openai client's
``websocket_base_url``). Pauses wait on a stop event, so ``close()`` returns promptly even with hundreds of streams
mid-pause.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.events import StreamSpec, words_for
from otelstream.demo.exchange import RequestRecord, parse_int, parse_seconds
from otelstream.demo.http_server import FakeHTTPServer
from otelstream.demo.pacing import Pacing
from otelstream.demo.ws_server import FakeWebSocketServer

_SPEC_MEMORY: Final = 4096  # responses remembered for background resume
# the demo account's rate limits (per minute, a large account's): busy test loads use a visible share of them, not
# all (the healthy load must not trip OtelstreamRateLimitHeadroomLow)
_REQUESTS_PER_MINUTE: Final = 10_000
_TOKENS_PER_MINUTE: Final = 30_000_000
_TOKENS_PER_REQUEST: Final = 1_000


class FakeProvider:
    """The running fake provider. Use :func:`serve` (a context manager) or ``start()`` / ``close()``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        websocket: bool = True,
        ws_port: int = 0,
        pacing: Pacing | None = None,
        mix: F.FaultMix | str | Mapping[str, float] | None = None,
        seed: int = 0,
        tokens: tuple[int, int] = (8, 24),
        record: bool = False,
        log_limit: int = 10_000,
    ) -> None:
        self.host = host
        self.pacing = pacing or Pacing()
        self.mix = F.FaultMix.parse(mix) if mix is not None else None
        self.seed = seed
        self.tokens = tokens
        self.record = record
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._next_index = 0
        self._log: deque[RequestRecord] = deque(maxlen=log_limit)
        self._last_minute: deque[float] = deque()  # request start times, for the rate-limit headers
        self._mix_rng = random.Random(seed)
        self._specs: OrderedDict[str, StreamSpec] = OrderedDict()
        self._http = FakeHTTPServer((host, port), self)
        self._http_thread: threading.Thread | None = None
        self._ws: FakeWebSocketServer | None = None
        self._want_ws = websocket
        self._ws_port_wanted = ws_port

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        self._http_thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, name="otelstream-fake-http", daemon=True
        )
        self._http_thread.start()
        if self._want_ws:
            try:
                self._ws = FakeWebSocketServer(self, self.host, self._ws_port_wanted)
            except BaseException:  # its port taken: the HTTP front must not outlive the refusal
                self.close()
                raise
        return self

    def close(self) -> None:
        """Stop accepting, wake every pause, drop every open connection. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._http.close()
        if self._ws is not None:
            self._ws.close()

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
        return None if self._ws is None else self._ws.port

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

    # --- what both fronts (http_server, ws_server) call ---------------------------------------------
    @property
    def stopping(self) -> bool:
        """True once ``close()`` has begun: long waits end early."""
        return self._stop.is_set()

    def new_record(
        self, method: str, path: str, surface: str | None, fault: str, headers: Mapping[str, str], payload: Any
    ) -> RequestRecord:
        with self._lock:
            rec = RequestRecord(
                self._next_index, method, path, surface, fault, dict(headers), payload, t_start=time.monotonic()
            )
            self._next_index += 1
            self._log.append(rec)
            self._last_minute.append(rec.t_start)
        return rec

    def ratelimit_headers(self, rec: RequestRecord, surface: str | None, refused: bool) -> dict[str, str]:
        """The rate-limit headroom real providers send with every answer, in OpenAI's style (``x-ratelimit-*``) or
        Anthropic's (``anthropic-ratelimit-*``): the requests of the last minute count against a per-minute limit,
        each as ``_TOKENS_PER_REQUEST`` tokens; a refused request (429) says no request is left."""
        with self._lock:
            while self._last_minute and self._last_minute[0] < rec.t_start - 60.0:
                self._last_minute.popleft()
            used = len(self._last_minute)
        requests_left = 0 if refused else max(0, _REQUESTS_PER_MINUTE - used)
        tokens_left = max(0, _TOKENS_PER_MINUTE - used * _TOKENS_PER_REQUEST)
        if surface == names.MESSAGES:
            prefix = "anthropic-ratelimit-"
            return {
                f"{prefix}requests-limit": str(_REQUESTS_PER_MINUTE), f"{prefix}requests-remaining": str(requests_left),
                f"{prefix}tokens-limit": str(_TOKENS_PER_MINUTE), f"{prefix}tokens-remaining": str(tokens_left),
                f"{prefix}output-tokens-limit": str(_TOKENS_PER_MINUTE // 5),
                f"{prefix}output-tokens-remaining": str(max(0, _TOKENS_PER_MINUTE // 5 - used * 50)),
            }  # fmt: skip
        return {
            "x-ratelimit-limit-requests": str(_REQUESTS_PER_MINUTE),
            "x-ratelimit-remaining-requests": str(requests_left),
            "x-ratelimit-limit-tokens": str(_TOKENS_PER_MINUTE),
            "x-ratelimit-remaining-tokens": str(tokens_left),
        }

    def choose_fault(self, asked: str | None, surface: str) -> tuple[str, str | None]:
        """(fault, problem): the fault asked for, else one drawn from the mix, else ok."""
        if asked:
            asked = asked.strip()
            if asked in F.CALLER_FAULTS:  # a caller behaviour, not something the server does
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

    def pacing_for(self, get: Any) -> Pacing:
        pacing = self.pacing
        overrides: dict[str, float] = {}
        for key, attr in (("ttfd", "ttfd_s"), ("gap", "gap_s"), ("pause", "pause_s")):
            value = parse_seconds(get(key))
            if value is not None:
                overrides[attr] = value
        return replace(pacing, **overrides) if overrides else pacing

    def spec_for(
        self,
        rec: RequestRecord,
        surface: str,
        payload: Mapping[str, Any],
        fault: str,
        tokens: Any,
        stream_id: str | None = None,
    ) -> StreamSpec:
        rng = random.Random(f"{self.seed}:{rec.index}")  # str seeds are hashed stably: same seed, same bodies
        count = parse_int(tokens)
        if count is None:
            count = rng.randint(*self.tokens)
        stream_options = payload.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
        n = payload.get("n")
        spec = StreamSpec(
            surface=surface,
            fault=fault,
            model=str(payload.get("model") or "fake-model"),
            response_id=f"resp_{self.seed & 0xFFFF:04x}{rec.index:024x}",
            words=words_for(rng, count),
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

    def remembered(self, response_id: str) -> StreamSpec | None:
        with self._lock:
            return self._specs.get(response_id)

    def pause(self, seconds: float) -> bool:
        """Sleep; True if the provider is shutting down (the caller then drops the stream)."""
        return self._stop.wait(seconds)


# the provider is its own context manager: ``with serve(...) as provider`` starts it and closes it at the end (port
# 0: any free port); one name for the constructor, so its parameters are declared once
serve = FakeProvider
