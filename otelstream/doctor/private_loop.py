"""The doctor's private event loop for a mode's async cells: run on the doctor's own thread, and closed only once
nothing of its own is left running."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any, Final

_SETTLE_S: Final = 2.0  # how long the closes left running when a loop's cells are done may take before a cancel


def run_loop(main: Any) -> None:
    """A private event loop on this thread, closed only once nothing of its own is left running.

    A stream the matrix abandoned sits in a reference cycle (the SDK's stream and its generator); a collection, on
    any thread and at any time, hands each of its generators to asyncio's finalizer, which closes it in a task of
    this loop. Started as the last cell ends, such a task outlives a loop closed at once and is destroyed pending
    (``Task was destroyed but it is pending!``, in the middle of the application's output). So the cycles are
    collected here, while the loop runs, and the loop closes only after those tasks and the generators still open
    have finished."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main)
        gc.collect()  # this loop's dropped streams are finalized now, on this thread: their closes are ours to await
        loop.run_until_complete(_settle())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(_settle())
    finally:
        loop.close()


async def _settle() -> None:
    """Wait for every other task of this loop to end (the finalizer's closes are scheduled, not yet started: yield
    once first); after ``_SETTLE_S``, cancel what is left, as ``asyncio.run`` does, and wait for that."""
    await asyncio.sleep(0)
    me = asyncio.current_task()
    deadline = time.monotonic() + _SETTLE_S
    while True:
        left = [t for t in asyncio.all_tasks() if t is not me]
        if not left:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            for task in left:
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)
            return
        await asyncio.wait(left, timeout=remaining)
