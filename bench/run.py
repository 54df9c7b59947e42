"""The benchmark suite, one command:

    python bench/run.py                       # everything, default settings (< 15 min on 2 cores)
    python bench/run.py --only overhead,cg    # a subset: overhead, cg, memory, scale, ttfd
    python bench/run.py --check               # callgrind only, compared with bench/baseline.json (+5 % allowed)
    python bench/run.py --write-baseline      # also rewrite bench/baseline.json from this run's callgrind figures

Every configuration runs in a fresh process (``bench/worker.py``, ``bench/scale.py``). Timing runs are interleaved
(round r runs every configuration once, in an order rotated by r) and reported as the median of the per-process
medians. Results go to ``bench/results.json`` and ``bench/RESULTS.md``.

The interpreter used for the workers is ``$BENCH_PYTHON``, else ``/work/bench-venv/bin/python`` when it exists (the
venv with the peers, ``bench/requirements-peers.txt``), else this interpreter.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from bench import canned, configs  # noqa: E402

MODES = ("sync", "async")
CG_TOLERANCE = 0.05


def python() -> str:
    env = os.environ.get("BENCH_PYTHON")
    if env:
        return env
    if os.path.exists("/work/bench-venv/bin/python"):
        return "/work/bench-venv/bin/python"
    return sys.executable


SNAPSHOT: dict[str, str] = {}  # {"dir": …, "commit": …} when otelstream is benchmarked from a committed snapshot


def take_snapshot(rev: str) -> None:
    """Benchmark otelstream as committed at ``rev`` (``git archive``), not the work tree: others edit it live."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", rev], capture_output=True, text=True, check=True)
    d = tempfile.mkdtemp(prefix="otelstream-snapshot-")
    arc = subprocess.run(["git", "-C", ROOT, "archive", rev, "otelstream"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", d], input=arc.stdout, check=True)
    SNAPSHOT.update(dir=d, commit=commit.stdout.strip())
    import atexit

    atexit.register(shutil.rmtree, d, True)


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    first = [SNAPSHOT["dir"]] if SNAPSHOT else []
    env["PYTHONPATH"] = os.pathsep.join([*first, ROOT, env.get("PYTHONPATH", "")])
    env["PYTHONHASHSEED"] = "0"
    env.pop("OTEL_PYTHON_TRACER_PROVIDER", None)
    return env


def run_worker(args: list[str], timeout: float = 300, prefix: list[str] | None = None) -> dict:
    cmd = [*(prefix or []), python(), os.path.join(HERE, "worker.py"), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(), timeout=timeout, cwd=ROOT)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-5:], "rc": p.returncode}
    return json.loads(lines[-1])


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def applicable(config: str, surface: str, avail: dict) -> bool:
    return avail.get((config, surface), False)


def probe_availability() -> dict:
    code = (
        f"import json,sys; sys.path.insert(0, {ROOT!r}); from bench import configs, canned; "
        "print(json.dumps({f'{c}|{s}': configs.available(c, s) for c in configs.ALL for s in canned.SURFACES}))"
    )
    p = subprocess.run([python(), "-c", code], capture_output=True, text=True, env=worker_env())
    raw = json.loads(p.stdout.strip().splitlines()[-1])
    return {tuple(k.split("|")): v for k, v in raw.items()}


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
    for r in range(a.rounds):
        log(f"overhead round {r + 1}/{a.rounds}")
        for surface, mode in groups:
            todo = [c for c in cfgs if applicable(c, surface, avail)]
            k = r % len(todo)
            for cfg in todo[k:] + todo[:k]:  # A B C, B C A, C A B, …
                res = run_worker(["time", cfg, surface, mode, "--streams", str(a.streams), "--deltas",
                                  str(a.deltas), "--warmup", "5"])  # fmt: skip
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
    return {"rows": rows, "streams": a.streams, "deltas": a.deltas, "rounds": a.rounds}


