"""How the runner starts the processes it measures: otelstream from a committed snapshot, the workers' environment,
one worker run (a fresh ``exec``, or a fork of a process that has imported the SDK), and the probe of what an SDK
set can run. Also the runner's log line."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time

from bench import configs
from bench.runner.sdks import SDKS, Sdk, python

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/
ROOT = os.path.dirname(HERE)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


SNAPSHOT: dict[str, str] = {}  # {"dir": …, "commit": …} when otelstream is benchmarked from a committed snapshot


def take_snapshot(rev: str) -> None:
    """Benchmark otelstream as committed at ``rev`` (``git archive``), not the work tree: others edit it live."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", rev], capture_output=True, text=True, check=True)
    d = tempfile.mkdtemp(prefix="otelstream-snapshot-")
    arc = subprocess.run(["git", "-C", ROOT, "archive", rev, "otelstream"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", d], input=arc.stdout, check=True)
    SNAPSHOT.update(dir=d, commit=commit.stdout.strip())
    import atexit

    atexit.register(shutil.rmtree, d, True)


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    first = [SNAPSHOT["dir"]] if SNAPSHOT else []
    env["PYTHONPATH"] = os.pathsep.join([*first, ROOT, env.get("PYTHONPATH", "")])
    env["PYTHONHASHSEED"] = "0"
    # the runtime self-check runs its fault matrix once per instrument() in a background thread: under callgrind its
    # millions of instructions land in whichever phase is open (the paired twin re-instruments per phase); its cost
    # is per process, measured apart by bench/self_check.py
    env["OTELSTREAM_SELF_CHECK"] = "false"
    env.pop("OTEL_PYTHON_TRACER_PROVIDER", None)
    return env


def run_worker(args: list[str], timeout: float = 300, prefix: list[str] | None = None,
               server: ForkServer | None = None, sdk: Sdk | None = None) -> dict:  # fmt: skip
    if server is not None:
        rc, stdout, stderr = server.run(args, timeout)
    else:
        cmd = [*(prefix or []), (sdk or SDKS[0]).python, os.path.join(HERE, "workers", "main.py"), *args]
        p = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(), timeout=timeout, cwd=ROOT)
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if rc != 0 or not lines:
        return {"error": (stderr or stdout).strip().splitlines()[-5:], "rc": rc}
    return json.loads(lines[-1])


# what every worker imports first (the HTTP-level observer's: openai too, whose HTTP library its plain client takes)
PRELOAD = {"openai": ("httpx2", "openai"), "anthropic": ("httpx2", "anthropic"), "http": ("httpx2", "openai"),
           "google": ("httpx2", "google.genai"), "bedrock": ("boto3",)}  # fmt: skip


class ForkServer:
    """``workers/main.py serve``: one process per SDK that has imported ``httpx2`` and the SDK once and forks a fresh
    child per timing run (overhead, TTFD), instead of every worker importing them again (see ``worker.serve``)."""

    def __init__(self, lib: str) -> None:
        self.p = subprocess.Popen([python(), os.path.join(HERE, "workers", "main.py"), "serve", *PRELOAD[lib]],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=worker_env(),
                                  cwd=ROOT)  # fmt: skip
        if self.p.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError(f"fork server for {lib} did not start")

    def run(self, args: list[str], timeout: float) -> tuple[int, str, str]:
        with tempfile.TemporaryDirectory(prefix="otelstream-fork-") as d:
            out, err = os.path.join(d, "out"), os.path.join(d, "err")
            try:
                self.p.stdin.write(json.dumps({"argv": args, "stdout": out, "stderr": err, "timeout": timeout}) + "\n")
                self.p.stdin.flush()
                reply = self.p.stdout.readline()
            except OSError as exc:
                reply, why = "", repr(exc)
            else:
                why = "fork server exited"
            if not reply:
                return 1, "", why
            texts = []
            for path in (out, err):
                try:
                    with open(path) as f:
                        texts.append(f.read())
                except OSError:
                    texts.append("")
            return json.loads(reply)["rc"], texts[0], texts[1]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.p.stdin.close()
            self.p.wait(timeout=10)
        if self.p.poll() is None:
            self.p.kill()


class ForkServers:
    """The fork servers of one timing stage, by SDK (``--no-fork-server``: every run a fresh ``exec``)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.servers: dict[str, ForkServer | None] = {}

    def for_surface(self, surface: str) -> ForkServer | None:
        if not self.enabled:
            return None
        lib = configs.lib_of(surface)
        if lib not in self.servers:
            try:
                self.servers[lib] = ForkServer(lib)
            except Exception as exc:  # fall back to fresh processes
                log(f"fork server for {lib}: {exc}; starting workers from scratch")
                self.servers[lib] = None
        return self.servers[lib]

    def __enter__(self) -> ForkServers:
        return self

    def __exit__(self, *exc) -> None:
        for srv in self.servers.values():
            if srv is not None:
                srv.close()


def probe_availability(py: str) -> dict:
    code = (
        f"import json,sys; sys.path.insert(0, {ROOT!r}); from bench import configs, canned; "
        "print(json.dumps({f'{c}|{s}': configs.available(c, s) for c in configs.ALL for s in canned.SURFACES}))"
    )
    p = subprocess.run([py, "-c", code], capture_output=True, text=True, env=worker_env())
    if p.returncode != 0:
        raise SystemExit(f"{py}: cannot probe the configurations: {p.stderr.strip()[-500:]}")
    raw = json.loads(p.stdout.strip().splitlines()[-1])
    return {tuple(k.split("|")): v for k, v in raw.items()}

