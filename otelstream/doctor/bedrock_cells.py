"""The doctor's Bedrock cells: ConverseStream, and an Anthropic model's invoke stream (``messages``), through the
installed boto3 (sync) and aiobotocore (async) clients, observed by the real patches, with no network. Each answer is
served in-process by a handler on botocore's public ``before-send`` event (a handler that returns a response is sent
nothing: the way moto serves botocore): an event stream framed here, its chunks pulled by botocore as from a socket,
a reset or a read timeout raised by the body with the exception its HTTP library raises (urllib3 sync, aiohttp
async), a 429/503 as the service answers them.

What is relied on: the ``before-send`` event and its response-returning contract (public), ``botocore.awsrequest
.AWSResponse(url, status_code, headers, raw)`` / aiobotocore's ``AioAWSResponse`` (public), and the raw body's reading
methods botocore calls for an event stream (``raw.stream()`` sync, ``raw.content.iter_chunks()`` async; and ``read`` for
an error body): a release that changes them fails its cells here, by name."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import importlib.util
import json
import struct
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Final

from otelstream.doctor import faults as F
from otelstream.doctor.routing import CELL

_URL: Final = "http://otelstream-doctor.invalid"
_REQUEST_ID: Final = "doctor-bedrock-request"


def installed() -> bool:
    return importlib.util.find_spec("botocore") is not None and importlib.util.find_spec("boto3") is not None


def installed_async() -> bool:
    return importlib.util.find_spec("aiobotocore") is not None


# --- the event-stream framing (what the service sends) ----------------------------------------------------------
def _header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def frame(kind: str, payload: dict[str, Any], exception: bool = False) -> bytes:
    """One event-stream message: an event, or an exception message, of type ``kind``."""
    headers = (_header(":message-type", "exception") + _header(":exception-type", kind) if exception
               else _header(":message-type", "event") + _header(":event-type", kind))  # fmt: skip
    headers += _header(":content-type", "application/json")
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return head + struct.pack(">I", zlib.crc32(head))


def _delta(text: str) -> bytes:
    return frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}})


_START: Final = frame("messageStart", {"role": "assistant"})
_DELTAS: Final = (_delta("Hel"), _delta("lo"))


def _stop(reason: str) -> list[bytes]:
    return [frame("contentBlockStop", {"contentBlockIndex": 0}), frame("messageStop", {"stopReason": reason})]


_METADATA: Final = frame("metadata", {"usage": {"inputTokens": 5, "outputTokens": 2, "totalTokens": 7},
                                      "metrics": {"latencyMs": 1}})  # fmt: skip
_RESET, _TIMEOUT = "reset", "timeout"

# --- InvokeModelWithResponseStream of an Anthropic model: each ``chunk`` carries one Messages event, base64 ---------
INVOKE: Final = "invoke"  # the cells' route (``Cell.via``): their streams are ``messages`` ones
INVOKE_MODEL: Final = "anthropic.claude-doctor"


def _chunk(event: dict[str, Any]) -> bytes:
    return frame("chunk", {"bytes": base64.b64encode(json.dumps(event).encode()).decode()})


_MESSAGE: Final[dict[str, Any]] = {"id": "msg_doctor", "type": "message", "role": "assistant", "model": "claude-doctor",
                   "content": [], "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip
_I_START: Final = (_chunk({"type": "message_start", "message": _MESSAGE}),
                   _chunk({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
_I_DELTAS: Final = tuple(_chunk({"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": t}}) for t in ("Hel", "lo"))  # fmt: skip
_I_METRICS: Final = {"amazon-bedrock-invocationMetrics": {"inputTokenCount": 5, "outputTokenCount": 2,
                                                          "invocationLatency": 2, "firstByteLatency": 1}}  # fmt: skip


def _i_stop(reason: str) -> list[bytes]:
    return [_chunk({"type": "content_block_stop", "index": 0}),
            _chunk({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 2}}),
            _chunk({"type": "message_stop", **_I_METRICS})]  # fmt: skip


@dataclass(frozen=True)
class Served:
    frames: tuple[bytes, ...] = ()
    status: int = 200
    error_type: str | None = None
    fails: str | None = None  # RESET / TIMEOUT after the frames
    hold_before: int | None = None  # the async body holds back from this frame on (a cancel cell)


# fault name -> (what is served, the expected measures: events, deltas, usage)
def _served(fault: F.Fault, via: str = "") -> tuple[Served, int, int, list[int | None]]:
    if via == INVOKE:
        return _invoke_served(fault)
    done = (_START, *_DELTAS, *_stop("end_turn"), _METADATA)
    none: list[int | None] = [None, None]
    table: dict[str, tuple[Served, int, int, list[int | None]]] = {
        "completed": (Served(done), 6, 2, [5, 2]),
        "cut": (Served((_START, *_DELTAS)), 3, 2, none),
        "reset": (Served((_START, _DELTAS[0]), fails=_RESET), 2, 1, none),
        "body_timeout": (Served((_START, _DELTAS[0]), fails=_TIMEOUT), 2, 1, none),
        "error_after_output": (Served((_START, _DELTAS[0], frame("modelStreamErrorException",
                                                                  {"message": "doctor"}, exception=True))), 2, 1, none),
        "incomplete": (Served((_START, *_DELTAS, *_stop("max_tokens"), _METADATA)), 6, 2, [5, 2]),
        "break_close": (Served(done), 2, 1, none),
        "close": (Served(done), 0, 0, none),
        "cancel": (Served(done, hold_before=1), 1, 0, none),
        "gc": (Served(done), 2, 1, none),
        "http_429": (Served(status=429, error_type="ThrottlingException"), 0, 0, none),
        "http_503": (Served(status=503, error_type="ServiceUnavailableException"), 0, 0, none),
    }  # fmt: skip
    return table[fault.name]


def _invoke_served(fault: F.Fault) -> tuple[Served, int, int, list[int | None]]:
    """The same faults on an Anthropic model's invoke stream. Its ``message_start`` reports the input tokens (and
    one output token) before any delta: a stream that ends early keeps what the server reported by then."""
    done = (*_I_START, *_I_DELTAS, *_i_stop("end_turn"))
    early: list[int | None] = [5, 1]
    none: list[int | None] = [None, None]
    error = frame("modelStreamErrorException", {"message": "doctor"}, exception=True)
    table: dict[str, tuple[Served, int, int, list[int | None]]] = {
        "completed": (Served(done), 7, 2, [5, 2]),
        "cut": (Served((*_I_START, *_I_DELTAS)), 4, 2, early),
        "reset": (Served((*_I_START, _I_DELTAS[0]), fails=_RESET), 3, 1, early),
        "body_timeout": (Served((*_I_START, _I_DELTAS[0]), fails=_TIMEOUT), 3, 1, early),
        "error_after_output": (Served((*_I_START, _I_DELTAS[0], error)), 3, 1, early),
        "incomplete": (Served((*_I_START, *_I_DELTAS, *_i_stop("max_tokens"))), 7, 2, [5, 2]),
        "break_close": (Served(done), 3, 1, early),
        "close": (Served(done), 0, 0, none),
        "cancel": (Served(done, hold_before=1), 1, 0, early),
        "gc": (Served(done), 3, 1, early),
        "http_429": (Served(status=429, error_type="ThrottlingException"), 0, 0, none),
        "http_503": (Served(status=503, error_type="ServiceUnavailableException"), 0, 0, none),
    }  # fmt: skip
    return table[fault.name]


FAULT_NAMES: Final = ("completed", "cut", "reset", "body_timeout", "error_after_output", "incomplete", "break_close",
                      "close", "cancel", "gc", "http_429", "http_503")  # fmt: skip


def faults() -> list[F.Fault]:
    return [F.BY_NAME[name] for name in FAULT_NAMES]


def expected(fault: F.Fault, via: str = "") -> dict[str, Any]:
    _, events, deltas, usage = _served(fault, via)
    return {"outcome": fault.outcome, "error_class": fault.error_class, "abandoned_reason": fault.abandoned_reason,
            "ttfd": deltas > 0, "events": events, "deltas": deltas, "usage": usage, "unobserved": []}  # fmt: skip


# --- the in-process answers ---------------------------------------------------------------------------------------
class _SyncRaw:
    """What botocore reads an event stream (``stream()``) or an error body (``stream()`` via ``content``) from."""

    def __init__(self, served: Served, body: bytes = b"") -> None:
        self.served, self.body = served, body

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        if self.body:
            yield self.body
            return
        yield from self.served.frames
        if self.served.fails is not None:
            import urllib3.exceptions as u  # botocore's HTTP library

            if self.served.fails == _RESET:
                raise u.ProtocolError("Connection broken (otelstream doctor)", ConnectionResetError(104, "reset"))
            raise u.ReadTimeoutError(None, _URL, "Read timed out. (otelstream doctor)")  # type: ignore[arg-type]

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        return b"".join(self.stream())

    def close(self) -> None:
        pass


class _AsyncContent:
    def __init__(self, served: Served) -> None:
        self.served = served

    async def iter_chunks(self) -> AsyncIterator[tuple[bytes, bool]]:
        served = self.served
        for i, chunk in enumerate(served.frames):
            if i == served.hold_before:
                await asyncio.Event().wait()  # a server holding back its answer: only a cancellation ends this
            yield chunk, True
        if served.fails is not None:
            import aiohttp  # aiobotocore's HTTP library

            if served.fails == _RESET:
                raise aiohttp.ClientPayloadError("Response payload is not completed (otelstream doctor)")
            raise asyncio.TimeoutError()


class _AsyncRaw:
    def __init__(self, served: Served, body: bytes = b"") -> None:
        self.content = _AsyncContent(served)
        self.body = body

    async def read(self) -> bytes:
        return self.body

    def close(self) -> None:
        pass


def _answer(served: Served, is_async: bool, url: str) -> Any:
    if served.status != 200:
        headers = {"x-amzn-requestid": _REQUEST_ID, "content-type": "application/json",
                   "x-amzn-errortype": f"{served.error_type}:doctor"}  # fmt: skip
        body = json.dumps({"message": "otelstream doctor"}).encode()
    else:
        headers = {"x-amzn-requestid": _REQUEST_ID, "content-type": "application/vnd.amazon.eventstream"}
        body = b""
    if is_async:
        from aiobotocore.awsrequest import AioAWSResponse

        return AioAWSResponse(url, served.status, headers, _AsyncRaw(served, body))
    from botocore.awsrequest import AWSResponse

    return AWSResponse(url, served.status, headers, _SyncRaw(served, body))


def client_kwargs() -> dict[str, Any]:
    from botocore.config import Config

    return {"service_name": "bedrock-runtime", "endpoint_url": _URL, "region_name": "us-east-1",
            "aws_access_key_id": "otelstream-doctor", "aws_secret_access_key": "otelstream-doctor",
            "config": Config(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=5)}  # fmt: skip


def serve(client: Any, plans: dict[str, Served], *, is_async: bool) -> None:
    """Answer this client's Bedrock requests from ``plans``, by the doctor cell current where the call is made."""

    def before_send(request: Any, **kwargs: Any) -> Any:
        cell = CELL.get()
        return None if cell is None else _answer(plans[cell], is_async, request.url)

    client.meta.events.register("before-send.bedrock-runtime", before_send, unique_id="otelstream-doctor-send")


