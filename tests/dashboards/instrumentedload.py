"""Start instrumented_worker.py (otelstream on the real SDKs against the demo's fake provider) as a process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from loadsource import ALL_ALERTS, LoadSource
from promsupport import REPO, free_port

WORKER = Path(__file__).with_name("instrumented_worker.py")


def start_instrumented_load(workdir: Path, timeout: float = 30.0) -> LoadSource:
    port = free_port()
    log = (workdir / "worker.log").open("wb")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("OTELSTREAM_RAISE_INTERNAL_ERRORS", None)
    process = subprocess.Popen(
        [sys.executable, str(WORKER), str(port)], stdout=subprocess.PIPE, stderr=log, env=env, cwd=workdir
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
            raise AssertionError(f"load process exited {process.returncode}:\n{_tail(workdir / 'worker.log')}")

    if not ready or not ready[0].startswith("ready"):
        stop()
        raise AssertionError(f"instrumented load did not start in {timeout}s:\n{_tail(workdir / 'worker.log')}")
    return LoadSource(
        target=f"127.0.0.1:{port}",
        real=True,
        why="",
        # ReportsDropped comes from the stand-in job (a full export queue cannot be produced on demand)
        expected_alerts=ALL_ALERTS,
        stop=stop,
        check=check,
    )


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""
