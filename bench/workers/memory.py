"""``workers/main.py memory``: tracemalloc's heap per open stream, and what stays after the streams end."""

from __future__ import annotations

import gc

from bench import canned, configs
from bench.workers.clients import make_client, open_stream, run_sync


def cmd_memory(a) -> dict:
    import tracemalloc

    setup = configs.setup(a.config, a.surface, tracing=a.tracing == "on")
    body = canned.frames(a.surface, 4)
    client = make_client(a.surface, "sync", setup, lambda _r: body)
    for _ in range(20):  # warm every lazy cache: SDK parse paths, label sets, instruments
        run_sync(client, a.surface)
    setup.flush()
    gc.collect()
    tracemalloc.start()
    # 1) memory per open stream: open N streams, pull their first event, hold them open
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    held = []
    for _ in range(a.open):
        # what a caller suspended inside ``for event in stream:`` holds: the stream's iterator, one event pulled
        it = iter(open_stream(client, a.surface))
        next(it)
        held.append(it)
    gc.collect()
    open_bytes = tracemalloc.get_traced_memory()[0] - before
    for s in held:
        for _ in s:
            pass
    held.clear()
    setup.flush()
    gc.collect()
    # 2) retained after TOTAL streams ran to the end (200 more first: lazily created per-process state settles)
    for _ in range(200):
        run_sync(client, a.surface)
    setup.flush()
    if setup.spans is not None:
        setup.spans.clear()  # the in-memory exporter keeps spans by design: not otelstream's memory
    gc.collect()
    base2 = tracemalloc.get_traced_memory()[0]
    # the heap is read halfway too: a one-off change inside the run (a cache released, a lazy structure built) moves
    # the whole-run figure by the same amount whatever N is; the second half, after it, shows what each stream keeps
    first = a.total // 2
    mid = base2
    for n in range(a.total):
        if n == first:
            setup.flush()
            if setup.spans is not None:
                setup.spans.clear()
            gc.collect()
            mid = tracemalloc.get_traced_memory()[0]
        run_sync(client, a.surface)
    setup.flush()
    if setup.spans is not None:
        setup.spans.clear()
    gc.collect()
    end = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {"open_streams": a.open, "open_bytes_per_stream": open_bytes / a.open, "total_streams": a.total,
            "retained_bytes": end - base2, "second_half_streams": a.total - first,
            "second_half_retained_bytes": end - mid, "telemetry": setup.check()}  # fmt: skip
