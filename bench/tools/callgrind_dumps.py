"""A Python child run under callgrind that marks its phases with ``os.getppid()``: callgrind dumps before each call
(``--dump-before=getppid``), so a phase's instructions are the difference of two dumps' totals."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile


def dump_totals(argv: list[str]) -> dict[int, int]:
    """Run ``python ARGV`` under callgrind (``PYTHONHASHSEED=0``); the total Ir of each dump, by its number (dump k
    closes just before the child's k-th ``os.getppid()``)."""
    d = tempfile.mkdtemp()
    try:
        subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=getppid", f"--callgrind-out-file={d}/cg.%p",
                        sys.executable, *argv], env=dict(os.environ, PYTHONHASHSEED="0"), capture_output=True,
                       check=True)  # fmt: skip
        totals = {}
        for path in glob.glob(f"{d}/cg.*.*"):  # cg.PID.K; the final cg.PID (the process's tail) is not a phase
            with open(path) as f:
                totals[int(path.rsplit(".", 1)[1])] = next(int(ln.split()[1]) for ln in f if ln.startswith("totals:"))
        return totals
    finally:
        shutil.rmtree(d, ignore_errors=True)
