"""Our wrapper of a response's body (``response.stream``): it sees every close of the body, by any path (the openai
helpers close ``_response`` directly), each read's end or failure (facts for ``close_ownership``), and counts the
SSE comment lines (``: keepalive``) in the bytes that pass, which the SDKs' decoders drop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from otelstream import _guard, accelerator
from otelstream.adapters.body_kinds import wrap_body
from otelstream.adapters.calls import Call
from otelstream.adapters.close_ownership import body_closed, body_ended, body_raised
from otelstream.adapters.exceptions import ADOPTED, adopt_httpx


def bind_response(call: Call, response: Any) -> None:
    """Wrap ``response.stream`` (an ``httpx2`` or ``httpx`` response) to see the body's reads and closes."""
    try:
        tracker = call.tracker
        if not tracker.t_handed:  # the stream (or the raw response it is parsed from) reaches the caller now
            tracker.t_handed = tracker.clock()
        body = response.stream
        if isinstance(body, _BodyBase):
            return
        lib = type(response).__module__.partition(".")[0]
        if lib not in ADOPTED and not (lib == "httpx" and adopt_httpx()):
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
        return read_sync(self._otelstream_body, self._otelstream_call, self._otelstream_plain)

    def close(self) -> None:
        body_closed(self._otelstream_call)
        self._otelstream_body.close()


class _AsyncBody(_BodyBase):
    def __aiter__(self) -> AsyncIterator[bytes]:
        return read_async(self._otelstream_body, self._otelstream_call, self._otelstream_plain)

    async def aclose(self) -> None:
        body_closed(self._otelstream_call)
        await self._otelstream_body.aclose()


def read_sync_py(body: Any, call: Call, plain: bool) -> Iterator[bytes]:
    """The body's chunks, passed on unchanged; its end and a read that raised are recorded (``close_ownership``).
    In a body not content-encoded, the SSE comment lines are counted: a comment line begins after LF or a bare CR, or
    at the chunk's start when the last chunk ended a line: byte searches, no parsing, written out in both readers
    (sync/async twins) because a call per chunk would add about 400 instructions to each. The pure-Python reference
    of the compiled accelerator's ``Reader``."""
    tracker = call.tracker
    line_start = True
    try:
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
    except GeneratorExit:  # our reader was closed by whoever iterates it: not a read
        raise
    except BaseException:
        body_raised(call)
        raise
    body_ended(call)


def _scan(tracker: Any, chunk: Any, line_start: bool) -> bool:
    """The compiled reader's count for a chunk that is not ``bytes`` (``read_sync_py``'s statements); the new
    ``line_start``."""
    found = chunk.count(b"\n:")
    if 13 in chunk:
        found += chunk.count(b"\r:")
    if line_start and chunk[0] == 0x3A:
        found += 1
    if found:
        tracker.keepalive(found, tracker.clock())
    return bool(chunk[-1] in (0x0A, 0x0D))


def configure_native(native: Any) -> None:
    """Hand the compiled module what its reader calls (idempotent)."""
    native.configure_reader(_guard.report, "adapters.keepalives", body_raised, body_ended, _scan)


# the sync reader that runs: the compiled one where it was built (``accelerator``), else the reference
read_sync: Callable[[Any, Call, bool], Iterator[bytes]] = read_sync_py
if accelerator.native is not None:
    configure_native(accelerator.native)
    read_sync = accelerator.native.Reader


async def read_async(body: Any, call: Call, plain: bool) -> AsyncIterator[bytes]:
    tracker = call.tracker
    line_start = True
    chunks = body.__aiter__()
    try:
        async for chunk in chunks:
            if plain and chunk:
                try:  # as in read_sync
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
    except GeneratorExit:
        await _close_chunks(chunks)
        raise
    except BaseException:
        body_raised(call)
        await _close_chunks(chunks)
        raise
    body_ended(call)
    await _close_chunks(chunks)


async def _close_chunks(chunks: Any) -> None:
    # the body's own iterator is closed here, in this task, rather than left to asyncio's finalizer
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()
