"""The process pool of the stages that count rather than time: callgrind's and memory's workers share ``--jobs``
slots, longest first."""

from __future__ import annotations

import concurrent.futures as cf
import shutil
import time

from bench.runner.callgrind import cg_collect, cg_jobs
from bench.runner.memory import mem_collect, mem_jobs
from bench.runner.procs import log


def bench_deterministic(a, want: set[str]) -> dict:
    """Callgrind instruction counts and tracemalloc byte counts do not depend on how fast the machine is, so their
    processes share one pool of ``--jobs`` slots (longest first), instead of two stages that each idle a core at
    their tail. Nothing timed by the wall clock runs meanwhile: overhead, TTFD and scale run alone, before/after."""
    out: dict = {}
    jobs = []
    if "cg" in want:
        if shutil.which("valgrind") is None:
            out["cg"] = {"error": "valgrind not installed (apt-get install valgrind)"}
        else:
            jobs += cg_jobs(a)
    if "memory" in want:
        jobs += mem_jobs(a)
    jobs.sort(key=lambda j: -j[0])
    n_cg = sum(1 for j in jobs if j[1].startswith("callgrind"))
    log(f"callgrind + memory: {n_cg} callgrind and {len(jobs) - n_cg} memory processes, {a.jobs} at a time")
    t0 = time.time()
    done: dict = {"cg": {}, "memory": {}}
    last = {"cg": t0, "memory": t0}
    job_seconds: dict = {"cg": {}, "memory": {}}

    def timed(label, fn):
        t = time.time()
        kind, key, r = fn()
        return kind, key, r, label, time.time() - t

    with cf.ThreadPoolExecutor(a.jobs) as ex:
        futs = [ex.submit(timed, label, fn) for _, label, fn in jobs]
        for fut in cf.as_completed(futs):
            kind, key, r, label, secs = fut.result()
            done[kind][key] = r
            last[kind] = time.time()
            job_seconds[kind][label] = round(secs, 1)
            bad = any("error" in v for v in r.values()) if kind == "cg" else "error" in r
            log(f"done: {label} in {secs:.0f} s" + (" (error)" if bad else ""))
    if "cg" in want and "cg" not in out:
        out["cg"] = cg_collect(a, done["cg"])
    if "memory" in want:
        out["memory"] = mem_collect(a, done["memory"])
    for kind in out:
        # seconds: from the start of the shared pool to this kind's last process (the two overlap)
        out[kind]["seconds"] = round(last[kind] - t0, 1)
        out[kind]["job_seconds"] = job_seconds[kind]
    log(f"callgrind + memory: {time.time() - t0:.0f} s")
    return out
