"""The benchmark suite, one command (run it with the peers' venv, ``bench/requirements-peers.txt``):

    python bench/run.py --oldest-python OLDEST/bin/python  # everything, newest and oldest supported SDK releases
    python bench/run.py --only overhead,cg    # a subset: overhead, cg, memory, scale, ttfd
    python bench/run.py --check               # callgrind only: fails where every layout is above baseline.json + 10 %
    python bench/run.py --write-baseline      # also rewrite bench/baseline.json from this run's callgrind figures

Two SDK sets: ``newest`` runs in ``--python`` (default ``$BENCH_PYTHON``, else this interpreter: the peers' venv, with
the newest SDK releases) and ``oldest`` in ``--oldest-python`` (default ``$BENCH_OLDEST_PYTHON``; a venv from
``bench/requirements-oldest.txt``; without one the oldest cells are left out and RESULTS.md says so). Callgrind and
memory run on both; the wall-clock stages (overhead, TTFD, scale) and the peers on ``newest`` only.

Surfaces (``--surfaces``): the SDKs' four (responses, chat, completions, messages) and the HTTP-level observer's two,
``http-chat`` and ``http-messages``: the same Chat and Messages bodies read through a plain client of the HTTP library
the set's openai reads with (httpx2; httpx for openai 2.x), which no SDK adapter owns (``bench/worker.py``; no peers).

Every configuration runs in a fresh process (``bench/worker.py``, ``bench/scale.py``). Timing runs are interleaved
(round r runs every configuration once, in an order rotated by r) and reported as the median of the per-process
medians. ``bench/RESULTS.md`` is the record (with the command that made it); the raw figures go to
``bench/results.json``, which is not committed.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
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
CG_TOLERANCE = 0.10  # docs/benchmarks.md: a cell more than 10 % above baseline.json fails --check


class Sdk:
    """One SDK set: a label (``newest``, ``oldest``) and the interpreter whose venv has those releases installed."""

    def __init__(self, label: str, python: str) -> None:
        self.label, self.python = label, python
        self.avail: dict = {}
        self.versions: dict = {}


SDKS: list[Sdk] = []  # filled by main(); SDKS[0] is the newest: the wall-clock stages and the peers run there


def python() -> str:
    return SDKS[0].python


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
    # the runtime self-check runs its fault matrix once per instrument() in a background thread: under callgrind its
    # millions of instructions land in whichever phase is open (the paired twin re-instruments per phase); its cost
    # is per process, measured apart by bench/self_check.py
    env["OTELSTREAM_SELF_CHECK"] = "false"
    env.pop("OTEL_PYTHON_TRACER_PROVIDER", None)
    return env


def run_worker(args: list[str], timeout: float = 300, prefix: list[str] | None = None,
               server: ForkServer | None = None, sdk: Sdk | None = None) -> dict:  # fmt: skip
    if server is not None:
        rc, stdout, stderr = server.run(args, timeout)
    else:
        cmd = [*(prefix or []), (sdk or SDKS[0]).python, os.path.join(HERE, "worker.py"), *args]
        p = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(), timeout=timeout, cwd=ROOT)
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if rc != 0 or not lines:
        return {"error": (stderr or stdout).strip().splitlines()[-5:], "rc": rc}
    return json.loads(lines[-1])


# what every worker imports first (the HTTP-level observer's: openai too, whose HTTP library its plain client takes)
PRELOAD = {"openai": ("httpx2", "openai"), "anthropic": ("httpx2", "anthropic"), "http": ("httpx2", "openai")}


class ForkServer:
    """``worker.py serve``: one process per SDK that has imported ``httpx2`` and the SDK once and forks a fresh
    child per timing run (overhead, TTFD), instead of every worker importing them again (see ``worker.serve``)."""

    def __init__(self, lib: str) -> None:
        self.p = subprocess.Popen([python(), os.path.join(HERE, "worker.py"), "serve", *PRELOAD[lib]],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=worker_env(),
                                  cwd=ROOT)  # fmt: skip
        if self.p.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError(f"fork server for {lib} did not start")

    def run(self, args: list[str], timeout: float) -> tuple[int, str, str]:
        with tempfile.TemporaryDirectory(prefix="otelstream-fork-") as d:
            out, err = os.path.join(d, "out"), os.path.join(d, "err")
            try:
                self.p.stdin.write(json.dumps({"argv": args, "stdout": out, "stderr": err, "timeout": timeout}) + "\n")
                self.p.stdin.flush()
                reply = self.p.stdout.readline()
            except OSError as exc:
                reply, why = "", repr(exc)
            else:
                why = "fork server exited"
            if not reply:
                return 1, "", why
            texts = []
            for path in (out, err):
                try:
                    with open(path) as f:
                        texts.append(f.read())
                except OSError:
                    texts.append("")
            return json.loads(reply)["rc"], texts[0], texts[1]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.p.stdin.close()
            self.p.wait(timeout=10)
        if self.p.poll() is None:
            self.p.kill()


class ForkServers:
    """The fork servers of one timing stage, by SDK (``--no-fork-server``: every run a fresh ``exec``)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.servers: dict[str, ForkServer | None] = {}

    def for_surface(self, surface: str) -> ForkServer | None:
        if not self.enabled:
            return None
        lib = configs.lib_of(surface)
        if lib not in self.servers:
            try:
                self.servers[lib] = ForkServer(lib)
            except Exception as exc:  # fall back to fresh processes
                log(f"fork server for {lib}: {exc}; starting workers from scratch")
                self.servers[lib] = None
        return self.servers[lib]

    def __enter__(self) -> ForkServers:
        return self

    def __exit__(self, *exc) -> None:
        for srv in self.servers.values():
            if srv is not None:
                srv.close()


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def applicable(config: str, surface: str, avail: dict) -> bool:
    return avail.get((config, surface), False)


