"""One callgrind process of ``bench/accelerator_lab/measure.py``: ``python bench/accelerator_lab/cg_child.py VARIANT KIND CLOCK STREAMS``.

KIND: ``sync`` (the observing iterator around a generator), ``async`` (around an async generator, on one asyncio
loop), ``async-suspend`` (the inner generator awaits ``asyncio.sleep(0)`` per item: every pull passes a suspension
through the observer), ``async-notask`` (as ``async`` with ``int`` for the pull identity in place of
``asyncio.current_task``: what the per-pull task lookup costs),
``reader`` (the body reader over 244-byte chunks, the bench's Chat event).
CLOCK: ``py`` (``time.monotonic_ns`` called) or ``native`` (a clock of None: the compiled variants read
CLOCK_MONOTONIC themselves). Phases, each closed by ``os.getppid()`` (a callgrind dump): bare 50, observed 50,
bare 250, observed 250, each ``STREAMS`` streams."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from bench.accelerator_lab.variants import VARIANTS

name, kind, clock_kind, streams = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
v = VARIANTS[name]
clock = time.monotonic_ns if clock_kind == "py" else None
ITEMS = ["tok"] * 250
CHUNK = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1750000000,"model":"m",'
         b'"choices":[{"index":0,"delta":{"content":"tok tok tok tok tok tok tok tok tok"},"finish_reason":null}]'
         b',"usage":null,"x":"padding to two hundred and forty-four bytes..."}\n\n')  # fmt: skip
CHUNKS = [CHUNK] * 250


def on_end(a: object, exc: object) -> None:
    pass


def gen(n: int):
    yield from ITEMS[:n]


def body(n: int):
    yield from CHUNKS[:n]


async def agen(n: int):
    for x in ITEMS[:n]:
        yield x


async def agen_suspend(n: int):
    for x in ITEMS[:n]:
        await asyncio.sleep(0)
        yield x


loop = asyncio.new_event_loop()
whoami = int if kind == "async-notask" else asyncio.current_task
inner_async = agen_suspend if kind == "async-suspend" else agen


async def a_bare(n: int) -> None:
    for _ in range(streams):
        async for _x in inner_async(n):
            pass


async def a_obs(n: int) -> None:
    for _ in range(streams):
        async for _x in v.observe_async(inner_async(n), v.Acct(clock), on_end, whoami):
            pass


def bare(n: int) -> None:
    if kind == "sync":
        for _ in range(streams):
            for _x in gen(n):
                pass
    elif kind == "reader":
        for _ in range(streams):
            for _x in body(n):
                pass
    else:
        loop.run_until_complete(a_bare(n))


def observed(n: int) -> None:
    if kind == "sync":
        for _ in range(streams):
            for _x in v.observe(gen(n), v.Acct(clock), on_end):
                pass
    elif kind == "reader":
        for _ in range(streams):
            for _x in v.reader(body(n), v.Acct(clock)):
                pass
    else:
        loop.run_until_complete(a_obs(n))


for _ in range(10):  # warm: every path quickened before anything is measured
    bare(50)
    observed(50)
os.getppid()
for n in (50, 250):
    bare(n)
    os.getppid()
    observed(n)
    os.getppid()
