"""How a stream ended, as seen from outside the observing generators: whose close of the response body it was (the
body wrappers, ``body_closed``), and what an exception means (DESIGN §2: ``is_cancel``, ``classify_common``,
``error_type_of``). Both learn the legacy ``httpx``'s classes the first time one of them is met (``_adopt_httpx``)."""

from __future__ import annotations

import asyncio
import sys
import threading
import types
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2  # both SDKs depend on it; this module is imported only when one of them is

from otelstream import _guard
from otelstream.adapters.body_kinds import wrap_body
from otelstream.adapters.calls import UNOBSERVED, Call, finish
from otelstream.adapters.observing import observe_async, observe_sync


def body_closed(call: Call) -> None:
    """The response body is being closed. By the stream's own iteration ending, it is not the caller's: the SDK's
    ``finally: response.close()`` (openai ``_streaming.py:117-119``, anthropic ``_streaming.py:124-130``), or httpx2's
    raw iterator's ``finally`` (EOF, an error, a cancelled pull, the generators closed at shutdown), which run
    *before* the end reaches our generator: leave the end to the generator. Otherwise it is the caller (``close()``,
    a context exit, a helper's ``_response.close()``, also from another thread or task while a pull waits, which then
    fails): abandoned (close), unless a terminal event was already seen."""
    if call.tracker.ended or (call.observed != UNOBSERVED and _iteration_ending()):
        return
    finish(call, "close")


def _iteration_ending() -> bool:
    """Whether the close comes straight from a stream's own iteration (once per stream): an observing generator, the
    SDK's stream loop or httpx2's raw iterator calling the response's close, on this stack. A close from anywhere else
    is the caller's: from another thread or task while a pull waits, or from a signal handler that interrupted the
    pull (its frame sits on top of the iteration's)."""
    frame: types.FrameType | None = sys._getframe(3)  # the caller of our body's close
    while frame is not None and _forwards_close(frame):
        frame = frame.f_back
    return frame is not None and frame.f_code in _ITERATION_CODES


def _forwards_close(frame: types.FrameType) -> bool:
    """The response's close, or another body wrapper's (anthropic's tracing wraps the body too) passing it on."""
    code = frame.f_code
    if code in _RESPONSE_CLOSE_CODES:
        return True
    return code.co_name in ("close", "aclose") and isinstance(frame.f_locals.get("self"), _BYTE_STREAMS)


# where a stream's own iteration closes its body: our observing generators, the SDKs' stream loops and drains (added by
# ``register_iteration_code`` when their patch is applied) and httpx2's raw iterators (a cancelled pull closes the
# body there, while the throw that reaches it leaves the generators around it off the frame chain)
_ITERATION_CODES = {
    observe_sync.__code__,
    observe_async.__code__,
    httpx2.Response.iter_raw.__code__,
    httpx2.Response.aiter_raw.__code__,
}
_RESPONSE_CLOSE_CODES = {httpx2.Response.close.__code__, httpx2.Response.aclose.__code__}


def register_iteration_code(func: Any) -> None:
    """A ``__stream__`` patch's ``prepare``: the SDK's loop closes the body in its ``finally``, openai's async loop
    also through its drain after ``[DONE]`` (HTTP/1.1): such a close is the iteration ending, not the caller's
    (``body_closed``). The SDK's own function objects, looked up when the patch is applied."""
    if type(func) is not types.FunctionType:
        return
    _ITERATION_CODES.add(func.__code__)
    drain = func.__globals__.get("drain_response_async")
    if type(drain) is types.FunctionType:
        _ITERATION_CODES.add(drain.__code__)


def bind_response(call: Call, response: Any) -> None:
    """Wrap ``response.stream`` (an ``httpx2`` or ``httpx`` response) to see every close of the body, by any path
    (research §1.4 #3: the openai helpers close ``_response`` directly, so patching ``Stream.close`` would miss
    them)."""
    with _guard.guard("adapters.bind_response"):
        tracker = call.tracker
        if not tracker.t_handed:  # the stream (or the raw response it is parsed from) reaches the caller now
            tracker.t_handed = tracker.clock()
        body = response.stream
        if isinstance(body, _BodyBase):
            return
        lib = type(response).__module__.partition(".")[0]
        if lib not in _ADOPTED and not (lib == "httpx" and _adopt_httpx()):
            return  # another client library: no close hook; the watch and the idle fallback cover it
        # of the body's byte-stream kind: httpx2.Response.close/aclose and anthropic's tracing check it
        wrapped = wrap_body(lib, body, _SyncBody, _AsyncBody, call)
        if wrapped is not None:
            response.stream = wrapped