def probe_availability(py: str) -> dict:
    code = (
        f"import json,sys; sys.path.insert(0, {ROOT!r}); from bench import configs, canned; "
        "print(json.dumps({f'{c}|{s}': configs.available(c, s) for c in configs.ALL for s in canned.SURFACES}))"
    )
    p = subprocess.run([py, "-c", code], capture_output=True, text=True, env=worker_env())
    if p.returncode != 0:
        raise SystemExit(f"{py}: cannot probe the configurations: {p.stderr.strip()[-500:]}")
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


# --- callgrind ------------------------------------------------------------------------------------------
def cg_one(sdk: Sdk, cfg: str, phases: list[tuple[str, str]], a, layout: int = 0) -> dict:
    """One callgrind process per configuration. Each (surface, mode) is measured twice, as dump-bracketed phases:
    short streams (``--cg-short`` deltas) and long ones (``--deltas``), so that the cost splits into a fixed part per
    stream and a marginal part per event (two equations, two unknowns). Instrumentation starts off
    (``--instr-atstart=no``); the worker switches it on with ``callgrind_control -i on`` after its pre-warm and
    closes every dump with ``callgrind_control -d``. Threads are counted apart (``--separate-threads=yes``: one file
    per thread and dump; thread 1 is the caller's)."""
    if shutil.which("callgrind_control") is None:
        return {f"{s}|{m}": {"error": "callgrind_control not found (it comes with valgrind)"} for s, m in phases}
    out = tempfile.mkdtemp(prefix="otelstream-cg-")
    specs = []
    for s, m in phases:
        specs += [f"{s}:{m}:{a.cg_short}:{a.cg_short_streams}", f"{s}:{m}:{a.cg_deltas}:{a.cg_streams}"]
    try:
        # the worker dumps every phase with callgrind_control -d (every thread; one file per thread) and, unless
        # --cg-instr-all, switches instrumentation on with callgrind_control -i on after its pre-warm
        prefix = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                  f"--instr-atstart={'yes' if a.cg_instr_all else 'no'}", f"--callgrind-out-file={out}/cg.%p"]  # fmt: skip
        paired = a.cg_paired and cfg in configs.OURS
        res = run_worker(["cg", cfg, phases[0][0], phases[0][1], "--phases", ",".join(specs), "--warmup", "2",
                          "--prewarm", str(a.cg_prewarm), "--watchdog-s", str(a.cg_watchdog_s),
                          "--layout", str(layout), "--cg-control", *(["--paired"] if paired else []),
                          *([] if a.cg_instr_all else ["--cg-instr-on"])], timeout=3600, prefix=prefix, sdk=sdk)  # fmt: skip
        if "error" in res:
            return {f"{s}|{m}": res for s, m in phases}
        got: dict = {}
        step = 4 if paired else 2  # dumps per phase: warm-up + measured (+ the uninstrumented twin's two)
        for k, ph in enumerate(res["phases"]):
            key = f"{ph['surface']}|{ph['mode']}"
            slot = "short" if ph["deltas"] == a.cg_short and k % 2 == 0 else "long"
            for dump, name in ((step * k + 2, slot), (step * k + 4, slot + "_off")) if paired else ((2 * k + 2, slot),):
                files = glob.glob(f"{out}/cg.*.{dump}-*")  # cg.PID.DUMP-TID, one per thread
                if not files:
                    got[key] = {"error": f"no dump {dump}"}
                    break
                ir = caller = 0
                for path in files:
                    with open(path) as f:
                        n = next(int(ln.split()[1]) for ln in f if ln.startswith("totals:"))
                    ir += n
                    caller += n if path.endswith("-01") else 0
                events = ph["events_off"] if name.endswith("_off") else ph["events"]
                got.setdefault(key, {})[name] = {"ir": ir, "ir_caller": caller, **ph, "events": events}
        return got
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _split(r: dict, off: str = "", what: str = "ir") -> tuple[float, float]:
    """(fixed Ir per stream, marginal Ir per event) from the short and long phases (``off="_off"``: their
    uninstrumented twins; ``what="ir_caller"``: the caller's thread alone)."""
    s, lg = r["short" + off], r["long" + off]
    ps_s, ps_l = s[what] / s["streams"], lg[what] / lg["streams"]
    ev_s, ev_l = s["events"] / s["streams"], lg["events"] / lg["streams"]
    marginal = (ps_l - ps_s) / (ev_l - ev_s)
    return ps_s - marginal * ev_s, marginal


