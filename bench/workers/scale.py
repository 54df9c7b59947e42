"""10 000 concurrent async streams through the project's fake provider (``otelstream/demo/provider.py``).

    python bench/workers/scale.py [--streams 10000 --tokens 10 --hold 5 --rounds 1]

The provider runs in its own process (its CPU is not the client's). Each configuration (baseline, otelstream) runs in
a fresh client process: first ``--single`` streams one after another (the single-stream figure), then ``--streams``
streams at once, spread over ``--clients`` ``AsyncOpenAI`` clients whose connection limits are raised. In the
concurrent phase every stream, once open (response headers in, span started), waits unread until all ``--streams``
are open, then ``--hold`` s more, and only then are all read: every stream is open at the same time by construction.
Reported per configuration: client CPU per event (process CPU time / events) in both phases, peak concurrently open
streams, failures, and the CPU time of otelstream's watchdog and export threads (``pthread_getcpuclockid``) as a
share of one core, over the whole concurrent phase and over the hold (all streams open).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/workers/ -> the repo
if ROOT not in sys.path:  # after $PYTHONPATH: the runner may put a committed snapshot of otelstream first
    sys.path.append(ROOT)


def raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


# --- the provider process ----------------------------------------------------------------------------------
def provider_main() -> None:
    raise_nofile()
    from otelstream.demo.http_server import FakeHTTPServer
    from otelstream.demo.provider import serve

    FakeHTTPServer.request_queue_size = 4096  # listen() backlog for 10 000 connects (capped by net.core.somaxconn)
    with serve(websocket=False) as prov:
        print(json.dumps({"base": prov.base_url}), flush=True)
        sys.stdin.read()  # until the parent closes our stdin


def proc_cpu(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far, from /proc (0, 0 where there is none)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0


# --- the client process ------------------------------------------------------------------------------------
def thread_cpu(names: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for t in threading.enumerate():
        if t.name.startswith(names) and t.ident is not None:
            with contextlib.suppress(OSError):
                out[t.name] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    return out


def client_main(a) -> None:
    raise_nofile()
    import httpx2
    import openai

    from bench import configs

    setup = configs.setup(a.config, "chat")
    headers = {"x-otelstream-tokens": str(a.tokens), "x-otelstream-gap": str(a.gap), "x-otelstream-ttfd": str(a.ttfd)}
    # Several clients, each with raised limits: one httpx2 pool holding 10 000 connections does O(connections) work
    # per request (the pool re-scans every connection on each assignment), which the benchmark would measure instead
    # of the instrumentation.
    per = -(-a.streams // a.clients)
    limits = httpx2.Limits(max_connections=per + 50, max_keepalive_connections=per + 50)
    clients = [openai.AsyncOpenAI(api_key="sk-bench", base_url=a.base + "/v1", max_retries=0,
                                  http_client=httpx2.AsyncClient(limits=limits,
                                                                 timeout=httpx2.Timeout(300.0, connect=120.0)))
               for _ in range(a.clients)]  # fmt: skip
    state = {"open": 0, "peak": 0, "events": 0, "failed": 0, "k": 0, "settled": 0}
    all_settled = asyncio.Event()  # every stream of the concurrent phase is open (or failed to open)
    release = asyncio.Event()  # … and the hold is over: start reading

    def settle(gated: bool) -> None:
        if gated:
            state["settled"] += 1
            if state["settled"] == a.streams:
                all_settled.set()

    async def one(h: dict, gated: bool = False) -> int:
        n = 0
        client = clients[state["k"] % len(clients)]
        state["k"] += 1
        opened = False
        try:
            stream = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True,
                stream_options={"include_usage": True}, extra_headers=h)  # fmt: skip
            opened = True
            state["open"] += 1
            state["peak"] = max(state["peak"], state["open"])
            try:
                if gated:  # open (headers in, span started), nothing read yet: wait until all are open
                    settle(True)
                    await release.wait()
                async for _ in stream:
                    n += 1
            finally:
                state["open"] -= 1
        except Exception as exc:  # counted, reported
            if not opened:
                settle(gated)
            state["failed"] += 1
            state.setdefault("first_error", f"{type(exc).__name__}: {exc!r} <- {exc.__cause__!r}"[:300])
            state.setdefault("errors", {}).setdefault(type(exc).__name__, 0)
            state["errors"][type(exc).__name__] += 1
        return n

    async def main() -> dict:
        fast = {**headers, "x-otelstream-gap": "0", "x-otelstream-ttfd": "0"}
        for _ in range(5):  # warm-up
            await one(fast)
        # single-stream figure: one at a time, no pacing
        c0, w0 = time.process_time(), time.perf_counter()
        ev = 0
        for _ in range(a.single):
            ev += await one(fast)
        single = {"streams": a.single, "events": ev, "cpu_per_event_ns": (time.process_time() - c0) / ev * 1e9,
                  "wall_s": time.perf_counter() - w0}  # fmt: skip
        if setup.config.startswith("otelstream"):
            setup.flush()
        # concurrent: every stream opens, then waits (nothing read) until all --streams are open, then --hold s, then
        # all read at once: every stream open together by construction, not by a long time to first delta
        th0 = thread_cpu(("otelstream",))
        c0, w0 = time.process_time(), time.perf_counter()
        tasks = []
        for k in range(a.streams):  # ramp: 250 new streams every 50 ms (10 000 in 2 s), not one SYN burst
            tasks.append(asyncio.ensure_future(one(headers, gated=True)))
            if k % 250 == 249:
                await asyncio.sleep(0.05)
        await all_settled.wait()  # every task settles (opens, or fails to) before it can finish
        open_s = time.perf_counter() - w0
        open_now = state["open"]
        # the hold: all streams open, none read; the watchdog's share of a core is measured here, at full count
        th_h0, h0 = thread_cpu(("otelstream",)), time.perf_counter()
        await asyncio.sleep(a.hold)
        th_h1, hold_s = thread_cpu(("otelstream",)), time.perf_counter() - h0
        release.set()
        counts = await asyncio.gather(*tasks)
        cpu = time.process_time() - c0
        wall = time.perf_counter() - w0
        if setup.config.startswith("otelstream"):
            setup.flush()
        th1 = thread_cpu(("otelstream",))
        ev = sum(counts)
        threads = {k: {"cpu_s": th1[k] - th0.get(k, 0.0), "core_share": (th1[k] - th0.get(k, 0.0)) / wall}
                   for k in th1}  # fmt: skip
        hold = {k: {"cpu_s": th_h1[k] - th_h0.get(k, 0.0), "core_share": (th_h1[k] - th_h0.get(k, 0.0)) / hold_s}
                for k in th_h1}  # fmt: skip
        conc = {"streams": a.streams, "events": ev, "cpu_per_event_ns": cpu / max(ev, 1) * 1e9, "wall_s": wall,
                "cpu_s": cpu, "peak_open": state["peak"], "failed": state["failed"],
                "errors": state.get("errors", {}), "first_error": state.get("first_error"), "threads": threads,
                "all_open_after_s": open_s, "hold": {"seconds": hold_s, "open": open_now, "threads": hold}}  # fmt: skip
        return {"single": single, "concurrent": conc}

    out = asyncio.run(main())
    out["config"] = a.config
    out["telemetry"] = setup.check()
    print(json.dumps(out), flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("role", nargs="?", default="run", choices=("run", "provider", "client"))
    p.add_argument("--config", default="baseline")
    p.add_argument("--configs", default="baseline,otelstream-default")
    p.add_argument("--clients", type=int, default=50, help="AsyncOpenAI clients the streams are spread over")
    p.add_argument("--base")
    p.add_argument("--streams", type=int, default=10_000)
    p.add_argument("--single", type=int, default=500)
    p.add_argument("--tokens", type=int, default=10)
    p.add_argument("--gap", type=float, default=0.0, help="between deltas (s); 0: the provider's threads only wait once")
    p.add_argument("--ttfd", type=float, default=0.0,
                   help="provider's time to first delta; 0: the streams are held open by the client (see --hold)")
    p.add_argument("--hold", type=float, default=5.0,
                   help="concurrent phase: seconds all streams stay open, unread, before they are read")
    p.add_argument("--rounds", type=int, default=1)
    a = p.parse_args()
    if a.role == "provider":
        provider_main()
        return
    if a.role == "client":
        client_main(a)
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.environ.get("PYTHONPATH", ""), ROOT]).strip(os.pathsep))
    prov = subprocess.Popen([sys.executable, __file__, "provider"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip
    try:
        base = json.loads(prov.stdout.readline())["base"]
        cfgs = a.configs.split(",")
        runs: dict[str, list] = {c: [] for c in cfgs}
        for r in range(a.rounds):
            for cfg in cfgs if r % 2 == 0 else cfgs[::-1]:
                cmd = [sys.executable, __file__, "client", "--config", cfg, "--base", base, "--streams",
                       str(a.streams), "--single", str(a.single), "--tokens", str(a.tokens), "--gap", str(a.gap),
                       "--ttfd", str(a.ttfd), "--hold", str(a.hold), "--clients", str(a.clients)]  # fmt: skip
                p0 = proc_cpu(prov.pid)
                c = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
                p1 = proc_cpu(prov.pid)
                lines = [ln for ln in c.stdout.splitlines() if ln.startswith("{")]
                if c.returncode != 0 or not lines:
                    runs[cfg].append({"error": c.stderr.strip().splitlines()[-6:]})
                else:
                    runs[cfg].append(json.loads(lines[-1]))
                    runs[cfg][-1]["provider_cpu_s"] = {"user": p1[0] - p0[0], "sys": p1[1] - p0[1]}
                time.sleep(2)  # let the provider's threads wind down
    finally:
        prov.stdin.close()
        prov.wait(timeout=30)

    def med(cfg: str, phase: str, key: str) -> float | None:
        vals = [r[phase][key] for r in runs[cfg] if "error" not in r]
        return statistics.median(vals) if vals else None

    summary = {"config": cfgs[-1]}
    for phase in ("single", "concurrent"):
        b, o = med(cfgs[0], phase, "cpu_per_event_ns"), med(cfgs[-1], phase, "cpu_per_event_ns")
        summary[phase] = {"baseline_cpu_per_event_ns": b, "otelstream_cpu_per_event_ns": o,
                          "added_ns": (o - b) if b is not None and o is not None else None}  # fmt: skip
    print(json.dumps({"runs": runs, "summary": summary, "settings": vars(a)}), flush=True)


if __name__ == "__main__":
    main()
