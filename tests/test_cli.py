"""The ``otelstream`` command as a user runs it, in a process of its own: ``--version``, and a flag a subcommand
does not know refused by that subcommand (its usage), not by the top-level parser."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.paths import REPO


def _otelstream(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "otelstream.cli", *argv], capture_output=True, text=True,
                          timeout=60, cwd=REPO)  # fmt: skip


def test_version_prints_the_version_and_exits_0() -> None:
    done = _otelstream("--version")
    pyproject = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert pyproject is not None
    assert (done.returncode, done.stdout, done.stderr) == (0, f"otelstream {pyproject.group(1)}\n", "")


def test_a_subcommand_refuses_a_flag_it_does_not_know_with_its_own_usage() -> None:
    done = _otelstream("dashboards", "--k9s", "out")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("usage: otelstream dashboards ")
    assert done.stderr.splitlines()[-1] == "otelstream dashboards: error: unrecognized arguments: --k9s"


def test_without_a_subcommand_the_top_level_usage_names_them() -> None:
    done = _otelstream()
    assert done.returncode == 2 and "{check,demo,dashboards,doctor,probe}" in done.stderr