def cg_jobs(a) -> list[tuple[float, str, object]]:
    """(weight, label, callable) per callgrind process; the weight (≈ seconds) only orders the jobs."""
    jobs = []
    for n, sdk in enumerate(SDKS):
        for cfg in configs.ALL:
            if cfg not in a.configs:
                continue
            if cfg in configs.PEERS and (not a.cg_peers or n > 0):  # the peers: in the newest SDK set's run only
                continue
            phases = [(s, m) for s in a.surfaces for m in a.cg_modes if applicable(cfg, s, sdk.avail)]
            if not phases:
                continue
            weight = 15 + 5 * len(phases) * (2 if a.cg_paired and cfg in configs.OURS else 1)  # ≈ s, idle 2 cores
            layouts = a.cg_layouts if n == 0 else a.cg_oldest_layouts
            for layout in LAYOUT_PADS[:layouts] if cfg in configs.OURS else (0,):
                label = f"callgrind {sdk.label} {cfg}" + (f" (layout {layout})" if layout else "")
                jobs.append((weight, label, lambda sdk=sdk, cfg=cfg, phases=phases, layout=layout: (
                    "cg", (sdk.label, cfg, layout), cg_one(sdk, cfg, phases, a, layout))))  # fmt: skip
    return jobs


# types and interned names added per layout (worker.py --layout): otelstream's cells are the median over the first --cg-layouts
LAYOUT_PADS = (0, 157, 389, 61, 241)
# the figures of a row that are medians over layouts (the rest are layout 0's)
_MEDIAN_KEYS = ("added_ir_per_event", "added_marginal_ir_per_event", "added_fixed_ir_per_stream",
                "added_fixed_caller_ir_per_stream",
                "cross_added_ir_per_event", "cross_added_marginal_ir_per_event", "cross_added_fixed_ir_per_stream",
                "cross_added_fixed_caller_ir_per_stream",
                "added_measured_ir_per_event", "ir_per_event", "off_ir_per_event")  # fmt: skip


