"""``--every --serve``: the synthetic monitor against two targets, one healthy and one that cuts every answer. Its
``/metrics`` counts each target's streams by ``probe_name`` with their outcomes, no content reaches it, and SIGTERM
ends it with exit 0 after the round in flight."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from otelstream import names
from tests.probe import faults as F
from tests.probe.conftest import http_url
from tests.support.scripted_server import Pause, ScriptedServer


def _streams(metrics: str, probe: str, outcome: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith("otelstream_streams_total{") and f'probe_name="{probe}"' in line \
                and f'outcome="{outcome}"' in line:  # fmt: skip
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_the_monitor_serves_metrics_by_probe_name_and_stops_on_sigterm(scripted: ScriptedServer,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    healthy = scripted.add(F.http_script(names.CHAT_COMPLETIONS, F.OK).steps)
    cutting = scripted.add(F.http_script(names.RESPONSES, F.CUT).steps)
    config = tmp_path / "probes.toml"
    config.write_text(f"""
[[target]]
name = "healthy"
base_url = "{http_url(scripted, names.CHAT_COMPLETIONS, healthy)}"
surface = "chat_completions"
model = "m"
requests = 2

[[target]]
name = "cutting"
base_url = "{http_url(scripted, names.RESPONSES, cutting)}"
surface = "responses"
model = "m"
requests = 2
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELSTREAM_"))}
    env["OTELSTREAM_SELF_CHECK"] = "false"
    proc = subprocess.Popen([sys.executable, "-m", "otelstream.cli", "probe", "--config", str(config), "--every", "1",
                             "--serve", "0", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        assert proc.stderr is not None
        started = proc.stderr.readline()
        found = re.search(r"metrics on (http://\S+/metrics)", started)
        assert found, started
        deadline = time.monotonic() + 30
        metrics = ""
        while time.monotonic() < deadline:
            with urllib.request.urlopen(found.group(1), timeout=5) as response:
                metrics = response.read().decode()
            if _streams(metrics, "healthy", names.COMPLETED) >= 4 and _streams(metrics, "cutting", names.CUT) >= 4:
                break  # two rounds each
            time.sleep(0.2)
        else:
            raise AssertionError(metrics)
        assert _streams(metrics, "healthy", names.CUT) == 0 and _streams(metrics, "cutting", names.COMPLETED) == 0
        assert 'gen_ai_client_operation_time_to_first_chunk_seconds_count{' in metrics  # the usual families
        assert re.search(r'otelstream_streams_total\{[^}]*error_type="cut"[^}]*probe_name="cutting"', metrics)
        for secret in (F.SENTINEL_OUTPUT[:9], F.SENTINEL_OUTPUT[9:]):
            assert secret not in metrics
        stopped = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert time.monotonic() - stopped < 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "SIGTERM: stopping after the rounds in flight" in err and "Traceback" not in err
    rounds = [json.loads(line) for line in out.splitlines()]
    by_name = {name: [r for r in rounds if r["name"] == name] for name in ("healthy", "cutting")}
    assert len(by_name["healthy"]) >= 2 and len(by_name["cutting"]) >= 2
    assert [r["round"] for r in by_name["healthy"]] == list(range(1, len(by_name["healthy"]) + 1))
    assert all(r["verdict"]["ok"] for r in by_name["healthy"])
    assert all(not r["verdict"]["ok"] and r["summary"]["outcomes"] == {names.CUT: 2} for r in by_name["cutting"])


def test_sigterm_lets_the_round_in_flight_finish(scripted: ScriptedServer) -> None:
    """SIGTERM while a request waits 1.5 s for its first delta: that round is reported whole, then exit 0."""
    frames = F.http_script(names.CHAT_COMPLETIONS, F.OK).steps
    key = scripted.add([frames[0], Pause(1.5), *frames[1:]])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELSTREAM_"))}
    env["OTELSTREAM_SELF_CHECK"] = "false"
    proc = subprocess.Popen([sys.executable, "-m", "otelstream.cli", "probe", "--base-url",
                             http_url(scripted, names.CHAT_COMPLETIONS, key), "--surface", "chat_completions",
                             "--model", "m", "--requests", "1", "--every", "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert proc.stderr is not None and "monitoring" in proc.stderr.readline()
        time.sleep(0.5)  # the round's request is waiting on the server now
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    (line,) = out.splitlines()
    assert "round 1" in line and "completed 1" in line and line.endswith("; conforms"), line
