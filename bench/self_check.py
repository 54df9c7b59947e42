"""What the runtime self-check costs a process, and how long ``otelstream doctor`` takes (docs/doctor.md).

    python bench/self_check.py [--runs 5] [--json]

Self-check: each run is a fresh interpreter that imports both SDKs (an application has them imported before or after
``instrument()``; their import is not the check's), calls ``otelstream.instrument(self_check=True)`` on a private
registry, and waits for the check's thread to end. Reported per run: the CPU time of the check's own thread
(``time.thread_time()`` inside it: the figure the ≤ 0.3 s budget is about), the process's CPU time from just before
``instrument()`` to the thread's end (everything the check caused, on any thread, ``instrument()``'s own work
included), the check's wall time and what it found. Doctor: the wall time of ``otelstream doctor --json`` as a user
runs it (interpreter start and SDK imports included; budget 15 s), and its CPU time (children's rusage).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, time
import anthropic, openai  # the application's imports
from prometheus_client import CollectorRegistry
import otelstream
from otelstream.doctor import runtime_check

cpu, wall = time.process_time(), time.monotonic()
otelstream.instrument(registry=CollectorRegistry(), self_check=True)
thread = runtime_check.STATE.thread
if thread is not None:
    thread.join(60)
print(json.dumps({
    "thread_cpu_s": runtime_check.STATE.cpu_s,
    "process_cpu_s": time.process_time() - cpu,
    "wall_s": time.monotonic() - wall,
    "failures": runtime_check.STATE.failures,
    "checked": sorted(runtime_check.STATE.done),
    "openai": openai.__version__,
    "anthropic": anthropic.__version__,
}))
otelstream.uninstrument()
"""


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": "0", "OTELSTREAM_SELF_CHECK": "true"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return env


def self_check_run() -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=_env(), check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def doctor_run() -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "otelstream.cli", "doctor", "--json"], capture_output=True,
                          text=True, env=_env())  # fmt: skip
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    doc = json.loads(done.stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "exit": done.returncode, "cells": doc["summary"]["cells"],
            "mismatched": doc["summary"]["mismatched"], "matrix_s": doc["seconds"]}  # fmt: skip


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} s, max {max(values):.3f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    checks = [self_check_run() for _ in range(args.runs)]
    doctors = [doctor_run() for _ in range(args.runs)]
    if args.json:
        print(json.dumps({"self_check": checks, "doctor": doctors}, indent=2))
        return 0
    first = checks[0]
    print(f"self-check ({args.runs} fresh processes; openai {first['openai']}, anthropic {first['anthropic']}; "
          f"checked {', '.join(first['checked'])}; failures {sorted({c['failures'] for c in checks})}):")  # fmt: skip
    print(f"  its thread's CPU:        {summary([c['thread_cpu_s'] for c in checks])}  (budget 0.3 s)")
    print(f"  process CPU it caused:   {summary([c['process_cpu_s'] for c in checks])}")
    print(f"  wall time to its end:    {summary([c['wall_s'] for c in checks])}")
    d = doctors[0]
    print(f"otelstream doctor --json ({args.runs} runs; {d['cells']} cells; mismatched "
          f"{sorted({x['mismatched'] for x in doctors})}; exit {sorted({x['exit'] for x in doctors})}):")  # fmt: skip
    print(f"  wall time:               {summary([x['wall_s'] for x in doctors])}  (budget 15 s)")
    print(f"  CPU time:                {summary([x['cpu_s'] for x in doctors])}")
    print(f"  the matrix itself:       {summary([x['matrix_s'] for x in doctors])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