# --- callgrind ------------------------------------------------------------------------------------------
def cg_one(cfg: str, phases: list[tuple[str, str]], a) -> dict:
    """One callgrind process per configuration. Each (surface, mode) is measured twice, as dump-bracketed phases:
    short streams (``--cg-short`` deltas) and long ones (``--deltas``), so that the cost splits into a fixed part per
    stream and a marginal part per event (two equations, two unknowns)."""
    out = tempfile.mkdtemp(prefix="otelstream-cg-")
    specs = []
    for s, m in phases:
        specs += [f"{s}:{m}:{a.cg_short}:{a.cg_short_streams}", f"{s}:{m}:{a.cg_deltas}:{a.cg_streams}"]
    try:
        prefix = ["valgrind", "--tool=callgrind", "--dump-before=getppid",
                  f"--callgrind-out-file={out}/cg.%p"]  # fmt: skip
        res = run_worker(["cg", cfg, phases[0][0], phases[0][1], "--phases", ",".join(specs), "--warmup", "2"],
                         timeout=1800, prefix=prefix)  # fmt: skip
        if "error" in res:
            return {f"{s}|{m}": res for s, m in phases}
        got: dict = {}
        for k, ph in enumerate(res["phases"]):
            files = glob.glob(f"{out}/cg.*.{2 * k + 2}")
            key = f"{ph['surface']}|{ph['mode']}"
            if not files:
                got[key] = {"error": f"no dump {2 * k + 2}"}
                continue
            with open(files[0]) as f:
                totals = [int(ln.split()[1]) for ln in f if ln.startswith("totals:")]
            slot = "short" if ph["deltas"] == a.cg_short and k % 2 == 0 else "long"
            got.setdefault(key, {})[slot] = {"ir": totals[0], **ph}
        return got
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _split(r: dict) -> tuple[float, float]:
    """(fixed Ir per stream, marginal Ir per event) from the short and long phases."""
    s, lg = r["short"], r["long"]
    ps_s, ps_l = s["ir"] / s["streams"], lg["ir"] / lg["streams"]
    ev_s, ev_l = s["events"] / s["streams"], lg["events"] / lg["streams"]
    marginal = (ps_l - ps_s) / (ev_l - ev_s)
    return ps_s - marginal * ev_s, marginal


def bench_cg(a, avail: dict) -> dict:
    if shutil.which("valgrind") is None:
        return {"error": "valgrind not installed (apt-get install valgrind)"}
    jobs = []
    for cfg in configs.ALL:
        if cfg not in a.configs:
            continue
        if cfg in configs.PEERS and not a.cg_peers:
            continue
        # sync and async for the baseline and otelstream-default; sync only for the all-sinks configuration (its OTel
        # per-chunk histogram makes it the slowest under valgrind) and for the peers
        modes = MODES if cfg in ("baseline", "otelstream-default") else ("sync",)
        phases = [(s, m) for s in a.surfaces for m in modes if applicable(cfg, s, avail)]
        if phases:
            jobs.append((cfg, phases))
    log(f"callgrind: {len(jobs)} processes ({2 * sum(len(p) for _, p in jobs)} phases), {a.jobs} at a time")
    results = {}
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        futs = {ex.submit(cg_one, cfg, phases, a): cfg for cfg, phases in jobs}
        for fut in cf.as_completed(futs):
            cfg = futs[fut]
            for key, r in fut.result().items():
                results[f"{cfg}|{key}"] = r
                log(f"callgrind done: {cfg} {key}")
    rows = []
    for surface in a.surfaces:
        for mode in MODES:
            base = results.get(f"baseline|{surface}|{mode}")
            if not base or "long" not in base or "short" not in base:
                continue
            b_fixed, b_marg = _split(base)
            bl = base["long"]
            for cfg in configs.ALL:
                r = results.get(f"{cfg}|{surface}|{mode}")
                if r is None:
                    continue
                if "long" not in r or "short" not in r:
                    rows.append({"config": cfg, "surface": surface, "mode": mode, "error": r.get("error")})
                    continue
                lg = r["long"]
                fixed, marg = _split(r)
                ev = lg["events"]
                rows.append({"config": cfg, "surface": surface, "mode": mode, "events": ev, "ir": lg["ir"],
                             "events_per_stream": ev / lg["streams"], "ir_per_event": lg["ir"] / ev,
                             "added_measured_ir_per_event": (lg["ir"] - bl["ir"]) / ev,
                             # the budget figure: marginal + fixed amortized over a stream of --ref-events events
                             "added_ir_per_event": (marg - b_marg) + (fixed - b_fixed) / a.ref_events,
                             "added_marginal_ir_per_event": marg - b_marg,
                             "added_fixed_ir_per_stream": fixed - b_fixed,
                             "spans": lg["spans"] + r["short"]["spans"],
                             "produced": cfg == "baseline" or lg["spans"] > 0})  # fmt: skip
    return {"rows": rows, "streams": a.cg_streams, "deltas": a.cg_deltas, "short_deltas": a.cg_short,
            "short_streams": a.cg_short_streams, "ref_events": a.ref_events}  # fmt: skip


