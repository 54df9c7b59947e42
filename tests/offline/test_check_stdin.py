"""``otelstream check -`` reads the body from standard input (it once took ``-`` for a file name)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import FIXTURES


def _check(*args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "otelstream.cli", "check", *args], input=stdin, capture_output=True,
                          timeout=60)  # fmt: skip


def test_check_dash_reads_stdin_as_the_file_does() -> None:
    body = (FIXTURES / "chat-cut.sse").read_bytes()
    from_file = json.loads(_check("--json", str(FIXTURES / "chat-cut.sse"), stdin=b"").stdout)
    done = _check("--json", "--strict", "-", stdin=body)
    assert done.returncode == 1, done.stderr  # cut: --strict says so
    from_stdin = json.loads(done.stdout)
    assert from_stdin.pop("file") == "-"
    from_file.pop("file")
    assert from_stdin == from_file


def test_check_dash_refuses_what_is_not_a_stream() -> None:
    done = _check("-", stdin=b'{"id": "chatcmpl-1", "choices": []}')
    assert done.returncode == 2
    assert b"-: a JSON document, not an SSE stream body" in done.stderr
