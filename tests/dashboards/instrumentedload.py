"""The instrumented loads, each in its own process: instrumented_worker.py, and ``otelstream demo --serve``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.dashboards.harness import free_port
from tests.dashboards.loadsource import ALL_ALERTS, LoadSource
from tests.support.paths import REPO

WORKER = Path(__file__).with_name("instrumented_worker.py")


def start_instrumented_load(workdir: Path, mix: str = "faults", timeout: float = 30.0) -> LoadSource:
    port = free_port()
    log_path = workdir / f"worker-{mix}.log"
    log = log_path.open("wb")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("OTELSTREAM_RAISE_INTERNAL_ERRORS", None)
    env["OTELSTREAM_SELF_CHECK"] = "true"  # as a service runs: the self-check stat and its gauge have data
    process = subprocess.Popen(
        [sys.executable, str(WORKER), str(port), mix], stdout=subprocess.PIPE, stderr=log, env=env, cwd=workdir
    )
    assert process.stdout is not None
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(process.stdout.readline().decode()), daemon=True)
    reader.start()
    reader.join(timeout)

    def stop() -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        log.close()

    def check() -> None:
        if process.poll() is not None:
            raise AssertionError(f"load process exited {process.returncode}:\n{_tail(log_path)}")

    if not ready or not ready[0].startswith("ready"):
        stop()
        raise AssertionError(f"instrumented load did not start in {timeout}s:\n{_tail(log_path)}")
    return LoadSource(
        target=f"127.0.0.1:{port}",
        real=True,
        why="",
        # ReportsDropped comes from the stand-in target (a full export queue cannot be produced on demand)
        expected_alerts=ALL_ALERTS if mix == "faults" else frozenset(),
        stop=stop,
        check=check,
        stop_traffic=lambda: process.send_signal(signal.SIGUSR1),
    )


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


# The demo's own default mix: what a user sees first (every panel's trouble present, the error classes of a 429, a
# 500, an overload and a timeout among them), and the alerts it trips.
DEMO_MIX = "default"
DEMO_ALERTS = frozenset(
    {
        "OtelstreamBadOutcomeRatioHigh",
        "OtelstreamProviderOutage",
        "OtelstreamCutStreams",
        "OtelstreamSequenceAnomalies",
        "OtelstreamReportsDropped",  # from the stand-in job
    }
)


def start_demo_load(workdir: Path, timeout: float = 60.0) -> LoadSource:
    """``otelstream demo --serve``: the user-facing demo, all five surfaces, as the scrape target."""
    port = free_port()
    log_path = workdir / "demo.log"
    log = log_path.open("wb")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("OTELSTREAM_RAISE_INTERNAL_ERRORS", None)
    env["OTELSTREAM_SELF_CHECK"] = "true"  # as a service runs: the self-check stat and its gauge have data
    command = [sys.executable, "-m", "otelstream.cli", "demo", "--serve", "--quiet", "--port", str(port)]
    command += ["--streams", "120", "--faults", DEMO_MIX]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)

    def stop() -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        log.close()

    def check() -> None:
        if process.poll() is not None:
            raise AssertionError(f"otelstream demo exited {process.returncode}:\n{_tail(log_path)}")

    deadline = time.monotonic() + timeout
    while b"serving until Ctrl-C" not in log_path.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            stop()
            raise AssertionError(f"otelstream demo --serve did not start serving in {timeout}s:\n{_tail(log_path)}")
        time.sleep(0.2)
    return LoadSource(f"127.0.0.1:{port}", True, "", DEMO_ALERTS, stop, check)