class _BodyBase:
    """Forwards everything else to the wrapped body (``elapsed``, anthropic's ``stream_observer``)."""

    # class defaults: __getattr__ reads them without materializing the instance __dict__ (64 B per stream)
    _otelstream_body: Any = None
    _otelstream_call: Any = None
    stream_observer: Any  # set on the instance by the first lookup (no class default: that must reach __getattr__)

    def __init__(self, body: Any, call: Call) -> None:
        self._otelstream_body = body
        self._otelstream_call = call

    def __getattr__(self, name: str) -> Any:
        body = self._otelstream_body
        if body is None:
            raise AttributeError(name)
        if name == "stream_observer":
            # anthropic reads it on every item (_streaming.py:53-56): answer from the instance after the first
            # time, a miss included (anthropic's getattr default is None), instead of raising on every event
            value = getattr(body, name, None)
            self.stream_observer = value
            return value
        return getattr(body, name)


class _SyncBody(_BodyBase):
    def __iter__(self) -> Iterator[bytes]:
        return iter(self._otelstream_body)  # the inner iterator itself: no per-chunk cost

    def close(self) -> None:
        body_closed(self._otelstream_call)
        self._otelstream_body.close()


class _AsyncBody(_BodyBase):
    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._otelstream_body.__aiter__()  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        body_closed(self._otelstream_call)
        await self._otelstream_body.aclose()


# the client libraries (top-level package names) whose bodies get the close hook: httpx2, both SDKs' client; httpx,
# openai 2.x's, adopted when the first response or exception of it is met (it need not be installed)
_ADOPTED = {"httpx2"}
_BYTE_STREAMS: tuple[type, ...] = (httpx2.SyncByteStream, httpx2.AsyncByteStream)
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (httpx2.TransportError, httpx2.StreamError)


def _adopt_httpx() -> bool:
    """The legacy ``httpx`` (openai 2.x reads its streams with it), met in a response or an exception: the same body
    hooks, iteration codes and transport errors for its classes, once per process. False when it is not imported."""
    httpx = sys.modules.get("httpx")
    if httpx is None:
        return False
    global _BYTE_STREAMS, _TRANSPORT_ERRORS
    with _ADOPT_LOCK:
        if "httpx" not in _ADOPTED:
            _ITERATION_CODES.update((httpx.Response.iter_raw.__code__, httpx.Response.aiter_raw.__code__))
            _RESPONSE_CLOSE_CODES.update((httpx.Response.close.__code__, httpx.Response.aclose.__code__))
            _BYTE_STREAMS = (*_BYTE_STREAMS, httpx.SyncByteStream, httpx.AsyncByteStream)
            _TRANSPORT_ERRORS = (*_TRANSPORT_ERRORS, httpx.TransportError, httpx.StreamError)
            _ADOPTED.add("httpx")
    return True


_ADOPT_LOCK = threading.Lock()


# --- exception mapping (DESIGN §2) -------------------------------------------------------------------------
def is_cancel(exc: BaseException) -> bool:
    """The caller's task or program was cancelled or stopped: asyncio's cancellation, trio's (anyio on trio raises
    it too; checked by name, trio is not a dependency), Ctrl-C, ``sys.exit()``."""
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
        return True
    cls = type(exc)
    return cls.__name__ == "Cancelled" and cls.__module__.startswith("trio")


def classify_common(exc: BaseException) -> tuple[str, str | None] | None:
    """The SDK-independent part: cancellation, transport and decode errors. None when undecided."""
    if is_cancel(exc):
        return "cancel", None
    if isinstance(exc, GeneratorExit):
        return "gc", None
    if isinstance(exc, ValueError):  # json.JSONDecodeError and friends: undecodable data (error class protocol)
        return "transport_error", None
    if isinstance(exc, _TRANSPORT_ERRORS):
        return "transport_error", None
    if type(exc).__module__.startswith("httpx.") and "httpx" not in _ADOPTED and _adopt_httpx():
        return classify_common(exc)
    return None


def error_type_of(exc: BaseException) -> str | None:
    """The provider's error code/type from an SDK exception (``code``, then ``type``), if it has one."""
    for attr in ("code", "type"):
        value = exc.__dict__.get(attr) if hasattr(exc, "__dict__") else None
        if isinstance(value, str) and value:
            return value[:64]
        if type(value) is int:  # releases before openai 3.14 keep a numeric ``code`` as the int the server sent
            return str(value)
    return None
