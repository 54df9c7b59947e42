"""The wall-clock stages, each run alone (nothing else of the suite runs meanwhile): time added per event
(interleaved rounds of timing workers), time to first delta against a scripted pause, and 10 000 concurrent streams
(``bench/workers/scale.py``)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess

from bench import configs
from bench.runner.procs import HERE, ROOT, ForkServers, log, run_worker, worker_env
from bench.runner.sdks import applicable, python

MODES = ("sync", "async")


def produced(tele: dict | None) -> bool:
    if not tele:
        return False
    return bool(tele.get("spans") or tele.get("metric_points") or tele.get("prom_samples"))


# --- overhead (wall clock, interleaved) --------------------------------------------------------------------
def bench_overhead(a, avail: dict) -> dict:
    cfgs = [c for c in a.configs if c in configs.ALL]
    groups = [(s, m) for s in a.surfaces for m in MODES]
    samples: dict = {}
    tele: dict = {}
    errors: dict = {}
    with ForkServers(a.fork_server) as servers:
        for r in range(a.rounds):
            log(f"overhead round {r + 1}/{a.rounds}")
            for surface, mode in groups:
                todo = [c for c in cfgs if applicable(c, surface, avail)]
                k = r % len(todo)
                for cfg in todo[k:] + todo[:k]:  # A B C, B C A, C A B, …
                    res = run_worker(["time", cfg, surface, mode, "--streams", str(a.streams), "--deltas",
                                      str(a.deltas), "--warmup", "5"], server=servers.for_surface(surface))  # fmt: skip
                    key = f"{cfg}|{surface}|{mode}"
                    if "error" in res:
                        errors[key] = res["error"]
                        continue
                    samples.setdefault(key, []).append(res["per_event_ns"])
                    tele[key] = res["telemetry"]
    rows = []
    for surface, mode in groups:
        base = samples.get(f"baseline|{surface}|{mode}")
        if not base:
            continue
        b = statistics.median(base)
        for cfg in cfgs:
            key = f"{cfg}|{surface}|{mode}"
            if key not in samples:
                if key in errors:
                    rows.append({"config": cfg, "surface": surface, "mode": mode, "error": errors[key]})
                continue
            v = statistics.median(samples[key])
            rows.append({"config": cfg, "surface": surface, "mode": mode, "per_event_ns": v,
                         "added_ns": v - b, "ratio": v / b, "runs": samples[key],
                         "telemetry": tele.get(key), "produced": cfg == "baseline" or produced(tele.get(key))})  # fmt: skip
    return {"rows": rows, "streams": a.streams, "deltas": a.deltas, "rounds": a.rounds, "fork_server": a.fork_server}


# --- time to first delta ----------------------------------------------------------------------------------
def bench_ttfd(a, avail: dict) -> dict:
    rows = []
    with ForkServers(a.fork_server) as servers:
        for surface in ("responses", "chat", "messages"):
            for cfg in configs.ALL:
                if cfg == "baseline" or not applicable(cfg, surface, avail):
                    continue
                r = run_worker(["ttfd", cfg, surface, "--pause", str(a.pause)], server=servers.for_surface(surface))
                row = {"config": cfg, "surface": surface}
                row.update({k: r.get(k) for k in ("truth_s", "measured_s", "source", "error")})
                if r.get("measured_s") is not None and r.get("truth_s"):
                    row["error_s"] = r["measured_s"] - r["truth_s"]
                rows.append(row)
    return {"rows": rows, "pause_s": a.pause}


# --- scale -------------------------------------------------------------------------------------------------
def bench_scale(a, avail: dict) -> dict:
    if not applicable("otelstream", "chat", avail):
        return {"error": "otelstream.instrument not available"}
    cmd = [python(), os.path.join(HERE, "workers", "scale.py"), "--streams", str(a.scale_streams), "--rounds",
           str(a.scale_rounds), "--configs", "baseline," + a.scale_config]  # fmt: skip
    log("scale: " + " ".join(cmd[1:]))
    p = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(), timeout=900, cwd=ROOT)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-8:]}
    return json.loads(lines[-1])

