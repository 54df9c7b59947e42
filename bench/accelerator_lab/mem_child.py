"""Per-stream memory of each variant (``bench/accelerator_lab/measure.py`` runs it): N open, started wrappers (one item pulled), each
with its own Acct; tracemalloc's growth less that of N bare inner iterators started alike; and sys.getsizeof of
the wrapper and of the Acct (shallow: the pure Acct's ``__dict__`` and bucket lists are in the tracemalloc figure)."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
import tracemalloc

from bench.accelerator_lab.variants import VARIANTS

N = 2000


def on_end(a: object, exc: object) -> None:
    pass


def gen():
    yield from ("tok", "tok")


async def agen():
    yield "tok"
    yield "tok"


def measure(make) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    keep = make()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del keep
    return (after - before) / N


def sync_bare():
    out = [gen() for _ in range(N)]
    for g in out:
        next(g)
    return out


def sync_obs(v):
    def make():
        out = [v.observe(gen(), v.Acct(time.monotonic_ns), on_end) for _ in range(N)]
        for g in out:
            next(g)
        return out

    return make


def async_bare():
    async def run():
        out = [agen() for _ in range(N)]
        for g in out:
            await g.__anext__()
        return out

    return asyncio.run(run())


def async_obs(v):
    def make():
        async def run():
            out = [v.observe_async(agen(), v.Acct(time.monotonic_ns), on_end, asyncio.current_task)
                   for _ in range(N)]  # fmt: skip
            for g in out:
                await g.__anext__()
            return out

        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(run())
        finally:
            loop.close()

    return make


res = {}
for _ in range(2):  # the second round counts: the first warms the allocators and caches
    sb = measure(sync_bare)
    ab = measure(async_bare)
    for name, v in VARIANTS.items():
        a = v.Acct(time.monotonic_ns)
        w = v.observe(gen(), a, on_end)
        next(w)
        aw = v.observe_async(agen(), a, on_end, asyncio.current_task)
        res[name] = {
            "sync_tracemalloc": round(measure(sync_obs(v)) - sb),
            "async_tracemalloc": round(measure(async_obs(v)) - ab),
            "getsizeof_wrapper_sync": sys.getsizeof(w),
            "getsizeof_wrapper_async": sys.getsizeof(aw),
            "getsizeof_acct": sys.getsizeof(a),
        }
        w.close()
print(json.dumps(res))