def plans_for(cells: list[Any]) -> dict[str, Served]:
    return {c.key: _served(c.fault, c.via)[0] for c in cells}


_PROMPT: Final = [{"role": "user", "content": [{"text": "x"}]}]


def _swallow(exc: BaseException) -> None:
    """What the SDK raised to the caller (an in-band error, a broken body, an HTTP error): the cell is judged by the
    report."""


_INVOKE_BODY: Final = json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 16,
                                   "messages": [{"role": "user", "content": "x"}]})  # fmt: skip


def _open(client: Any, via: str) -> Any:
    """The streaming call (a coroutine on an aiobotocore client): ConverseStream, or an Anthropic model's invoke."""
    if via == INVOKE:
        return client.invoke_model_with_response_stream(modelId=INVOKE_MODEL, body=_INVOKE_BODY)
    return client.converse_stream(modelId="doctor-model", messages=_PROMPT)


def _to_first_delta(via: str) -> int:
    """The events up to the first delta: messageStart; message_start and content_block_start on invoke."""
    return 3 if via == INVOKE else 2


def run_sync(client: Any, caller: str, via: str = "") -> None:
    try:
        stream = _open(client, via)["body" if via == INVOKE else "stream"]  # the response dict is not kept: a drop
    except Exception as exc:
        _swallow(exc)
        return
    try:
        if caller == F.CLOSE_UNREAD:
            stream.close()
        elif caller in (F.BREAK_CLOSE, F.DROP):
            it = iter(stream)
            for _ in range(_to_first_delta(via)):
                next(it)
            del it
            if caller == F.BREAK_CLOSE:
                stream.close()
            else:
                del stream
                gc.collect()  # botocore's EventStream sits in a reference cycle with its generator
        else:
            for _ in stream:
                pass
    except Exception as exc:
        _swallow(exc)


async def run_async(client: Any, caller: str, via: str = "") -> None:
    try:
        response = await _open(client, via)
    except Exception as exc:
        _swallow(exc)
        return
    stream = response["body" if via == INVOKE else "stream"]
    del response
    try:
        if caller == F.CLOSE_UNREAD:
            stream.close()
        elif caller in (F.BREAK_CLOSE, F.DROP):
            it = stream.__aiter__()
            for _ in range(_to_first_delta(via)):
                await it.__anext__()
            await it.aclose()  # the caller's loop is left; the stream itself is closed, or dropped
            del it
            if caller == F.BREAK_CLOSE:
                stream.close()
            else:
                del stream
                gc.collect()
        elif caller == F.CANCEL:
            first = asyncio.Event()

            async def read() -> None:
                async for _ in stream:
                    first.set()

            task = asyncio.ensure_future(read())
            await first.wait()  # the reader now waits for the first delta, which the server holds back
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        else:
            async for _ in stream:
                pass
    except Exception as exc:
        _swallow(exc)
