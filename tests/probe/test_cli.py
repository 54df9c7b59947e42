"""The probe as users run it: the installed command in a process of its own (exit codes, one line and no traceback on
stderr, nothing secret anywhere it writes), and the parts of a run that span targets."""

from __future__ import annotations

import socket
from pathlib import Path

from otelstream import names
from otelstream.probe.requests import PROMPT
from tests.probe import faults as F
from tests.probe.conftest import http_url, probe_cli, run_probe
from tests.support.scripted_server import ScriptedServer

KEY = "sk-probe-sentinel-KEY-81f3c2"
HEADER_VALUE = "hdr-probe-sentinel-57ab90"
OUTPUT_PARTS = (F.SENTINEL_OUTPUT[:9], F.SENTINEL_OUTPUT[9:])  # the answer arrives in two deltas


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: a connection to it is refused


def _one_line_no_traceback(err: str) -> None:
    assert err.count("\n") == 1 and err.startswith("otelstream probe: "), err
    assert "Traceback" not in err


def test_bad_arguments_exit_2_with_one_line(tmp_path: Path) -> None:
    for argv in (
        ["--base-url", "http://127.0.0.1:9/v1", "--surface", "chat", "--model", "m"],
        ["--config", str(tmp_path / "missing.toml")],
        ["--base-url", "http://127.0.0.1:9/v1", "--surface", "responses", "--model", "m", "--api-key-env", "NOT_SET_X"],
    ):
        run = probe_cli(*argv)
        assert run.rc == 2 and run.out == "", run
        _one_line_no_traceback(run.err)


def test_an_unreachable_target_exits_2_with_one_line() -> None:
    port = _closed_port()
    run = probe_cli("--base-url", f"http://127.0.0.1:{port}/v1", "--surface", "chat_completions", "--model", "m",
                    "--requests", "3")  # fmt: skip
    assert run.rc == 2 and run.out == "", run
    _one_line_no_traceback(run.err)
    assert f"(http://127.0.0.1:{port}/v1) cannot be reached: Connection refused" in run.err


def test_one_unreachable_target_among_others(scripted: ScriptedServer, tmp_path: Path) -> None:
    """The reachable targets are reported; the unreachable one is one line; exit 2. After the first refused
    connection the unreachable target's other requests are not sent."""
    key = scripted.add(F.http_script(names.CHAT_COMPLETIONS, F.OK).steps)
    config = tmp_path / "p.toml"
    config.write_text(f"""
[[target]]
name = "up"
base_url = "{http_url(scripted, names.CHAT_COMPLETIONS, key)}"
surface = "chat_completions"
model = "m"
requests = 2

[[target]]
name = "down"
base_url = "http://127.0.0.1:{_closed_port()}/v1"
surface = "responses"
model = "m"
requests = 4
""")
    run = run_probe("--config", str(config), "--json")
    assert run.rc == 2
    data = run.json()
    assert [t["name"] for t in data["targets"]] == ["up"] and data["ok"] is True
    assert [r["outcome"] for r in data["targets"][0]["rows"]] == [names.COMPLETED] * 2
    assert run.err.count("\n") == 1 and "target 'down'" in run.err and "Connection refused" in run.err


def test_headers_and_key_reach_the_server_and_nothing_secret_is_written(scripted: ScriptedServer,
                                                                        tmp_path: Path) -> None:  # fmt: skip
    """A sentinel key and header value, the built-in prompt and the answer's text appear nowhere the probe writes:
    stdout, stderr, the spans and metrics the OTel environment exports (console exporters here), the SDKs' own logs
    asked for at DEBUG. The key and header did reach the server, and the spans and metrics were exported."""
    chat = scripted.add(F.http_script(names.CHAT_COMPLETIONS, F.OK).steps)
    claude = scripted.add(F.http_script(names.MESSAGES, F.OK).steps)
    config = tmp_path / "p.toml"
    config.write_text(f"""
[[target]]
name = "chat"
base_url = "{http_url(scripted, names.CHAT_COMPLETIONS, chat)}"
surface = "chat_completions"
model = "m"
api_key_env = "PROBE_SENTINEL_KEY"
requests = 2
[target.headers_env]
X-Probe-Secret = "PROBE_SENTINEL_HDR"

[[target]]
name = "claude"
base_url = "{http_url(scripted, names.MESSAGES, claude)}"
surface = "messages"
model = "m"
api_key_env = "PROBE_SENTINEL_KEY"
headers_env = {{ X-Probe-Secret = "PROBE_SENTINEL_HDR" }}
""")
    env = {
        "PROBE_SENTINEL_KEY": KEY, "PROBE_SENTINEL_HDR": HEADER_VALUE,
        "OPENAI_LOG": "debug", "ANTHROPIC_LOG": "debug",
        "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console", "OTEL_METRIC_EXPORT_INTERVAL": "100",
    }  # fmt: skip
    run = probe_cli("--config", str(config), "--strict", env=env)
    assert run.rc == 0, run.err
    written = run.out + run.err
    for secret in (KEY, HEADER_VALUE, PROMPT, *OUTPUT_PARTS):
        assert secret not in written, secret
    assert '"otelstream.outcome": "completed"' in written  # the spans were exported
    assert "otelstream.streams" in written and '"probe_name": "claude"' in written  # and the metrics
    sent = scripted.headers(chat) + scripted.headers(claude)
    assert len(sent) == 2 + 5  # each request, once (the warm-up never opens a socket)
    assert all(h["x-probe-secret"] == HEADER_VALUE for h in sent)
    # the key as each SDK sends it (Authorization: Bearer, or anthropic's x-api-key in older releases)
    assert all(f"Bearer {KEY}" in (h.get("authorization"), h.get("x-api-key")) or h.get("x-api-key") == KEY
               for h in sent)  # fmt: skip


def test_text_output_says_each_rule_in_words(scripted: ScriptedServer) -> None:
    url = http_url(scripted, names.CHAT_COMPLETIONS, scripted.add(F.http_script(names.CHAT_COMPLETIONS,
                                                                                F.MISSING_DONE).steps))  # fmt: skip
    run = run_probe("--base-url", url, "--surface", "chat_completions", "--model", "m", "--requests", "2", "--name",
                    "gw")  # fmt: skip
    assert run.rc == 0  # not strict
    lines = run.out.splitlines()
    assert lines[0] == f"target gw: chat_completions, model m, {url}"
    assert lines[1].split()[:3] == ["#", "outcome", "class"]
    assert [line.split()[:2] for line in lines[2:4]] == [["1", "completed"], ["2", "completed"]]
    assert all("missing_done" in line and "req_scripted" in line for line in lines[2:4])
    assert lines[4].startswith("summary: 2 requests: completed 2; TTFD p50 ")
    assert lines[5:] == ["verdict: FAIL",
                         "  fail  missing_done (2 requests): no [DONE]: the answer ended without `data: [DONE]`"]


def test_a_flag_the_probe_does_not_know_is_the_probe_s_own_one_line_error() -> None:
    """argparse hands flags no subparser took to the top-level parser, whose usage names the subcommands, not the
    probe's flags: the probe's own refusal says it instead, in its one line."""
    run = probe_cli("--base-url", "http://127.0.0.1:9/v1", "--surface", "chat_completions", "--model", "m",
                    "--reqests", "3")  # fmt: skip
    assert run.rc == 2 and run.out == "", run
    _one_line_no_traceback(run.err)
    assert "unrecognized arguments: --reqests 3" in run.err and "otelstream probe --help" in run.err
    assert "{check,demo,dashboards,doctor,probe}" not in run.err
