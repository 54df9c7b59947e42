"""Which per-event path runs: ``OTELSTREAM_PURE_PYTHON=1`` forces the pure-Python reference (read once, at import,
from the environment only), and ``otelstream doctor`` says which path runs and why."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from otelstream import accelerator, config
from otelstream.doctor import render, runner

_PROBE = (
    "from otelstream import accelerator\n"
    "from otelstream.adapters import body_readers, observing\n"
    "print(observing.observe_sync is observing.observe_sync_py, body_readers.read_sync is body_readers.read_sync_py,"
    " accelerator.describe())\n"
)


def _probe(**env: str) -> str:
    full = {k: v for k, v in os.environ.items() if k != "OTELSTREAM_PURE_PYTHON"} | env
    return subprocess.run([sys.executable, "-c", _PROBE], env=full, capture_output=True, text=True, check=True).stdout


def test_the_environment_forces_the_pure_path() -> None:
    assert _probe(OTELSTREAM_PURE_PYTHON="1").strip() == "True True pure Python (OTELSTREAM_PURE_PYTHON is set)"
    assert config.load(environ={"OTELSTREAM_PURE_PYTHON": "1"}).pure_python is True
    assert config.load(environ={}).pure_python is False
    with pytest.raises(TypeError, match="OTELSTREAM_PURE_PYTHON"):
        config.load({"pure_python": True})


def test_without_it_the_compiled_path_runs_where_it_was_built() -> None:
    out = _probe()
    try:
        from otelstream import _speedups  # type: ignore[attr-defined]  # noqa: F401
    except ImportError:  # not built here: the pure path, and the reason
        assert out.strip() == "True True pure Python (compiled accelerator: not built)"
    else:
        assert out.startswith("False False compiled accelerator (_speedups")


def test_doctor_says_which_path_runs() -> None:
    lines = render.text(runner.Result(rows=[])).splitlines()
    assert lines[1] == f"per-event path: {accelerator.describe()}"
