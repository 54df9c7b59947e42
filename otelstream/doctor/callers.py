"""How the doctor's caller consumes a stream, as applications do: read it to the end, break after ``reads`` events and
close, close it unread, drop it unclosed, or (async) have its task cancelled while it waits.

Whatever the SDK raises to the caller (an in-band error, a broken connection, an HTTP error status) is what an
application would get; the doctor swallows it here, because the cell is judged by what otelstream reported.

``Watch`` hears what the caller saw: each item a drain or a cancelled task received (a release that looks one frame
ahead hands over fewer before a failure or a hold than the server sent), and the moment the caller's ``close()``
returns (a caller's close must be reported by then, whatever the release does inside ``close()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from otelstream.doctor import faults as F

_HOLD_WAIT_S: Final = 2.0  # how long a cancel cell waits for the read to reach the server's hold
_SETTLE_TURNS: Final = 8


class Watch:
    """What the caller saw of one cell's stream; ``closed`` is called as its ``close()`` returns."""

    def __init__(self, closed: Callable[[], None] | None = None) -> None:
        self.items = 0
        self.drained = False  # a drain reached the stream's end without the SDK raising anything to the caller
        self._closed = closed

    def closed(self) -> None:
        if self._closed is not None:
            self._closed()


def run_sync(open_stream: Callable[[], Any], caller: str, reads: int, watch: Watch | None = None) -> None:
    watch = watch or Watch()
    if caller == F.DROP:
        _read_and_drop(open_stream, reads)
        gc.collect()  # the SDK's stream sits in a reference cycle: only a cyclic collection finds it dropped
        return
    try:
        stream = open_stream()
    except Exception:
        return  # OPEN_FAILS: the SDK raised from create(), as it must
    try:
        if caller == F.CLOSE_UNREAD:
            stream.close()
            watch.closed()
        elif caller == F.BREAK_CLOSE:
            for n, _ in enumerate(stream, 1):
                if n >= reads:
                    break
            stream.close()
            watch.closed()
        else:
            for _ in stream:
                watch.items += 1
            watch.drained = True
    except Exception:
        return


def _read_and_drop(open_stream: Callable[[], Any], reads: int) -> None:
    stream = open_stream()
    for _ in range(reads):
        next(stream)


async def run_async(
    open_stream: Callable[[], Awaitable[Any]],
    caller: str,
    reads: int,
    holding: threading.Event,
    watch: Watch | None = None,
) -> None:
    watch = watch or Watch()
    if caller == F.DROP:
        await _aread_and_drop(open_stream, reads)
        gc.collect()
        return
    try:
        stream = await open_stream()
    except Exception:
        return
    try:
        if caller == F.CLOSE_UNREAD:
            await _aclose(stream)
            watch.closed()
        elif caller == F.BREAK_CLOSE:
            n = 0
            async for _ in stream:
                n += 1
                if n >= reads:
                    break
            await _aclose(stream)
            watch.closed()
        elif caller == F.CANCEL:
            await _cancel_while_waiting(stream, reads, holding, watch)
        else:
            async for _ in stream:
                watch.items += 1
            watch.drained = True
    except Exception:
        return


async def _aclose(stream: Any) -> None:
    """The SDK stream's async ``close()``, or an async generator's ``aclose()`` (google-genai hands out those)."""
    close = getattr(stream, "close", None) or stream.aclose
    await close()


async def _aread_and_drop(open_stream: Callable[[], Awaitable[Any]], reads: int) -> None:
    stream = await open_stream()
    for _ in range(reads):
        await stream.__anext__()


async def _cancel_while_waiting(stream: Any, reads: int, holding: threading.Event, watch: Watch) -> None:
    """The task reads ``reads`` items, then pulls once more and waits there (the server holds the body); it is
    cancelled once that pull began and the server holds. A release reading ahead reaches the hold before the pull
    does: the server's hold alone does not say the caller's pull waits."""
    pulling = threading.Event()

    async def read_then_wait() -> None:
        for _ in range(reads):
            await stream.__anext__()
            watch.items += 1
        pulling.set()
        await stream.__anext__()
        watch.items += 1

    task = asyncio.ensure_future(read_then_wait())
    deadline = time.monotonic() + _HOLD_WAIT_S
    while not (holding.is_set() and pulling.is_set()) and not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    for _ in range(_SETTLE_TURNS):  # the pull runs on to where it waits: in-memory, no I/O, a few turns of the loop
        await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    with contextlib.suppress(Exception):
        await _aclose(stream)  # the application's cleanup after a cancellation; the stream has ended already