def cg_collect(a, per_cfg: dict) -> dict:
    results: dict[str, list] = {}  # sdk|cfg|surface|mode -> one result per layout, in layout order
    for (sdk, cfg, _layout), got in sorted(per_cfg.items(), key=lambda kv: (*kv[0][:2], LAYOUT_PADS.index(kv[0][2]))):
        for key, r in got.items():
            results.setdefault(f"{sdk}|{cfg}|{key}", []).append(r)
    rows = []
    for sdk in SDKS:
        for surface in a.surfaces:
            for mode in a.cg_modes:
                base = results.get(f"{sdk.label}|baseline|{surface}|{mode}", [None])[0]
                if not base or "long" not in base or "short" not in base:
                    continue
                for cfg in configs.ALL:
                    per_layout = results.get(f"{sdk.label}|{cfg}|{surface}|{mode}")
                    if per_layout is None:
                        continue
                    bad = [r for r in per_layout if "long" not in r or "short" not in r]
                    if bad:
                        rows.append({"sdk": sdk.label, "config": cfg, "surface": surface, "mode": mode,
                                     "error": bad[0].get("error")})  # fmt: skip
                        continue
                    layout_rows = [_cg_row(a, cfg, surface, mode, r, base) for r in per_layout]
                    row = {"sdk": sdk.label, **layout_rows[0]}
                    if len(layout_rows) > 1:
                        row["layouts"] = [round(lr["added_ir_per_event"]) for lr in layout_rows]
                        row.update({k: statistics.median(lr[k] for lr in layout_rows) for k in _MEDIAN_KEYS if k in row})
                    rows.append(row)
    return {"rows": rows, "streams": a.cg_streams, "deltas": a.cg_deltas, "short_deltas": a.cg_short,
            "short_streams": a.cg_short_streams, "ref_events": a.ref_events,
            "instrumentation": "whole process" if a.cg_instr_all else "after the pre-warm (callgrind_control)",
            "prewarm": a.cg_prewarm, "watchdog_interval_s": a.cg_watchdog_s, "paired": a.cg_paired,
            "layouts": list(LAYOUT_PADS[: a.cg_layouts]), "oldest_layouts": list(LAYOUT_PADS[: a.cg_oldest_layouts])}  # fmt: skip


def _cg_row(a, cfg: str, surface: str, mode: str, r: dict, base: dict) -> dict:
    """One configuration's figures from one process (``base``: the baseline process's)."""
    b_fixed, b_marg = _split(base)
    bl = base["long"]
    lg = r["long"]
    fixed, marg = _split(r)
    ev = lg["events"]
    row = {"config": cfg, "surface": surface, "mode": mode, "http": lg.get("http"), "events": ev, "ir": lg["ir"],
           "events_per_stream": ev / lg["streams"], "ir_per_event": lg["ir"] / ev,
           "added_measured_ir_per_event": (lg["ir"] - bl["ir"]) / ev,
           # the budget figure: marginal + fixed amortized over a stream of --ref-events events
           "added_ir_per_event": (marg - b_marg) + (fixed - b_fixed) / a.ref_events,
           "added_marginal_ir_per_event": marg - b_marg,
           "added_fixed_ir_per_stream": fixed - b_fixed,
           "added_fixed_caller_ir_per_stream": _split(r, what="ir_caller")[0] - _split(base, what="ir_caller")[0],
           "spans": lg["spans"] + r["short"]["spans"],
           "produced": cfg == "baseline" or lg["spans"] > 0}  # fmt: skip
    if "long_off" in r and "short_off" in r:
        # the verdict for otelstream: against its uninstrumented twin in the same process; the figures against the
        # baseline process stay, as cross_*
        for name in ("added_ir_per_event", "added_marginal_ir_per_event", "added_fixed_ir_per_stream"):
            row["cross_" + name] = row[name]
        off_fixed, off_marg = _split(r, "_off")
        row["cross_added_fixed_caller_ir_per_stream"] = row["added_fixed_caller_ir_per_stream"]
        row.update({"paired": True, "added_marginal_ir_per_event": marg - off_marg,
                    "added_fixed_ir_per_stream": fixed - off_fixed,
                    "added_fixed_caller_ir_per_stream": _split(r, what="ir_caller")[0]
                    - _split(r, "_off", what="ir_caller")[0],
                    "added_ir_per_event": (marg - off_marg) + (fixed - off_fixed) / a.ref_events,
                    "off_ir_per_event": r["long_off"]["ir"] / r["long_off"]["events"]})  # fmt: skip
    return row


# --- memory ----------------------------------------------------------------------------------------------
MEM_VARIANTS = (("baseline", "on"), ("otelstream", "off"), ("otelstream-default", "on"))


