"""Multiprocess servers as SREs run them (issue 18): a real gunicorn with uvicorn workers and a real
``uvicorn --workers``, a Starlette app with ``import otelstream.auto`` streaming through the real openai SDK against
a local scripted server that holds streams open and stalls.

SIGKILL a worker holding open stalled streams: within 30 s one scrape shows ``otelstream_streams_active`` and
``_stalled`` without it, and the counters of finished streams are intact. Then the whole server is killed and
started again on the same ``PROMETHEUS_MULTIPROC_DIR``: its first scrape shows no stale gauge.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.paths import REPO
from tests.support.scripted_server import Pause, ScriptedServer

pytestmark = pytest.mark.slow
pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

APP = textwrap.dedent(
    """
    import os
    import otelstream.auto  # first, as the README says
    import openai
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    client = openai.AsyncOpenAI(base_url=os.environ["SCRIPTED_URL"] + "/v1", api_key="sk-test", max_retries=0)
    HOLDING = os.environ["HOLDING_DIR"]

    async def stream(request):
        s = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True,
            extra_headers={"x-script": request.query_params["script"]})
        n = 0
        async for chunk in s:
            n += 1
            if n == 1 and request.query_params.get("hold"):  # the test learns which worker holds this stream
                open(os.path.join(HOLDING, f"{os.getpid()}-{request.query_params['hold']}"), "w").close()
        return PlainTextResponse(str(n))

    app = Starlette(routes=[Route("/stream", stream)])
    """
)


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
    return b"data: " + json.dumps(body).encode() + b"\n\n"


COMPLETE = [_chunk({"role": "assistant", "content": "Hi"}), _chunk({}, "stop"), b"data: [DONE]\n\n"]
HOLD = [_chunk({"role": "assistant", "content": "Hi"}), Pause(90.0)]  # open and stalled until the worker dies


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> dict[tuple[str, str], float] | None:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return None
    out: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in ("otelstream_streams_active", "otelstream_streams_stalled", "otelstream_streams_total"):
                key = (s.name, s.labels.get("outcome", ""))
                out[key] = out.get(key, 0.0) + s.value
    return out


def _wait_for(port: int, ok: object, timeout: float) -> dict[tuple[str, str], float]:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = _scrape(port)
        if last is not None and ok(last):  # type: ignore[operator]
            return last
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout} s; last scrape: {last}")


def _command(kind: str, app_port: int) -> list[str]:
    bindir = Path(sys.executable).parent
    if kind == "gunicorn":
        return [str(bindir / "gunicorn"), "-w", "4", "-k", "uvicorn_worker.UvicornWorker", "-b",
                f"127.0.0.1:{app_port}", "--graceful-timeout", "1", "app:app"]  # fmt: skip
    return [str(bindir / "uvicorn"), "--workers", "2", "--host", "127.0.0.1", "--port", str(app_port),
            "--timeout-graceful-shutdown", "1", "--log-level", "warning", "app:app"]  # fmt: skip


def _get(url: str, results: list[str]) -> None:
    try:
        results.append(urllib.request.urlopen(url, timeout=120).read().decode())
    except OSError as exc:  # the held streams end with their worker
        results.append(repr(exc))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["gunicorn", "uvicorn"])
def test_a_killed_worker_stops_counting_and_a_restart_starts_clean(
    kind: str, tmp_path: Path, scripted: ScriptedServer
) -> None:
    if shutil.which(_command(kind, 0)[0]) is None:
        pytest.skip(f"{kind} is not installed")
    (tmp_path / "app.py").write_text(APP)
    mp_dir, holding = tmp_path / "prom", tmp_path / "holding"
    mp_dir.mkdir()
    holding.mkdir()
    app_port, metrics_port = _free_port(), _free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
        "PROMETHEUS_MULTIPROC_DIR": str(mp_dir),
        "OTELSTREAM_PROMETHEUS_PORT": str(metrics_port),
        "OTELSTREAM_STALL_THRESHOLD_S": "0.5",
        "OTELSTREAM_HTTP_SPANS": "false",
        "SCRIPTED_URL": scripted.base_url,
        "HOLDING_DIR": str(holding),
    }
    complete, hold = scripted.add(COMPLETE), scripted.add(HOLD)
    base = f"http://127.0.0.1:{app_port}/stream?script="

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(_command(kind, app_port), cwd=tmp_path, env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    def kill_all(proc: subprocess.Popen[bytes]) -> None:
        with __import__("contextlib").suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    server = start()
    threads: list[threading.Thread] = []
    try:
        _wait_for(metrics_port, lambda s: True, 90)  # workers up, /metrics served
        done: list[str] = []
        for _ in range(6):
            deadline = time.monotonic() + 30
            while True:  # the app port may answer a little after /metrics
                before = len(done)
                _get(base + complete, done)
                if done[-1] == "2" or time.monotonic() > deadline:
                    break
                del done[before:]
                time.sleep(0.3)
        assert done == ["2"] * 6, done
        held: list[str] = []
        for i in range(8):
            t = threading.Thread(target=_get, args=(f"{base}{hold}&hold={i}", held), daemon=True)
            t.start()
            threads.append(t)
        deadline = time.monotonic() + 60
        while len(os.listdir(holding)) < 8 and time.monotonic() < deadline:
            time.sleep(0.2)
        by_pid: dict[int, int] = {}
        for name in os.listdir(holding):
            pid = int(name.split("-")[0])
            by_pid[pid] = by_pid.get(pid, 0) + 1
        assert sum(by_pid.values()) == 8, by_pid
        victim, victim_streams = max(by_pid.items(), key=lambda kv: kv[1])
        assert victim_streams >= 2, by_pid
        _wait_for(metrics_port, lambda s: s.get(("otelstream_streams_stalled", "")) == 8
                  and s.get(("otelstream_streams_active", "")) == 8, 30)  # fmt: skip

        os.kill(victim, signal.SIGKILL)
        t_kill = time.monotonic()
        left = 8 - victim_streams
        # (absent = 0: when the victim held all 8, no live process has a gauge value left)
        after = _wait_for(metrics_port, lambda s: s.get(("otelstream_streams_active", ""), 0) == left
                          and s.get(("otelstream_streams_stalled", ""), 0) == left, 30)  # fmt: skip
        assert time.monotonic() - t_kill < 30
        assert after[("otelstream_streams_total", "completed")] == 6  # the dead worker's finished streams too

        kill_all(server)  # a crash of the whole server: every worker's files stay behind
        server = start()
        first = _wait_for(metrics_port, lambda s: True, 90)  # the first scrape the restarted server answers
        assert first.get(("otelstream_streams_active", ""), 0) == 0, first
        assert first.get(("otelstream_streams_stalled", ""), 0) == 0, first
        assert first[("otelstream_streams_total", "completed")] == 6
    finally:
        kill_all(server)
