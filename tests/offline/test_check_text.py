"""``otelstream check`` text mode under a strict UTF-8 stdout (issue 21, defect 6): lone surrogates in a stream
(finish reasons, WebSocket response ids), controls and bidi overrides, and non-UTF-8 file names are shown escaped,
never as a traceback. The fuzz corpus is seeded mutants of the real captures in ``../shared/captures``."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from otelstream import offline

STRICT_ENV = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "PYTHONWARNINGS": "ignore"}
ERROR_PREFIX = "otelstream check: "
EXIT_CODES = {0, 1, 2}
# JSON string escapes a mutant inserts right after the opening quote of a string value
ESCAPES = [b"\\udce9", b"\\ud800", b"\\udfff", b"\\u202e", b"\\u0000", b"\\u001b[2J", b"\\n", b"\\u2028", b"\\u0085"]
# bytes a mutant's file name carries, and how check must show them
NAME_TAGS = [(b"\xe9", "\\xe9"), (b"\n", "\\x0a"), (b"\x1b", "\\x1b"), (b"\xe2\x80\xae", "\\u202e"), (b"", "")]
_STRING_VALUE = re.compile(rb'":\s*"')
# string values the text output shows (finish reasons, error codes, WebSocket response ids and lanes)
_SHOWN_VALUE = re.compile(rb'"(?:finish_reason|stop_reason|code|stream_id)":\s*"')
_SHOWN_WS_VALUE = re.compile(rb'"(?:id|stream_id|code)":\s*"')


def check(*args: bytes | str, timeout: float = 120) -> tuple[int, str, str]:
    """Run ``otelstream check`` in a subprocess with a strict UTF-8 stdout; the output decoded strictly too."""
    proc = subprocess.run(
        [sys.executable, "-m", "otelstream.cli", "check", *args],
        capture_output=True, env=STRICT_ENV, timeout=timeout, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")


def _sse(*events: dict[str, object]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def test_surrogate_finish_reason_is_shown_escaped(tmp_path: Path) -> None:
    path = tmp_path / "chat.sse"
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    path.write_bytes(_sse(
        {**chunk, "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop\udce9\u202e"}]},
    ))  # fmt: skip
    code, out, err = check(str(path))
    assert (code, err) == (0, "")
    rest = "events=2 deltas=1  finish=stop\\udce9\\u202e  [DONE]  anomalies: usage_missing"
    assert out == f"{path}: completed  chat_completions  {rest}\n"


def test_websocket_response_id_and_lane_are_shown_escaped(tmp_path: Path) -> None:
    path = tmp_path / "ws.jsonl"
    rid, lane = "resp_\udce9", "lane\n1"
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": rid, "status": "in_progress"}},
        {"type": "response.output_text.delta", "sequence_number": 1, "delta": "hi"},
        {"type": "response.completed", "sequence_number": 2, "response": {"id": rid, "status": "completed"}},
    ]
    path.write_text("".join(json.dumps({**e, "stream_id": lane}) + "\n" for e in events))
    code, out, err = check(str(path))
    assert (code, err) == (0, ""), err
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert lines[1].startswith("  [lane\\x0a1] resp_\\udce9: completed"), lines[1]


def test_non_utf8_file_names(tmp_path: Path) -> None:
    good = os.fsencode(tmp_path) + b"/bad\xe9name.sse"
    with open(good, "wb") as f:
        f.write(_sse({"id": "c", "object": "chat.completion.chunk",
                      "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}))  # fmt: skip
    missing = os.fsencode(tmp_path) + b"/missing\xff\n.sse"
    code, out, err = check(good, missing)
    assert code == 2
    assert out.startswith(f"{tmp_path}/bad\\xe9name.sse: completed  chat_completions"), out
    assert err == f"otelstream check: {tmp_path}/missing\\xff\\x0a.sse: no such file\n"


@given(st.text())
def test_shown_is_printable_encodable_and_idempotent(text: str) -> None:
    out = offline.shown(text)
    out.encode("utf-8")
    assert out.isprintable()
    assert offline.shown(out) == out
    if text.isprintable():
        assert out == text


def test_shown_path_shows_undecodable_bytes_as_bytes() -> None:
    assert offline.shown_path(os.fsdecode(b"a\xe9\x00b")) == "a\\xe9\\x00b"
    assert offline.shown_path("lone\ud800") == "lone\\ud800"  # stands for no byte: shown as the code point


# --- the fuzz corpus -----------------------------------------------------------------------------------------
def _suffix(name: str) -> str:
    return ".payloads.jsonl" if name.endswith(".payloads.jsonl") else Path(name).suffix


def _escape_in_string(body: bytes, rng: random.Random, where: re.Pattern[bytes] = _STRING_VALUE) -> tuple[str, bytes]:
    spots = [m.end() for m in where.finditer(body)] or [m.end() for m in _STRING_VALUE.finditer(body)]
    if not spots:
        return "noescape", body
    at = rng.choice(spots)
    escape = rng.choice(ESCAPES)
    return f"esc{at}", body[:at] + escape + body[at:]


def _mutants(body: bytes, rng: random.Random) -> list[tuple[str, bytes]]:
    """Five seeded mutants: an escape in a JSON string and one in a string the text output shows, a byte flip, a
    truncation, an escape then a truncation."""
    shown_values = _SHOWN_WS_VALUE if body.lstrip().startswith(b"{") else _SHOWN_VALUE
    out = [_escape_in_string(body, rng), _escape_in_string(body, rng, shown_values)]
    b = bytearray(body)
    pos = rng.randrange(len(b))
    b[pos] ^= 1 << rng.randrange(8)
    out.append((f"flip{pos}", bytes(b)))
    cut = rng.randrange(1, len(body))
    out.append((f"cut{cut}", body[:cut]))
    what, escaped = _escape_in_string(body, rng)
    cut = rng.randrange(len(escaped) // 2, len(escaped))
    out.append((f"{what}cut{cut}", escaped[:cut]))
    return out


def _named(line: str, names: set[str]) -> str:
    found = [n for n in names if line.startswith(n + ": ")]
    assert len(found) == 1, f"a line for no file (or several): {line!r}"
    return found[0]


def test_text_mode_never_raises_on_mutated_captures(captures_dir: Path, tmp_path: Path) -> None:
    sources = sorted(p for p in captures_dir.rglob("*") if p.is_file() and p.name.endswith((".sse", ".jsonl")))
    assert sources
    rng = random.Random(21)
    files: list[tuple[bytes, str]] = []  # (path as passed, how check must show it)
    for src in sources:
        for what, mutant in _mutants(src.read_bytes(), rng):
            tag, disp = NAME_TAGS[len(files) % len(NAME_TAGS)]
            stem = f"{len(files):04d}-{src.parent.name}-{src.name.split('.')[0]}-{what}"
            name = stem.encode() + tag + _suffix(src.name).encode()
            path = os.fsencode(tmp_path) + b"/" + name
            with open(path, "wb") as f:
                f.write(mutant)
            files.append((path, f"{tmp_path}/{stem}{disp}{_suffix(src.name)}"))
    assert len(files) >= 250

    seen: dict[str, str] = {}  # shown name -> outcome, or "error: reason"
    escaped_content = 0  # report lines with an escape after the file name: the stream's own strings needed one
    for start in range(0, len(files), 100):
        batch = files[start : start + 100]
        code, out, err = check("--strict", *(p for p, _ in batch))
        assert "Traceback" not in err and "Traceback" not in out, err
        assert code in EXIT_CODES
        expected = {disp for _, disp in batch}
        errors = {}
        for line in err.splitlines():
            assert line.startswith(ERROR_PREFIX), f"not a one-line error: {line!r}"
            name = _named(line[len(ERROR_PREFIX) :], expected)
            errors[name] = line[len(ERROR_PREFIX) + len(name) + 2 :]
            assert errors[name], line
        outcomes = {}
        for line in out.splitlines():
            if line.startswith("  "):
                continue  # a transcript's response line
            name = _named(line, expected)
            outcomes[name] = line[len(name) + 2 :].split()[0]
            escaped_content += "\\u" in line[len(name) :] or "\\x" in line[len(name) :]
        assert set(errors) | set(outcomes) == expected
        assert not set(errors) & set(outcomes)
        assert code == (2 if errors else 1 if any(o != "completed" for o in outcomes.values()) else 0)
        seen.update(outcomes)
        seen.update((k, "error: " + v) for k, v in errors.items())
    assert len(seen) == len(files)
    # the corpus exercises both kinds of result, and escapes reached the text output
    assert any(v.startswith("error: ") for v in seen.values())
    assert escaped_content >= 20, escaped_content
    assert sum(v == "completed" for v in seen.values()) >= 50