def mem_jobs(a) -> list[tuple[float, str, object]]:
    """The first surface gets the full ``--mem-total`` retained run; the others 1/5 of it. The oldest SDK set: the
    open-stream figure only (a tenth of the retained run)."""
    jobs = []
    for k, sdk in enumerate(SDKS):
        for n, surface in enumerate(a.mem_surfaces):
            total = a.mem_total if n == 0 else max(1, a.mem_total // 5)
            total = total if k == 0 else max(1, total // 10)
            for cfg, tracing in MEM_VARIANTS:
                if not applicable(cfg, surface, sdk.avail):
                    continue

                def one(sdk=sdk, surface=surface, cfg=cfg, tracing=tracing, total=total):
                    r = run_worker(["memory", cfg, surface, "--open", str(a.mem_open), "--total", str(total),
                                    "--tracing", tracing], timeout=900, sdk=sdk)  # fmt: skip
                    return "memory", (sdk.label, surface, cfg, tracing), r

                jobs.append((5 + total * 0.008, f"memory {sdk.label} {surface} {cfg} tracing {tracing} N={total}", one))
    return jobs


def mem_collect(a, got: dict) -> dict:
    rows = []
    for sdk in SDKS:
        for surface in a.mem_surfaces:
            base = got.get((sdk.label, surface, "baseline", "on"))
            for cfg, tracing in MEM_VARIANTS:
                r = got.get((sdk.label, surface, cfg, tracing))
                if r is None:
                    continue
                row = {"sdk": sdk.label, "config": cfg, "tracing": tracing, "surface": surface}
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


# --- callgrind + memory, one pool ---------------------------------------------------------------------------
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
    cmd = [python(), os.path.join(HERE, "scale.py"), "--streams", str(a.scale_streams), "--rounds",
           str(a.scale_rounds), "--configs", "baseline," + a.scale_config]  # fmt: skip
    log("scale: " + " ".join(cmd[1:]))
    p = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(), timeout=900, cwd=ROOT)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-8:]}
    return json.loads(lines[-1])


# --- baseline.json -----------------------------------------------------------------------------------------
def _cell(row: dict) -> str:
    return f"{row['sdk']}|{row['config']}|{row['surface']}|{row['mode']}"


def cg_check(cg: dict, path: str) -> list[str]:
    with open(path) as f:
        ref = json.load(f)["added_ir_per_event"]
    bad = []
    seen = 0
    for row in cg.get("rows", []):
        if row["config"] not in configs.OURS or "added_ir_per_event" not in row:
            continue
        key = _cell(row)
        # every layout above the recorded median + 10 %: one layout alone moves by up to ≈ ±1 000 (≈ ±10 %) with the
        # same code (NOTES.md, "Measurement noise")
        best = min(row.get("layouts") or [row["added_ir_per_event"]])
        if key in ref and best > ref[key] * (1 + CG_TOLERANCE):
            bad.append(f"{key}: every layout above {ref[key]:.0f} + 10 % ({row.get('layouts') or round(best)})")
        seen += key in ref
    if not seen:
        bad.append("no cell of this run is in bench/baseline.json (another SDK set or an old file): record it "
                   "with --write-baseline")
    return bad


def write_baseline(res: dict, path: str, a) -> None:
    cg = res["cg"]
    rows = [r for r in cg["rows"] if r["config"] in configs.OURS and "added_ir_per_event" in r]
    ref = {_cell(r): round(r["added_ir_per_event"]) for r in rows}
    detail = {_cell(r): {"marginal_ir_per_event": round(r["added_marginal_ir_per_event"]),
                         "fixed_ir_per_stream": round(r["added_fixed_ir_per_stream"]),
                         "fixed_caller_ir_per_stream": round(r["added_fixed_caller_ir_per_stream"])}
              for r in rows}  # fmt: skip
    doc = {"what": "callgrind instructions added by otelstream (caller's thread + background threads, measured "
                   "phases only) vs the same process uninstrumented, CPython 3.11, PYTHONHASHSEED=0, median of the "
                   "heap layouts; added_ir_per_event = marginal per event + fixed per stream / ref_events. Keys: "
                   "sdk set|configuration|surface|mode (the SDK releases of each set under sdks)",
           "detail": detail, "sdks": {k: v for k, v in res["machine"]["sdks"].items()},
           "command": res["command"], "otelstream_commit": res["otelstream_commit"],
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
    sdks = {}
    for sdk in SDKS:
        # httpx only where an SDK reads with it (openai 2.x): a package not installed is left out
        vers = dist_versions(sdk.python, ["openai", "anthropic", "httpx2", "httpx", "opentelemetry-sdk", "pydantic"])
        sdk.versions = {k.replace("-", "_"): v for k, v in vers.items() if v}
        sdks[sdk.label] = sdk.versions
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "kernel": platform.release(),
            "versions": SDKS[0].versions, "sdks": sdks, "peers": peer_versions()}  # fmt: skip