# --- memory ----------------------------------------------------------------------------------------------
def bench_memory(a, avail: dict) -> dict:
    """Not timing-sensitive, so two worker processes at a time. The first surface gets the full ``--mem-total``
    retained run; the others 1/5 of it."""
    rows = []
    variants = [("baseline", "on"), ("otelstream", "off"), ("otelstream-default", "on")]
    jobs = []
    for n, surface in enumerate(a.mem_surfaces):
        total = a.mem_total if n == 0 else max(1, a.mem_total // 5)
        jobs += [(surface, cfg, tracing, total) for cfg, tracing in variants if applicable(cfg, surface, avail)]
    log(f"memory: {len(jobs)} processes, {a.jobs} at a time")

    def one(job):
        surface, cfg, tracing, total = job
        return job, run_worker(["memory", cfg, surface, "--open", str(a.mem_open), "--total", str(total),
                                "--tracing", tracing], timeout=900)  # fmt: skip

    got: dict = {}
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        for (surface, cfg, tracing, _), r in ex.map(one, jobs):
            got[(surface, cfg, tracing)] = r
    for surface in a.mem_surfaces:
        base = got.get((surface, "baseline", "on"))
        for cfg, tracing in variants:
            r = got.get((surface, cfg, tracing))
            if r is None:
                continue
            row = {"config": cfg, "tracing": tracing, "surface": surface}
            if "error" in r:
                row["error"] = r["error"]
            else:
                row.update(open_bytes_per_stream=r["open_bytes_per_stream"], retained_bytes=r["retained_bytes"],
                           total_streams=r["total_streams"], open_streams=r["open_streams"])  # fmt: skip
                if base and "error" not in base:
                    row["added_open_bytes_per_stream"] = r["open_bytes_per_stream"] - base["open_bytes_per_stream"]
                    row["added_retained_bytes"] = r["retained_bytes"] - base["retained_bytes"]
            rows.append(row)
    return {"rows": rows}


# --- time to first delta ----------------------------------------------------------------------------------
def bench_ttfd(a, avail: dict) -> dict:
    rows = []
    for surface in ("responses", "chat", "messages"):
        for cfg in configs.ALL:
            if cfg == "baseline" or not applicable(cfg, surface, avail):
                continue
            r = run_worker(["ttfd", cfg, surface, "--pause", str(a.pause)])
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
    cmd = [python(), os.path.join(HERE, "scale.py"), "--streams", str(a.scale_streams), "--rounds",
           str(a.scale_rounds), "--configs", "baseline," + a.scale_config]  # fmt: skip
    log("scale: " + " ".join(cmd[1:]))
    p = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(), timeout=900, cwd=ROOT)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-8:]}
    return json.loads(lines[-1])


# --- baseline.json -----------------------------------------------------------------------------------------
def cg_check(cg: dict, path: str) -> list[str]:
    with open(path) as f:
        ref = json.load(f)["added_ir_per_event"]
    bad = []
    for row in cg.get("rows", []):
        if row["config"] not in configs.OURS or "added_ir_per_event" not in row:
            continue
        key = f"{row['config']}|{row['surface']}|{row['mode']}"
        if key in ref and row["added_ir_per_event"] > ref[key] * (1 + CG_TOLERANCE):
            bad.append(f"{key}: {row['added_ir_per_event']:.0f} > {ref[key]:.0f} + 5 %")
    return bad


def write_baseline(cg: dict, path: str, a) -> None:
    rows = [r for r in cg["rows"] if r["config"] in configs.OURS and "added_ir_per_event" in r]
    ref = {f"{r['config']}|{r['surface']}|{r['mode']}": round(r["added_ir_per_event"]) for r in rows}
    detail = {f"{r['config']}|{r['surface']}|{r['mode']}": {"marginal_ir_per_event": round(r["added_marginal_ir_per_event"]),
                                                            "fixed_ir_per_stream": round(r["added_fixed_ir_per_stream"])}
              for r in rows}  # fmt: skip  # fmt: skip
    doc = {"what": "callgrind instructions added by otelstream (caller's thread + background threads, measured "
                   "phases only) vs the uninstrumented SDK, CPython 3.11, PYTHONHASHSEED=0; added_ir_per_event = "
                   "marginal per event + fixed per stream / ref_events. Keys: configuration|surface|mode",
           "detail": detail,
           "tolerance": CG_TOLERANCE, "streams": a.cg_streams, "deltas": a.cg_deltas, "short_deltas": a.cg_short,
           "short_streams": a.cg_short_streams, "ref_events": a.ref_events, "budget": 6000,
           "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"),
           "added_ir_per_event": ref}  # fmt: skip
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")


def machine() -> dict:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    vers = subprocess.run([python(), "-c", "import sys, openai, anthropic, httpx2, opentelemetry.sdk.version as v, "
                           "pydantic; print(sys.version.split()[0], openai.__version__, anthropic.__version__, "
                           "httpx2.__version__, v.__version__, pydantic.VERSION)"],
                          capture_output=True, text=True).stdout.split()  # fmt: skip
    keys = ("python", "openai", "anthropic", "httpx2", "opentelemetry_sdk", "pydantic")
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "kernel": platform.release(),
            "versions": dict(zip(keys, vers, strict=False)), "peers": peer_versions()}  # fmt: skip


