"""The probe's tests: its command run in this process (``run_probe``) or as the installed command (``probe_cli``),
against the scripted servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from otelstream import cli, names
from tests.probe import faults as F
from tests.support.scripted_server import ScriptedServer

pytest.importorskip("openai")
pytest.importorskip("anthropic")


@dataclass(frozen=True)
class Run:
    rc: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.out)
        return data


def run_probe(*argv: str) -> Run:
    """``otelstream probe ARGV`` in this process (it instruments and uninstruments around its run)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(["probe", *argv])
        except SystemExit as exc:  # argparse's refusals
            rc = int(exc.code or 0)
    return Run(rc, out.getvalue(), err.getvalue())


def probe_cli(*argv: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> Run:
    """The installed ``otelstream probe`` in a process of its own, with ``env`` added to a clean environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELSTREAM_", "OPENAI_", "ANTHROPIC_"))}
    base["OTELSTREAM_SELF_CHECK"] = "false"
    done = subprocess.run([sys.executable, "-m", "otelstream.cli", "probe", *argv], capture_output=True, text=True,
                          timeout=timeout, env={**base, **(env or {})})  # fmt: skip
    return Run(done.returncode, done.stdout, done.stderr)


def http_url(server: ScriptedServer, surface: str, key: str) -> str:
    """The base URL the SDK takes for the script ``key`` (openai appends /responses, anthropic /v1/messages)."""
    return server.url_for(key) + ("" if surface == names.MESSAGES else "/v1")


@pytest.fixture(scope="session")
def ws_scripted() -> Iterator[Any]:
    pytest.importorskip("websockets")
    from tests.probe.ws_scripted import WsScriptedServer

    server = WsScriptedServer().start()
    try:
        yield server
    finally:
        server.close()


def target_url(surface: str, fault: str, scripted: ScriptedServer, ws_scripted: Any) -> str:
    if surface == names.RESPONSES_WEBSOCKET:
        steps, status = F.ws_script(fault)
        return str(ws_scripted.url_for(ws_scripted.add(steps, status=status)))
    script = F.http_script(surface, fault)
    return http_url(scripted, surface, scripted.add(script.steps, status=script.status, headers=script.headers))
