"""``workers/main.py time``: wall-clock time per event of one configuration, sync or async, after a warm-up."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time

from bench import canned, configs
from bench.workers.clients import make_client, run_async, run_sync


def cmd_time(a) -> dict:
    setup = configs.setup(a.config, a.surface)
    body = canned.frames(a.surface, a.deltas)
    client = make_client(a.surface, a.mode, setup, lambda _r: body)
    per_event: list[float] = []
    events = 0
    if a.mode == "sync":
        for _ in range(a.warmup):
            run_sync(client, a.surface)
        gc.collect()
        for _ in range(a.streams):
            t0 = time.perf_counter_ns()
            events = run_sync(client, a.surface)
            per_event.append((time.perf_counter_ns() - t0) / events)
    else:

        async def main() -> int:
            for _ in range(a.warmup):
                await run_async(client, a.surface)
            gc.collect()
            n = 0
            for _ in range(a.streams):
                t0 = time.perf_counter_ns()
                n = await run_async(client, a.surface)
                per_event.append((time.perf_counter_ns() - t0) / n)
            return n

        events = asyncio.run(main())
    tele = setup.check()
    return {"per_event_ns": statistics.median(per_event), "min_ns": min(per_event), "events": events,
            "streams": a.streams + a.warmup, "telemetry": tele}  # fmt: skip