def peer_versions() -> dict:
    code = ("import importlib.metadata as m, json; out = {}\n"
            "for n in %r:\n    try: out[n] = m.version(n)\n    except Exception: out[n] = None\nprint(json.dumps(out))")
    names = [n for pair in configs.PIP_NAMES.values() for n in pair if n != "-"]
    p = subprocess.run([python(), "-c", code % (names,)], capture_output=True, text=True)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        return {}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="overhead,cg,memory,scale,ttfd")
    p.add_argument("--surfaces", default=",".join(canned.SURFACES))
    p.add_argument("--configs", default=",".join(configs.ALL))
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds of timing processes (2 keeps the suite under 15 min on 2 cores)")
    p.add_argument("--streams", type=int, default=30, help="timed streams per timing process")
    p.add_argument("--deltas", type=int, default=200, help="deltas per canned stream")
    p.add_argument("--cg-deltas", type=int, default=100, help="callgrind: deltas of the long streams")
    p.add_argument("--cg-streams", type=int, default=2, help="callgrind: long streams per phase")
    p.add_argument("--cg-short", type=int, default=10, help="callgrind: deltas of the short streams")
    p.add_argument("--cg-short-streams", type=int, default=3)
    p.add_argument("--ref-events", type=int, default=200,
                   help="callgrind: the stream length (events) the per-stream cost is amortized over for the budget")
    p.add_argument("--cg-peers", action=argparse.BooleanOptionalAction, default=True,
                   help="also callgrind the peers (sync only)")
    p.add_argument("--jobs", type=int, default=2, help="callgrind processes at a time")
    p.add_argument("--mem-surfaces", default="chat,messages")
    p.add_argument("--mem-open", type=int, default=1000)
    p.add_argument("--mem-total", type=int, default=10_000)
    p.add_argument("--scale-streams", type=int, default=10_000)
    p.add_argument("--scale-rounds", type=int, default=1)
    p.add_argument("--scale-config", default="otelstream-default", choices=configs.OURS)
    p.add_argument("--pause", type=float, default=0.5)
    p.add_argument("--check", action="store_true", help="callgrind only; fail if above bench/baseline.json + 5 %%")
    p.add_argument("--write-baseline", action="store_true")
    p.add_argument("--out", default=os.path.join(HERE, "results.json"))
    p.add_argument("--rev", default="HEAD", help="benchmark otelstream as committed at this revision (git archive)")
    p.add_argument("--worktree", action="store_true", help="benchmark the work tree's otelstream instead")
    a = p.parse_args()
    a.surfaces = [s for s in a.surfaces.split(",") if s]
    a.configs = [c for c in a.configs.split(",") if c]
    a.mem_surfaces = [s for s in a.mem_surfaces.split(",") if s]
    only = set(a.only.split(","))
    if a.check:
        only = {"cg"}
        a.cg_peers = False
    t0 = time.time()
    if not a.worktree:
        take_snapshot(a.rev)
    avail = probe_availability()
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
                 "command": " ".join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]),
                 "python_for_workers": python(),
                 "otelstream_commit": SNAPSHOT.get("commit") or "work tree",
                 "available": {f"{c}|{s}": v for (c, s), v in avail.items()}}  # fmt: skip
    if os.path.exists(a.out) and not a.check:
        with open(a.out) as f:
            old = json.load(f)
        for k in ("overhead", "cg", "memory", "scale", "ttfd"):  # keep sections not re-run
            if k in old and k not in only:
                res[k] = old[k]
    steps = [("overhead", bench_overhead), ("cg", bench_cg), ("memory", bench_memory), ("ttfd", bench_ttfd),
             ("scale", bench_scale)]  # fmt: skip
    for name, fn in steps:
        if name in only:
            t = time.time()
            log(f"== {name}")
            res[name] = fn(a, avail)
            res[name]["seconds"] = round(time.time() - t, 1)
    res["seconds"] = round(time.time() - t0, 1)
    baseline_path = os.path.join(HERE, "baseline.json")
    if a.write_baseline and "cg" in res and "rows" in res["cg"]:
        write_baseline(res["cg"], baseline_path, a)
        log(f"wrote {baseline_path}")
    if a.check:
        bad = cg_check(res["cg"], baseline_path)
        print(json.dumps(res["cg"], indent=1))
        if bad:
            print("callgrind regression:\n  " + "\n  ".join(bad))
            raise SystemExit(1)
        print("callgrind: within bench/baseline.json + 5 %")
        return
    if True:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
        from bench import report

        report.write(res, os.path.join(HERE, "RESULTS.md"))
        log(f"wrote {a.out} and bench/RESULTS.md in {res['seconds']:.0f} s")


if __name__ == "__main__":
    main()
