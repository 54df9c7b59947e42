"""The doctor's private event loop (the runtime self-check runs it on a background thread, in the middle of the
application's own output) closes only after the closes it owes have run: a stream it abandoned, found by a cyclic
collection just as its last cell ends, is closed by asyncio's finalizer in a task of that loop, which a loop closed at
once destroyed pending (``Task was destroyed but it is pending!``, an ``async_generator_athrow`` task)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A generator in a reference cycle (as the SDKs' streams are), left suspended, whose close takes several loop turns
# (as a body's close over a socket does); the cycle is collected as the loop's main coroutine ends, which another
# thread's allocations can make happen at any moment. Each close that runs to its end prints one line.
SCRIPT = textwrap.dedent(
    """
    import asyncio, gc, sys
    from otelstream.doctor.private_loop import run_loop

    async def body():
        try:
            while True:
                yield b"x"
        finally:
            for _ in range(5):
                await asyncio.sleep(0)
            print("closed", flush=True)

    class Stream:
        pass

    async def last_cell():
        stream = Stream()
        stream.iterator = body()
        stream.me = stream
        await stream.iterator.__anext__()
        del stream
        gc.collect()

    for _ in range(int(sys.argv[1])):
        run_loop(last_cell())
    gc.collect()
    """
)


def test_a_close_started_as_the_loop_ends_runs_to_its_end() -> None:
    runs = 20
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONASYNCIODEBUG": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(runs)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Task was destroyed" not in done.stderr, done.stderr
    assert done.stdout.split() == ["closed"] * runs, (done.stdout, done.stderr)
