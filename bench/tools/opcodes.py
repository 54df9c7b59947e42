"""Where otelstream's bytecodes go over real SDK streams: per function, fixed per stream and marginal per event.

    python bench/tools/opcodes.py [CONFIG] [SURFACE] [--mode sync|async] [--by fixed|marginal] [--top N]

CONFIG (default ``otelstream-default``; otelstream from the work tree) and the uninstrumented baseline each run in a
fresh process: warm-up, then 20 streams of 10 deltas and 20 of 110 deltas under ``sys.settrace`` with opcode events,
every thread included (the export thread is traced from its start). Per function, fixed = count(10) - 10 x marginal,
marginal = (count(110) - count(10)) / 100; the table is CONFIG minus baseline, split by thread (the caller's, the
others).

Bytecodes are not instructions: under callgrind one costs from ~40 (a tight loop) to ~90 (C calls, pydantic's slow
attribute path) machine instructions. Use this to find where the work is, and ``bench/run.py --check`` (callgrind)
to see what a change is worth.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/tools/ -> the repo
if ROOT not in sys.path:
    sys.path.append(ROOT)

Key = tuple[bool, str, str]  # (caller's thread, file, function)


def _where(filename: str) -> str:
    return filename.split("site-packages/")[-1].replace(ROOT + os.sep, "")


def child(config: str, surface: str, mode: str) -> None:
    from bench import canned, configs
    from bench.workers import clients as worker_clients

    counts: collections.Counter[Key] = collections.Counter()
    on = False
    main = threading.main_thread()

    def trace(frame, event, arg):  # type: ignore[no-untyped-def]
        if not on:
            return None
        frame.f_trace_opcodes = True
        code = frame.f_code
        key = (threading.current_thread() is main, _where(code.co_filename), code.co_name)

        def local(frame, event, arg):  # type: ignore[no-untyped-def]
            if event == "opcode":
                counts[key] += 1
            return local

        return local

    threading.settrace(trace)  # before instrument() starts the export thread
    setup = configs.setup(config, surface)

    def run(deltas: int, streams: int) -> dict[str, float]:
        nonlocal on
        body = canned.frames(surface, deltas)
        client = worker_clients.make_client(surface, mode, setup, lambda _r: body)

        def one() -> None:
            if mode == "sync":
                worker_clients.run_sync(client, surface)
            else:
                asyncio.run(worker_clients.run_async(client, surface))

        for _ in range(12):  # past CPython's quickening and every first call
            one()
        setup.flush()
        counts.clear()
        on = True
        sys.settrace(trace)
        for _ in range(streams):
            one()
        setup.flush()
        sys.settrace(None)
        on = False
        return {json.dumps(k): v / streams for k, v in counts.items()}

    print(json.dumps({"short": run(10, 20), "long": run(110, 20)}))


def measure(config: str, surface: str, mode: str) -> dict[Key, tuple[float, float]]:
    out = subprocess.run([sys.executable, __file__, "--child", config, surface, mode], check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    data = json.loads(out.strip().splitlines()[-1])
    result = {}
    for k in set(data["short"]) | set(data["long"]):
        a, b = data["short"].get(k, 0.0), data["long"].get(k, 0.0)
        marginal = (b - a) / 100
        result[tuple(json.loads(k))] = (a - 10 * marginal, marginal)
    return result  # type: ignore[return-value]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config", nargs="?", default="otelstream-default")
    p.add_argument("surface", nargs="?", default="chat")
    p.add_argument("--mode", default="sync", choices=("sync", "async"))
    p.add_argument("--by", default="fixed", choices=("fixed", "marginal"))
    p.add_argument("--top", type=int, default=30)
    a = p.parse_args()
    base = measure("baseline", a.surface, a.mode)
    ours = measure(a.config, a.surface, a.mode)
    rows = []
    for k in set(base) | set(ours):
        f0, m0 = base.get(k, (0.0, 0.0))
        f1, m1 = ours.get(k, (0.0, 0.0))
        rows.append((f1 - f0, m1 - m0, k))
    for caller in (True, False):
        f = sum(r[0] for r in rows if r[2][0] is caller)
        m = sum(r[1] for r in rows if r[2][0] is caller)
        print(f"{'caller thread' if caller else 'other threads'}: {f:,.0f} bytecodes per stream + {m:.1f} per event")
    col = 0 if a.by == "fixed" else 1
    print(f"\n{'per stream':>10} {'per event':>9}  thread  function")
    for r in sorted(rows, key=lambda r: -abs(r[col]))[: a.top]:
        print(f"{r[0]:10,.0f} {r[1]:9.2f}  {'caller' if r[2][0] else 'other ':6}  {r[2][1]}:{r[2][2]}")


if __name__ == "__main__":
    main()
