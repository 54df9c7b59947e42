"""The benchmark suite, one command (run it with the peers' venv, ``bench/requirements-peers.txt``):

    python bench/run.py --oldest-python OLDEST/bin/python  # everything, newest and oldest supported SDK releases
    python bench/run.py --only overhead,cg    # a subset: overhead, cg, memory, scale, ttfd
    python bench/run.py --check               # callgrind only: fails where every layout is above baseline.json + 10 %
    python bench/run.py --write-baseline      # also rewrite bench/baseline.json from this run's callgrind figures

Two SDK sets: ``newest`` runs in ``--python`` (default ``$BENCH_PYTHON``, else this interpreter: the peers' venv, with
the newest SDK releases) and ``oldest`` in ``--oldest-python`` (default ``$BENCH_OLDEST_PYTHON``; a venv from
``bench/requirements-oldest.txt``; without one the oldest cells are left out and RESULTS.md says so). Callgrind and
memory run on both; the wall-clock stages (overhead, TTFD, scale) and the peers on ``newest`` only, but for one:
OpenTelemetry's google-genai instrumentation requires google-genai < 3, so it runs in a third set, ``genai2``
(``--genai2-python``: generate_content only, callgrind and memory, beside otelstream and the baseline on that release).

Surfaces (``--surfaces``): the SDKs' four (responses, chat, completions, messages), the cloud SDKs' two
(generate_content: google-genai over httpx2; converse: boto3 sync, aiobotocore async), and the HTTP-level observer's two,
``http-chat`` and ``http-messages``: the same Chat and Messages bodies read through a plain client of the HTTP library
the set's openai reads with (httpx2; httpx for openai 2.x), which no SDK adapter owns (``bench/workers/main.py``; no peers).

Every configuration runs in a fresh process (``bench/workers/main.py``, ``bench/workers/scale.py``). Timing runs are interleaved
(round r runs every configuration once, in an order rotated by r) and reported as the median of the per-process
medians. ``bench/RESULTS.md`` is the record (with the command that made it); the raw figures go to
``bench/results.json``, which is not committed.
"""

# This module is the command: its flags and the order of the stages (the docstring above is its --help). The rest of
# the harness, by job: runner/ drives the measured processes (timed.py: overhead, TTFD, scale; pool.py: callgrind,
# callgrind.py, and memory, memory.py, in one pool of processes; procs.py: how workers start; sdks.py: the SDK sets;
# gate.py: --check and --write-baseline); workers/ is what runs inside them (main.py, its commands, scale.py);
# report/ renders RESULTS.md; configs.py and canned.py are the configurations and the bodies both sides share.

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import canned, configs
from bench.runner.gate import cg_check, write_baseline
from bench.runner.pool import bench_deterministic
from bench.runner.procs import HERE, ROOT, SNAPSHOT, log, probe_availability, take_snapshot
from bench.runner.sdks import GENAI2, SDKS, Sdk, machine
from bench.runner.timed import bench_overhead, bench_scale, bench_ttfd


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
    p.add_argument("--genai2-python", default=os.environ.get("BENCH_GENAI2_PYTHON", ""),
                   help="the interpreter of a venv with google-genai 2.x and OpenTelemetry's google-genai "
                        "instrumentation, which requires google-genai < 3 (bench/requirements-genai2.txt; default "
                        "$BENCH_GENAI2_PYTHON; empty: that peer is not measured): generate_content only, callgrind")
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
    SDKS.append(Sdk("newest", a.python, peers=True))
    if a.oldest_python:
        SDKS.append(Sdk("oldest", a.oldest_python))
    if a.genai2_python:
        SDKS.append(Sdk(GENAI2, a.genai2_python, surfaces=("generate_content",), peers=True))
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
        from bench.report import record

        record.write(res, os.path.join(HERE, "RESULTS.md"))
        log("wrote bench/RESULTS.md")


def command(a) -> str:
    """The command line of this run, as RESULTS.md records it: the interpreters by their role, not their path."""
    argv = list(sys.argv[1:])
    for i, arg in enumerate(argv):
        if arg.startswith("--oldest-python="):
            argv[i] = "--oldest-python=$OLDEST_VENV/bin/python"
        elif i and argv[i - 1] == "--oldest-python":
            argv[i] = "$OLDEST_VENV/bin/python"
        elif arg.startswith("--genai2-python="):
            argv[i] = "--genai2-python=$GENAI2_VENV/bin/python"
        elif i and argv[i - 1] == "--genai2-python":
            argv[i] = "$GENAI2_VENV/bin/python"
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
