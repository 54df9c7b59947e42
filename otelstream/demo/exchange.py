"""One exchange with the fake provider, as its callers and both of its fronts (HTTP and WebSocket) see it: the
request headers (WebSocket: ``metadata`` keys) that steer it, the response headers that say what was served, the
:class:`RequestRecord` the provider logs for it, and the value parsing and connection teardown both fronts share.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from otelstream.demo.events import StreamSpec
    from otelstream.demo.pacing import Pacing

FAULT_HEADER: Final = "x-otelstream-fault"
TTFD_HEADER: Final = "x-otelstream-ttfd"
GAP_HEADER: Final = "x-otelstream-gap"
PAUSE_HEADER: Final = "x-otelstream-pause"
TOKENS_HEADER: Final = "x-otelstream-tokens"
REQUEST_HEADER: Final = "x-otelstream-request"  # response header: index of the record in provider.requests
WS_FAULT_KEY: Final = "otelstream_fault"  # response.create metadata key on the WebSocket
_EVENTSTREAM_PATHS: Final = ("/converse-stream", "/invoke-with-response-stream")  # Bedrock's binary bodies


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
    # what the answer said of rate limits (the only response headers kept: tests compare otelstream's gauges to them)
    ratelimit_headers: dict[str, str] = field(default_factory=dict)
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
        if self.method == "WS":
            return ".jsonl"
        return ".eventstream" if self.path.endswith(_EVENTSTREAM_PATHS) else ".sse"


def drop_connection(sock: socket.socket) -> None:
    """Shut the socket down both ways, wherever its protocol is (the peer reads an abrupt end, no clean close)."""
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def parse_seconds(value: Any) -> float | None:
    """A pacing override in seconds (header or metadata value); None when absent, malformed or negative."""
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if result >= 0 else None


def parse_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class Provider(Protocol):
    """What both fronts ask of the provider that runs them (``provider.FakeProvider``): the fronts depend on this,
    not on the provider module, which builds them."""

    pacing: Pacing
    seed: int
    record: bool

    @property
    def stopping(self) -> bool: ...

    def new_record(
        self, method: str, path: str, surface: str | None, fault: str, headers: Mapping[str, str], payload: Any
    ) -> RequestRecord: ...

    def ratelimit_headers(self, rec: RequestRecord, surface: str | None, refused: bool) -> dict[str, str]: ...

    def choose_fault(self, asked: str | None, surface: str) -> tuple[str, str | None]: ...

    def pacing_for(self, get: Any) -> Pacing: ...

    def spec_for(
        self,
        rec: RequestRecord,
        surface: str,
        payload: Mapping[str, Any],
        fault: str,
        tokens: Any,
        stream_id: str | None = None,
    ) -> StreamSpec: ...

    def remembered(self, response_id: str) -> StreamSpec | None: ...

    def pause(self, seconds: float) -> bool: ...