def dist_versions(py: str, names: list[str]) -> dict:
    """The interpreter's Python version (``python``) and each distribution's installed version (None: not installed)."""
    code = ("import importlib.metadata as m, json, sys; out = {'python': sys.version.split()[0]}\n"
            "for n in %r:\n    try: out[n] = m.version(n)\n    except Exception: out[n] = None\nprint(json.dumps(out))")
    p = subprocess.run([py, "-c", code % (names,)], capture_output=True, text=True)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        return {}


def peer_versions() -> dict:
    vers = dist_versions(python(), [n for pair in configs.PIP_NAMES.values() for n in pair if n != "-"])
    vers.pop("python", None)
    return vers


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
                   help="also callgrind the peers (in the newest SDK set)")
    p.add_argument("--cg-modes", default="sync,async", help="callgrind: the modes measured (both)")
    p.add_argument("--cg-prewarm", type=int, default=10,
                   help="callgrind: uninstrumented streams per surface and mode before any measured phase")
    p.add_argument("--cg-paired", action=argparse.BooleanOptionalAction, default=True,
                   help="callgrind: measure otelstream against its own uninstrumented twin phases in the same process "
                        "(the baseline process stays for the peers and as cross_* figures)")
    p.add_argument("--cg-watchdog-s", type=float, default=3600.0,
                   help="callgrind: the watchdog's interval (its cost is per second of wall time, not per event: "
                        "under valgrind's slowdown a 1 s tick lands on ~50x fewer events; measured by the scale stage)")
    p.add_argument("--cg-layouts", type=int, default=3, choices=range(1, 6),
                   help="callgrind: otelstream's figures are the median over this many heap layouts (one process "
                        "each; the same code's cost per event moves by a few hundred instructions with the layout)")
    p.add_argument("--cg-oldest-layouts", type=int, default=1, choices=range(1, 6),
                   help="callgrind: the same for the oldest SDK set (one by default: its cells are there for the "
                        "budgets' verdict on the oldest releases, and each layout is one more process per configuration)")
    p.add_argument("--cg-instr-all", action="store_true",
                   help="callgrind: instrument the whole process (slow), not only from the end of the pre-warm")
    p.add_argument("--jobs", type=int, default=2, help="callgrind + memory processes at a time")
    p.add_argument("--fork-server", action=argparse.BooleanOptionalAction, default=True,
                   help="overhead/TTFD: fork each run from a process that has imported the SDK (else exec each)")
    p.add_argument("--mem-surfaces", default="chat,messages")
    p.add_argument("--mem-open", type=int, default=1000)
    p.add_argument("--mem-total", type=int, default=10_000)
    p.add_argument("--scale-streams", type=int, default=10_000)
    p.add_argument("--scale-rounds", type=int, default=1)
    p.add_argument("--scale-config", default="otelstream-default", choices=configs.OURS)
    p.add_argument("--pause", type=float, default=0.5)
    p.add_argument("--check", action="store_true",
                   help="callgrind only; fail where every layout is above bench/baseline.json + 10 %%")
    p.add_argument("--write-baseline", action="store_true")
    p.add_argument("--python", default=os.environ.get("BENCH_PYTHON") or sys.executable,
                   help="the interpreter of the newest SDK set and the peers (default $BENCH_PYTHON, else this one)")
    p.add_argument("--oldest-python", default=os.environ.get("BENCH_OLDEST_PYTHON", ""),
                   help="the interpreter of a venv with the oldest supported SDK releases "
                        "(bench/requirements-oldest.txt; default $BENCH_OLDEST_PYTHON; empty: not measured)")
    p.add_argument("--record", action=argparse.BooleanOptionalAction, default=None,
                   help="write bench/RESULTS.md (default: only when every stage ran)")
    p.add_argument("--out", default=os.path.join(HERE, "results.json"), help="the raw figures (not committed)")
    p.add_argument("--rev", default="HEAD", help="benchmark otelstream as committed at this revision (git archive)")
    p.add_argument("--worktree", action="store_true", help="benchmark the work tree's otelstream instead")
    a = p.parse_args()
    a.surfaces = [s for s in a.surfaces.split(",") if s]
    a.configs = [c for c in a.configs.split(",") if c]
    a.mem_surfaces = [s for s in a.mem_surfaces.split(",") if s]
    a.cg_modes = [m for m in a.cg_modes.split(",") if m]
    only = set(a.only.split(","))
    if a.check:
        only = {"cg"}
        a.cg_peers = False
    t0 = time.time()
    SDKS.append(Sdk("newest", a.python))
    if a.oldest_python:
        SDKS.append(Sdk("oldest", a.oldest_python))
    if not a.worktree:
        take_snapshot(a.rev)
    for sdk in SDKS:
        sdk.avail = probe_availability(sdk.python)
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
                 "command": command(a), "sdk_sets": [sdk.label for sdk in SDKS],
                 "otelstream_commit": SNAPSHOT.get("commit") or "work tree",
                 "available": {f"{sdk.label}|{c}|{s}": v for sdk in SDKS for (c, s), v in sdk.avail.items()}}  # fmt: skip
    # wall-clock stages alone; callgrind and memory (machine-speed independent) share one pool
    steps = [("overhead", bench_overhead), ("cg+memory", None), ("ttfd", bench_ttfd), ("scale", bench_scale)]
    for name, fn in steps:
        if fn is None:
            want = only & {"cg", "memory"}
            if want:
                log(f"== {' + '.join(sorted(want))}")
                res.update(bench_deterministic(a, want))
        elif name in only:
            t = time.time()
            log(f"== {name}")
            res[name] = fn(a, SDKS[0].avail)
            res[name]["seconds"] = round(time.time() - t, 1)
            log(f"{name}: {res[name]['seconds']:.0f} s")
    res["seconds"] = round(time.time() - t0, 1)
    baseline_path = os.path.join(HERE, "baseline.json")
    if a.write_baseline and "cg" in res and "rows" in res["cg"]:
        write_baseline(res, baseline_path, a)
        log(f"wrote {baseline_path}")
    if a.check:
        bad = cg_check(res["cg"], baseline_path)
        print(json.dumps(res["cg"], indent=1))
        if bad:
            print("callgrind regression:\n  " + "\n  ".join(bad))
            raise SystemExit(1)
        print("callgrind: within bench/baseline.json + 10 %")
        return
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    log(f"wrote {a.out} in {res['seconds']:.0f} s")
    record = a.record if a.record is not None else only >= {"overhead", "cg", "memory", "scale", "ttfd"}
    if record:
        from bench import report

        report.write(res, os.path.join(HERE, "RESULTS.md"))
        log("wrote bench/RESULTS.md")


def command(a) -> str:
    """The command line of this run, as RESULTS.md records it: the interpreters by their role, not their path."""
    argv = list(sys.argv[1:])
    for i, arg in enumerate(argv):
        if arg.startswith("--oldest-python="):
            argv[i] = "--oldest-python=$OLDEST_VENV/bin/python"
        elif i and argv[i - 1] == "--oldest-python":
            argv[i] = "$OLDEST_VENV/bin/python"
        elif arg.startswith("--python="):
            argv[i] = "--python=$PEERS_VENV/bin/python"
        elif i and argv[i - 1] == "--python":
            argv[i] = "$PEERS_VENV/bin/python"
    env = "BENCH_OLDEST_PYTHON=$OLDEST_VENV/bin/python " if a.oldest_python and "--oldest-python" not in " ".join(
        sys.argv) else ""  # fmt: skip
    return env + " ".join(["$PEERS_VENV/bin/python" if a.python == sys.executable else "python",
                           os.path.relpath(sys.argv[0], ROOT), *argv])  # fmt: skip


if __name__ == "__main__":
    main()
