"""The probe's targets: a TOML file read into targets, and every mistake one line naming the file, the line and the
key; the flags and their conflicts the same way (exit 2, no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from otelstream import names
from otelstream.probe import config as C
from otelstream.probe.config import ProbeError, Target
from tests.probe.conftest import run_probe

GOOD = """\
# two targets
[[target]]
name = "gateway-chat"
base_url = "https://gateway.example/v1"
surface = "chat_completions"
model = "gpt-4o-mini"
api_key_env = "GATEWAY_KEY"
requests = 3
every = 60

[target.headers_env]
X-Team = "GATEWAY_TEAM"

[[target]]
name = "claude"
base_url = "https://api.anthropic.com"
surface = "messages"
model = "claude-sonnet-4-5"
max_output_tokens = 64
"""


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "probes.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_good_file(tmp_path: Path) -> None:
    targets = C.load_file(_write(tmp_path, GOOD), {"requests": 2})
    assert targets == [
        Target("gateway-chat", "https://gateway.example/v1", names.CHAT_COMPLETIONS, "gpt-4o-mini", "GATEWAY_KEY",
               (("X-Team", "GATEWAY_TEAM"),), C.DEFAULT_MAX_OUTPUT_TOKENS, 3, 60.0),
        Target("claude", "https://api.anthropic.com", names.MESSAGES, "claude-sonnet-4-5", max_output_tokens=64,
               requests=2),  # the flag's --requests where the file says nothing
    ]  # fmt: skip


def _bad(text: str, line: int, *said: str) -> tuple[str, int, tuple[str, ...]]:
    return text, line, said


_HEAD = '[[target]]\nname = "a"\nbase_url = "http://h/v1"\nsurface = "responses"\nmodel = "m"\n'
BAD = [
    _bad(_HEAD + "request = 3\n", 6, "'request'", "unknown key"),
    _bad(_HEAD + 'requests = "3"\n', 6, "'requests'", "whole number"),
    _bad(_HEAD + "requests = 1000\n", 6, "'requests'", "from 1 to 100"),
    _bad(_HEAD + "max_output_tokens = true\n", 6, "'max_output_tokens'"),
    _bad(_HEAD + "every = 0.5\n", 6, "'every'", "at least 1"),
    _bad(_HEAD + 'api_key_env = "sk-not-a-variable name"\n', 6, "'api_key_env'", "environment variable"),
    _bad(_HEAD + '[target.headers_env]\n"bad header" = "V"\n', 6, "'headers_env'", "not an HTTP header"),
    _bad(_HEAD + "[target.headers_env]\nX-A = 3\n", 6, "'headers_env'", "X-A"),
    _bad(_HEAD.replace('"responses"', '"chat"'), 4, "'surface'", "chat_completions"),
    _bad(_HEAD.replace('"http://h/v1"', '"ftp://h"'), 3, "'base_url'", "http"),
    _bad(_HEAD.replace('model = "m"\n', ""), 1, "missing key 'model'"),
    _bad(_HEAD + "\n" + _HEAD, 8, "'name'", "names two targets"),
    _bad('[[target]]\nname = "a"\nbase_url = \n', 3, "invalid TOML"),
    _bad('timeout = 3\n' + _HEAD, 1, "unknown key 'timeout'"),
    _bad("# nothing\n", 0, "no [[target]]"),
]


@pytest.mark.parametrize(("text", "line", "said"), BAD, ids=[b[2][0] + str(i) for i, b in enumerate(BAD)])
def test_a_bad_file_is_one_error_naming_the_line_and_key(tmp_path: Path, text: str, line: int,
                                                         said: tuple[str, ...]) -> None:  # fmt: skip
    path = _write(tmp_path, text)
    with pytest.raises(ProbeError) as caught:
        C.load_file(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{line}:" if line else f"{path}:"), message
    if "invalid TOML" in said:
        assert f"line {line}" in message
    for part in said:
        assert part in message, message


def test_the_command_refuses_a_bad_file_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, _HEAD + "requests = 0\n")
    run = run_probe("--config", path)
    assert run.rc == 2 and run.out == ""
    assert run.err == f"otelstream probe: {path}:6: target[0] key 'requests': a whole number from 1 to 100 is needed\n"


@pytest.mark.parametrize(("argv", "said"), [
    (["--surface", "chat"], "argument --surface: invalid choice"),
    (["--requests", "0"], "argument --requests"),
    (["--timeout", "0"], "argument --timeout"),
    (["--every", "0.1", "--config", "x.toml"], "argument --every"),
    ([], "give --config FILE, or --base-url, --surface and --model"),
    (["--base-url", "http://h/v1", "--surface", "responses"], "missing --model"),
    (["--base-url", "h/v1", "--surface", "responses", "--model", "m"], "--base-url: an absolute"),
    (["--config", "x.toml", "--model", "m"], "--model: one target's flags, not with --config"),
    (["--base-url", "http://h/v1", "--surface", "responses", "--model", "m", "--serve", "9465"], "--serve needs"),
    (["--base-url", "http://h/v1", "--surface", "responses", "--model", "m", "--every", "5", "--strict"],
     "--strict judges a single run"),
    (["--base-url", "http://h/v1", "--surface", "responses", "--model", "m", "--api-key-env", "PROBE_NO_SUCH_VAR"],
     "api_key_env PROBE_NO_SUCH_VAR is not set"),
])  # fmt: skip
def test_bad_arguments_exit_2_in_one_line(argv: list[str], said: str) -> None:
    run = run_probe(*argv)
    assert run.rc == 2, run
    assert run.out == "" and run.err.count("\n") == 1 and said in run.err, run.err
    assert run.err.startswith("otelstream probe: ")


def test_a_target_without_an_interval_in_a_monitor(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("every = 60\n", "") + "every = 5\n")  # only the second target has one
    run = run_probe("--config", path, "--serve", "0")
    assert run.rc == 2 and "target 'gateway-chat' has no every" in run.err


def test_a_header_variable_that_is_not_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_KEY", "k")
    monkeypatch.delenv("GATEWAY_TEAM", raising=False)
    run = run_probe("--config", _write(tmp_path, GOOD), "--every", "60")  # said before the monitor starts
    assert run.rc == 2
    said = "target 'gateway-chat': headers_env X-Team names GATEWAY_TEAM, which is not set"
    assert run.err == f"otelstream probe: {said}\n"


def test_secrets_never_show_in_their_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_T_KEY", "sk-sentinel-repr")
    monkeypatch.setenv("PROBE_T_HDR", "hdr-sentinel-repr")
    target = Target("t", "http://h/v1", names.RESPONSES, "m", "PROBE_T_KEY", (("X-H", "PROBE_T_HDR"),))
    secrets = C.secrets(target)
    assert secrets.api_key == "sk-sentinel-repr" and secrets.headers == {"X-H": "hdr-sentinel-repr"}
    assert "sentinel" not in repr(secrets) and "sentinel" not in str(secrets)


def test_the_shown_url_drops_credentials_query_and_fragment() -> None:
    assert C.shown_url("https://user:sk-pass@gw.example:8443/v1?key=sk-q#frag") == "https://gw.example:8443/v1"
