"""``--check``, the regression gate, and ``--write-baseline``: otelstream's callgrind cells against
``bench/baseline.json``, and that file written from a run."""

from __future__ import annotations

import json
import platform
import time

from bench import configs

CG_TOLERANCE = 0.10  # docs/benchmarks.md: a cell more than 10 % above baseline.json fails --check


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
