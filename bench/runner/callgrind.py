"""The callgrind stage's jobs and figures: one valgrind process per SDK set, configuration and heap layout
(``bench/workers/callgrind.py`` runs inside it and dumps each phase), and the split of each cell's dumps into a fixed cost
per stream and a marginal cost per event, otelstream's against its uninstrumented twin, medians over the layouts."""

from __future__ import annotations

import glob
import shutil
import statistics
import tempfile

from bench import configs
from bench.runner.procs import run_worker
from bench.runner.sdks import SDKS, Sdk, applicable


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
        for key, seen in (res.get("observed") or {}).items():
            if key in got:
                got[key]["observed"] = seen
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
            if cfg in configs.PEERS and (not a.cg_peers or not sdk.peers):  # the peers: newest (and genai2) only
                continue
            phases = [(s, m) for s in a.surfaces for m in a.cg_modes
                      if sdk.runs(s) and applicable(cfg, s, sdk.avail)]  # fmt: skip
            if not phases:
                continue
            weight = 15 + 5 * len(phases) * (2 if a.cg_paired and cfg in configs.OURS else 1)  # ≈ s, idle 2 cores
            layouts = a.cg_layouts if n == 0 else a.cg_oldest_layouts
            for layout in LAYOUT_PADS[:layouts] if cfg in configs.OURS else (0,):
                label = f"callgrind {sdk.label} {cfg}" + (f" (layout {layout})" if layout else "")
                jobs.append((weight, label, lambda sdk=sdk, cfg=cfg, phases=phases, layout=layout: (
                    "cg", (sdk.label, cfg, layout), cg_one(sdk, cfg, phases, a, layout))))  # fmt: skip
    return jobs


# types and interned names added per layout (workers/main.py --layout): otelstream's cells are the median over the first --cg-layouts
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
    seen = r.get("observed")
    if seen is not None:  # workers/observed.py: a span that ends before the stream does observes the call only
        row["observed"] = seen
        row["observes_stream"] = seen["covering"] > 0
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
