"""How the doctor's caller consumes a stream, as applications do: read it to the end, break after ``reads`` events and
close, close it unread, drop it unclosed, or (async) have its task cancelled while it waits.

Whatever the SDK raises to the caller (an in-band error, a broken connection, an HTTP error status) is what an
application would get; the doctor swallows it here, because the cell is judged by what otelstream reported.
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


def run_sync(open_stream: Callable[[], Any], caller: str, reads: int) -> None:
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
        elif caller == F.BREAK_CLOSE:
            for n, _ in enumerate(stream, 1):
                if n >= reads:
                    break
            stream.close()
        else:
            for _ in stream:
                pass
    except Exception:
        return


def _read_and_drop(open_stream: Callable[[], Any], reads: int) -> None:
    stream = open_stream()
    for _ in range(reads):
        next(stream)


async def run_async(
    open_stream: Callable[[], Awaitable[Any]], caller: str, reads: int, holding: threading.Event
) -> None:
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
        elif caller == F.BREAK_CLOSE:
            n = 0
            async for _ in stream:
                n += 1
                if n >= reads:
                    break
            await _aclose(stream)
        elif caller == F.CANCEL:
            await _cancel_while_waiting(stream, reads, holding)
        else:
            async for _ in stream:
                pass
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


async def _cancel_while_waiting(stream: Any, reads: int, holding: threading.Event) -> None:
    for _ in range(reads):
        await stream.__anext__()
    task = asyncio.ensure_future(stream.__anext__())
    deadline = time.monotonic() + _HOLD_WAIT_S
    while not holding.is_set() and not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    with contextlib.suppress(Exception):
        await _aclose(stream)  # the application's cleanup after a cancellation; the stream has ended already
