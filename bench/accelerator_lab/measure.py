"""The lab's callgrind figures: marginal instructions added per event (the slope between 50- and 250-event streams,
observed minus bare) and fixed instructions added per stream, per variant and kind; then the per-stream object size.

    PYTHONPATH=. /work/main/.venv/bin/python bench/accelerator_lab/measure.py [--jobs 2] [--out bench/accelerator_lab/figures.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.accelerator_lab.variants import VARIANTS  # noqa: E402
from bench.tools.callgrind_dumps import dump_totals  # noqa: E402

STREAMS = 2


def one(cell: tuple[str, str, str]) -> dict:
    name, kind, clock = cell
    t = dump_totals([os.path.join(ROOT, "lab", "cg_child.py"), name, kind, clock, str(STREAMS)])
    # dump k closes before the k-th getppid: 1 start-up, 2 bare 50, 3 observed 50, 4 bare 250, 5 observed 250
    add50, add250 = t[3] - t[2], t[5] - t[4]
    marginal = (add250 - add50) / (200 * STREAMS)
    fixed = add50 / STREAMS - 50 * marginal
    return {"variant": name, "kind": kind, "clock": clock, "marginal": round(marginal), "fixed": round(fixed),
            "bare_marginal": round((t[4] - t[2]) / (200 * STREAMS))}  # fmt: skip


def sizes() -> dict:
    """Per open stream: sys.getsizeof of the wrapper and its Acct, and tracemalloc's growth over N open wrappers
    (started: one item pulled), less the inner iterators' own."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "lab", "mem_child.py")], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=ROOT))  # fmt: skip
    return json.loads(out.stdout)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", default=os.path.join(ROOT, "lab", "figures.json"))
    p.add_argument("--only", default="", help="variants, comma-separated")
    p.add_argument("--kinds", default="sync,async,async-suspend,reader")
    p.add_argument("--no-mem", action="store_true")
    a = p.parse_args()
    cells = []
    for name in VARIANTS:
        if a.only and name not in a.only.split(","):
            continue
        for kind in a.kinds.split(","):
            cells.append((name, kind, "py"))
            if name in ("cext", "cython") and kind != "reader":
                cells.append((name, kind, "native"))
    os.environ["PYTHONPATH"] = ROOT
    with ThreadPoolExecutor(a.jobs) as ex:
        rows = list(ex.map(one, cells))
    res = {"cg": rows, "mem": {} if a.no_mem else sizes()}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    for r in rows:
        print(f"{r['variant']:7} {r['kind']:14} {r['clock']:6} marginal {r['marginal']:6} fixed {r['fixed']:7}")
    print(json.dumps(res["mem"], indent=1))


if __name__ == "__main__":
    main()
