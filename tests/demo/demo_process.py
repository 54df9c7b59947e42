"""``otelstream demo --serve`` as a user runs it: the installed command in a process of its own, read line by line
until it says what it serves, then stopped by a signal."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass

_SERVING = "serving until"
_LAST_ADDRESS = "light traffic continues"


def free_port() -> int:
    """A port nothing listens on now (closed again at once: the demo binds it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass(frozen=True)
class Stopped:
    rc: int
    out: str  # everything the demo printed on stdout
    err: str


class ServingDemo:
    """``otelstream demo ARGV`` (``--serve`` among them); ``addresses()`` waits for the serving lines."""

    def __init__(self, *argv: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELSTREAM_"))}
        env["OTELSTREAM_SELF_CHECK"] = "false"
        self._process = subprocess.Popen([sys.executable, "-m", "otelstream.cli", "demo", *argv], env=env, text=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._seen: list[str] = []
        self._err: list[str] = []
        threading.Thread(target=self._read_out, daemon=True).start()
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()

    def _read_out(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _read_err(self) -> None:
        assert self._process.stderr is not None
        self._err.extend(self._process.stderr)

    def addresses(self, timeout: float = 240.0) -> dict[str, str]:
        """What the demo says it serves (label → URL), once it says so; fails if it exits first."""
        serving = False
        found: dict[str, str] = {}
        while True:
            line = self._lines.get(timeout=timeout)
            assert line is not None, f"the demo ended before serving: {self._seen} {''.join(self._err)}"
            self._seen.append(line)
            if line.startswith(_SERVING):
                serving = True
            elif serving and _LAST_ADDRESS in line:
                return found
            elif serving and ":" in line:
                label, _, url = line.partition(": ")
                found[label.strip()] = url.strip()

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 60.0) -> Stopped:
        self._process.send_signal(signum)
        rc = self._process.wait(timeout=timeout)
        self._err_reader.join(timeout)
        rest: list[str] = []
        while (line := self._lines.get(timeout=timeout)) is not None:
            rest.append(line)
        return Stopped(rc, "\n".join([*self._seen, *rest]), "".join(self._err))

    def kill(self) -> None:
        """For a test that failed halfway: never leave the demo running."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=30)
