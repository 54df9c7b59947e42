"""How a stream ended, as seen from outside the observing generators: whose close of the response body it was (the
body wrappers, ``body_closed``), and what an exception means (``is_cancel``, ``classify_common``,
``error_type_of``). Both learn the legacy ``httpx``'s classes the first time one of them is met (``_adopt_httpx``)."""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from types import FrameType
from typing import Any

import httpx2  # both SDKs depend on it; this module is imported only when one of them is

from otelstream import _guard
from otelstream.adapters import observing
from otelstream.adapters.body_kinds import wrap_body
from otelstream.adapters.calls import UNOBSERVED, Call, finish


def body_closed(call: Call) -> None:
    """The response body is being closed: by the stream's own iteration, or by the caller (abandoned, close, unless
    the stream already ended). Decided from what our own code is doing (``inside_pull``), looked up once, here, so that
    a pull costs nothing for it on a sync stream."""
    if call.tracker.ended:
        return
    if call.observed != UNOBSERVED:
        try:
            if inside_pull(call, inspect.currentframe()):
                return
        except Exception as exc:
            _guard.report("adapters.body_closed", exc)
    finish(call, "close")


def bind_response(call: Call, response: Any) -> None:
    """Wrap ``response.stream`` (an ``httpx2`` or ``httpx`` response) to see every close of the body, by any path
    (research §1.4 #3: the openai helpers close ``_response`` directly, so patching ``Stream.close`` would miss
    them)."""
    try:
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
            encoding = response.headers.get("content-encoding")
            if encoding and encoding.strip().lower() != "identity":
                wrapped._otelstream_plain = False  # type: ignore[attr-defined]  # compressed: comments uncountable
            response.stream = wrapped
    except Exception as exc:
        _guard.report("adapters.bind_response", exc)


class _BodyBase:
    """Forwards everything else to the wrapped body (``elapsed``, anthropic's ``stream_observer``)."""

    # class defaults: __getattr__ reads them without materializing the instance __dict__ (64 B per stream)
    _otelstream_body: Any = None
    _otelstream_call: Any = None
    _otelstream_plain = True  # the body is not content-encoded: its comment lines can be counted in its bytes
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
        return _read_sync(self._otelstream_body, self._otelstream_call, self._otelstream_plain)

    def close(self) -> None:
        body_closed(self._otelstream_call)
        self._otelstream_body.close()


class _AsyncBody(_BodyBase):
    def __aiter__(self) -> AsyncIterator[bytes]:
        return _read_async(self._otelstream_body, self._otelstream_call, self._otelstream_plain)

    async def aclose(self) -> None:
        body_closed(self._otelstream_call)
        await self._otelstream_body.aclose()


def _read_sync(body: Any, call: Call, plain: bool) -> Iterator[bytes]:
    """The body's chunks, passed on unchanged. In a body not content-encoded, the SSE comment lines (``: keepalive``)
    are counted here: the SDKs' decoders drop them. A comment line begins after LF or a bare CR, or at the chunk's
    start when the last chunk ended a line: byte searches, no parsing, written out in both readers because a call
    per chunk would add about 400 instructions to each. While it waits for the body's next chunk, this generator is on
    the stack (``inside_pull`` looks for it there)."""
    tracker = call.tracker
    line_start = True
    for chunk in body:
        if plain and chunk:
            try:
                found = chunk.count(b"\n:")  # a method call costs more than the scan: one, over the whole chunk
                if 13 in chunk:  # a bare CR ends a line too: rare, and a memchr is cheap
                    found += chunk.count(b"\r:")
                if line_start and chunk[0] == 0x3A:  # ':'
                    found += 1
                if found:
                    tracker.keepalive(found, tracker.clock())
                line_start = chunk[-1] in (0x0A, 0x0D)
            except Exception as exc:  # our bug: never changes what the caller reads (re-raised in strict mode)
                _guard.report("adapters.keepalives", exc)
        yield chunk


async def _read_async(body: Any, call: Call, plain: bool) -> AsyncIterator[bytes]:
    tracker = call.tracker
    line_start = True
    chunks = body.__aiter__()
    try:
        async for chunk in chunks:
            if plain and chunk:
                try:  # as in _read_sync
                    found = chunk.count(b"\n:")
                    if 13 in chunk:
                        found += chunk.count(b"\r:")
                    if line_start and chunk[0] == 0x3A:
                        found += 1
                    if found:
                        tracker.keepalive(found, tracker.clock())
                    line_start = chunk[-1] in (0x0A, 0x0D)
                except Exception as exc:
                    _guard.report("adapters.keepalives", exc)
            yield chunk
    finally:
        # the body's own iterator is closed here, in this task, rather than left to asyncio's finalizer
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


def inside_pull(call: Call, frame: FrameType | None) -> bool:
    """Whether the code running ``frame`` runs inside a pull of ``call``'s stream and not inside a read of its body:
    a close made there is the stream's own: the SDK's ``finally: response.close()``, the HTTP library's iterator
    ending at EOF, on an error or a cancelled read, a drain after ``[DONE]``; the observing generator sees how the pull
    ended. Any other close is the caller's: ``close()``, a context exit, a helper's ``_response.close()``, from
    another thread or task while a pull waits, or from a signal handler that interrupted a read.

    Never from which of the HTTP library's or the SDK's functions run (they move between minor releases): from our
    own generators on this stack, found by their module and name and told apart from another stream's by their
    ``call``. The stack is walked from the top, where a read of the body lies above the pull that asked for it. An
    exception thrown into an async pull runs the ``finally`` clauses below it without linking the frames above them,
    so there the task running the pull (``Call.pulling``) decides, when the runner names its tasks."""
    while frame is not None:
        ours = _OURS.get(frame.f_code.co_name)
        if ours is not None and frame.f_globals is ours and frame.f_locals.get("call") is call:
            return ours is observing.__dict__
        frame = frame.f_back
    pulling = call.pulling
    return pulling is not None and pulling is not observing.NO_TASK and observing.current_task() is pulling


# the generators of ours that inside_pull looks for: name -> the globals of the module that defines them
_OURS = {
    **{fn.__name__: observing.__dict__ for fn in (observing.observe_sync, observing.observe_async)},
    **{fn.__name__: globals() for fn in (_read_sync, _read_async)},
}


# the client libraries (top-level package names) whose bodies get the close hook: httpx2, both SDKs' client; httpx,
# openai 2.x's, adopted when the first response or exception of it is met (it need not be installed)
_ADOPTED = {"httpx2"}
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (httpx2.TransportError, httpx2.StreamError)


def _adopt_httpx() -> bool:
    """The legacy ``httpx`` (openai 2.x reads its streams with it), met in a response or an exception: the same body
    hooks and transport errors for its classes, once per process. False when it is not imported."""
    httpx = sys.modules.get("httpx")
    if httpx is None:
        return False
    global _TRANSPORT_ERRORS
    with _ADOPT_LOCK:
        if "httpx" not in _ADOPTED:
            _TRANSPORT_ERRORS = (*_TRANSPORT_ERRORS, httpx.TransportError, httpx.StreamError)
            _ADOPTED.add("httpx")
    return True


_ADOPT_LOCK = threading.Lock()


# --- exception mapping -------------------------------------------------------------------------
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
