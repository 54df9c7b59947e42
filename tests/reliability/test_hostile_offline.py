"""Hostile bodies through the offline path (``otelstream check``): every truncation, byte-level mutants, random
bytes, invalid UTF-8, a 10 MB event, 100 000 tiny events, deep nesting, absurd numbers.

For every input ``analyse()`` either returns reports that honour the rules (an outcome an offline analysis can give,
bounded fields) or raises ``CheckError`` with a one-line reason; nothing else escapes, and memory stays bounded.
Bodies come from the real captures in ``../shared/captures`` (when present), the project's fixtures and the bundled
examples.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from otelstream import names
from otelstream.offline import MAX_OPEN_LANES, MAX_REPORTED_LANE_RESPONSES, CheckError, FileReport, analyse
from tests.reliability.harness import (
    CAPTURES,
    FIGURES,
    assert_valid_report,
    corpus_files,
    cut_points,
    label,
    mutations,
    scaled,
)

FILES = corpus_files()
MiB = 1024 * 1024


class _Writer:
    """Writes each input to the same temporary file (with the suffix that selects the reader) and analyses it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp

    def analyse(self, data: bytes, suffix: str = ".sse") -> FileReport | CheckError:
        path = self.tmp / f"body{suffix}"
        path.write_bytes(data)
        FIGURES["offline inputs analysed"] += 1
        FIGURES["offline bytes analysed"] += len(data)
        try:
            report = analyse(str(path))
        except CheckError as exc:
            text = str(exc)
            assert text and "\n" not in text and "Traceback" not in text, text
            return exc
        assert report.reports, "a FileReport always carries at least one report"
        for r in report.reports:
            assert_valid_report(r, offline=True)
        assert report.outcome in names.OUTCOMES
        return report


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[_Writer]:
    # Rewriting one file thousands of times costs ~2 ms per write on a disk-backed /tmp (the truncate forces a
    # flush); tmpfs makes it ~30 µs. The analysis reads the file either way.
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        with tempfile.TemporaryDirectory(dir=shm, prefix="otelstream-rel-") as d:
            yield _Writer(Path(d))
    else:
        yield _Writer(tmp_path)


def _suffix(path: Path) -> str:
    return ".payloads.jsonl" if path.name.endswith(".payloads.jsonl") else path.suffix


def _events(result: FileReport | CheckError) -> int | None:
    return None if isinstance(result, CheckError) else sum(r.events for r in result.reports)


def test_corpus_present() -> None:
    if not CAPTURES.is_dir():
        pytest.skip(f"real captures not found at {CAPTURES} (expected beside the repo in ../shared/captures)")
    assert len([p for p in FILES if CAPTURES in p.parents]) >= 50


@pytest.mark.parametrize("path", FILES, ids=label)
def test_every_truncation(path: Path, writer: _Writer) -> None:
    """Truncation at every byte (≤ 4 KB), else at every event boundary ± 3 bytes plus 200 seeded cuts.

    Nothing lost: a longer prefix never reports fewer events, and no prefix reports more than the whole body."""
    body = path.read_bytes()
    suffix = _suffix(path)
    full = _events(writer.analyse(body, suffix))
    last = 0
    for cut in cut_points(body, suffix.endswith(".jsonl"), seed=len(body)):
        n = _events(writer.analyse(body[:cut], suffix))
        if n is None:
            continue
        assert n >= last, f"cut at {cut}: {n} events, a shorter prefix had {last}"
        assert full is None or n <= full, f"cut at {cut}: {n} events, the whole body has {full}"
        last = n


@pytest.mark.parametrize("path", FILES, ids=label)
def test_byte_mutants(path: Path, writer: _Writer) -> None:
    body = path.read_bytes()
    rng = random.Random(f"mutants:{path.name}")
    for _what, mutant in mutations(body, rng, scaled(60)):
        writer.analyse(mutant, _suffix(path))


def test_random_bytes(writer: _Writer) -> None:
    rng = random.Random(8)
    alphabets: list[Callable[[int], bytes]] = [
        lambda n: rng.randbytes(n),
        lambda n: bytes(rng.choice(b'data: {}[]"\\\r\n:event,0123456789') for _ in range(n)),
        lambda n: "".join(
            rng.choice(["data: ", "\n", "\r\n", "{", "}", '"type"', ":", "é", "\u2028", "\ufeff"])
            for _ in range(n // 4)
        ).encode(),
    ]
    for i in range(scaled(300)):
        data = alphabets[i % 3](rng.randrange(0, 3000))
        for suffix in (".sse", ".jsonl"):
            writer.analyse(data, suffix)


@pytest.mark.parametrize(
    "body",
    [
        b'data: {"type": "response.created", "x": "\xff\xfe"}\n\n',
        b"\xed\xa0\x80data: {}\n\n",  # a UTF-16 surrogate encoded in UTF-8
        b'data: {"choices": [{"delta": {"content": "\xc3"}}]}\n\n',  # truncated 2-byte sequence
        b"\xef\xbb\xbf\xef\xbb\xbfdata: {}\n\n",  # two byte-order marks
        b"data: \x80\x81\x82\n\n",
        b"\x1f\x8b\x08\x00garbage",  # gzip magic, corrupt stream
        b"\x00" * 100,
        b"<html><body>502 Bad Gateway</body></html>",
        b"\r" * 10_000,
        b":" * 10_000 + b"\n\n",
        b"event: error\n\n" * 1000,
        b"data: [DONE]\n\n" * 1000,
    ],
    ids=lambda b: repr(b[:20]),
)
def test_invalid_utf8_and_odd_bodies(body: bytes, writer: _Writer) -> None:
    for suffix in (".sse", ".jsonl", ".payloads.jsonl"):
        writer.analyse(body, suffix)


def _sse(obj: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _responses(deltas: list[bytes], *, complete: bool = True) -> bytes:
    created = _sse({"type": "response.created", "sequence_number": 0, "response": {"id": "r", "model": "m"}})
    done = _sse({"type": "response.completed", "sequence_number": len(deltas) + 1,
                 "response": {"id": "r", "usage": {"input_tokens": 1, "output_tokens": 1}}})  # fmt: skip
    return created + b"".join(deltas) + (done if complete else b"")


def _measure(fn: Callable[[], object]) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["delta", "unterminated", "no_newline", "comment", "jsonl"])
def test_ten_megabyte_single_event(shape: str, writer: _Writer) -> None:
    """One 10 MB event: analysed with bounded memory (the decoder caps a line at 8 Mi characters)."""
    big = "x" * (10 * MiB)
    delta = {"type": "response.output_text.delta", "sequence_number": 1, "delta": big}
    suffix = ".sse"
    if shape == "delta":
        data = _responses([_sse(delta)])
    elif shape == "unterminated":
        data = _responses([], complete=False) + b"data: " + big.encode()
    elif shape == "no_newline":
        data = b"data: " + big.encode()
    elif shape == "comment":
        data = b": " + big.encode() + b"\n\n" + _responses([])
    else:
        suffix = ".jsonl"
        data = json.dumps(delta).encode() + b"\n" + json.dumps({"type": "response.completed"}).encode()
    result, peak = _measure(lambda: writer.analyse(data, suffix))
    FIGURES.peak("peak traced memory, 10 MB single event (MiB)", peak / MiB)
    assert peak < 120 * MiB, f"peak {peak / MiB:.1f} MiB for a {len(data) / MiB:.1f} MiB body"
    if shape == "delta":
        assert isinstance(result, FileReport)
        # the event was cut at the decoder's limit, so it is undecodable: reported, not silently dropped
        assert result.outcome == names.TRANSPORT_ERROR, result.to_json()


@pytest.mark.slow
@pytest.mark.parametrize("surface", ["responses", "messages", "jsonl"])  # chat: the core test covers 100k chunks
def test_100k_tiny_events(surface: str, writer: _Writer) -> None:
    """100 000 events: every one counted, memory flat (the reader streams; the report is bounded)."""
    n = scaled(100_000)
    if surface == "responses":
        body = _responses([_sse({"type": "response.output_text.delta", "sequence_number": i + 1, "delta": "x"})
                           for i in range(n)])  # fmt: skip
        suffix, expected = ".sse", n + 2
    elif surface == "chat":
        chunk = _sse({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "x"}}]})
        body = chunk * n + b"data: [DONE]\n\n"
        suffix, expected = ".sse", n
    elif surface == "messages":
        chunk = _sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
                     "content_block_delta")  # fmt: skip
        body = chunk * n
        suffix, expected = ".sse", n
    else:
        line = json.dumps({"type": "response.output_text.delta", "sequence_number": 1, "delta": "x"}).encode()
        body = b"\n".join([line] * n)
        suffix, expected = ".jsonl", n
    result, peak = _measure(lambda: writer.analyse(body, suffix))
    FIGURES.peak("peak traced memory, 100 000 events offline (MiB)", peak / MiB)
    assert isinstance(result, FileReport)
    assert sum(r.events for r in result.reports) == expected
    assert sum(r.deltas for r in result.reports) == n
    assert peak < 24 * MiB, f"peak {peak / MiB:.1f} MiB for {n} events ({len(body) / MiB:.1f} MiB body)"


# `otelstream check` as the user runs it, reporting its own peak resident memory once it is done: VmHWM, the high
# water mark of the process image exec() made (ru_maxrss would keep the forking pytest process's size across exec)
_CHECK_REPORTING_PEAK_RSS = """
import re, sys
from otelstream import offline
rc = offline.main(sys.argv[1:])
with open("/proc/self/status") as f:
    print(int(re.search(r"^VmHWM:\\s*(\\d+) kB", f.read(), re.M).group(1)) * 1024, file=sys.stderr)
sys.exit(rc)
"""


@pytest.mark.slow
def test_300k_websocket_lanes(tmp_path: Path) -> None:
    """Issue 21 (7): a transcript of 300 000 lanes (a stream_id per response, as a client that never reuses one
    sends; a third of the responses never end) is checked in bounded memory, its counts exact. Before, every lane
    kept its tracker (~1.3 KB) to the end of the file, 401 MiB peak RSS for this 40 MB file, and the counts stopped
    at the 10 000th response."""
    if not Path("/proc/self/status").is_file():
        pytest.skip("the peak resident memory of a process is read from Linux's /proc/self/status")
    n = scaled(300_000)
    path = tmp_path / "lanes.jsonl"
    with path.open("w") as f:
        for i in range(n):
            if i % 3 == 0:  # a response that never ends: its lane stays open until it is the longest idle
                f.write(f'{{"type":"response.created","sequence_number":0,"stream_id":"s{i}",'
                        f'"response":{{"id":"resp_{i}"}}}}\n')  # fmt: skip
            else:
                f.write(f'{{"type":"response.completed","sequence_number":0,"stream_id":"s{i}","response":'
                        f'{{"id":"resp_{i}","usage":{{"input_tokens":1,"output_tokens":2}}}}}}\n')  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", _CHECK_REPORTING_PEAK_RSS, "--json", str(path)],
                          capture_output=True, text=True, timeout=110, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    peak = int(proc.stderr.strip().splitlines()[-1])
    FIGURES.peak(f"peak RSS, otelstream check --json of {n} WebSocket lanes (MiB)", peak / MiB)
    # the interpreter and the module take ~16 MiB; the analysis adds ~9 MiB whatever the transcript's length
    assert peak < 64 * MiB, f"peak RSS {peak / MiB:.1f} MiB for {n} lanes"
    d = json.loads(proc.stdout)
    unfinished = (n + 2) // 3
    completed = n - unfinished
    assert (d["responses"], d["events"], d["deltas"]) == (n, n, 0)
    assert (d["usage"]["input_tokens"], d["usage"]["output_tokens"]) == (completed, 2 * completed)
    assert d["anomaly_counts"] == {names.ANOM_NO_DELTA: completed}
    assert (d["outcome"], d["error_type"]) == (names.CUT, None)
    assert d["error_class"] == d["lanes"][0]["error_class"]  # the first response's: the first one that did not end
    listed = min(n, MAX_REPORTED_LANE_RESPONSES)
    assert len(d["lanes"]) == listed and d.get("responses_dropped", 0) == n - listed
    assert [x["stream_id"] for x in d["lanes"][:3]] == ["s0", "s1", "s2"]
    # the lanes still followed at the end are the last MAX_OPEN_LANES; every unfinished one before them was evicted
    forgotten = max(0, n - MAX_OPEN_LANES)
    assert d.get("lanes_evicted", 0) == (forgotten + 2) // 3


@pytest.mark.parametrize("depth", [50, 1000, 100_000])
def test_deeply_nested_json(depth: int, writer: _Writer) -> None:
    nested = "[" * depth + "]" * depth
    obj_nested = '{"a":' * depth + "1" + "}" * depth
    body = (
        _sse({"type": "response.created", "sequence_number": 0})
        + f'data: {{"type":"response.output_text.delta","sequence_number":1,"delta":"x","n":{nested}}}\n\n'.encode()
        + f'data: {{"type":"response.in_progress","sequence_number":2,"response":{obj_nested}}}\n\n'.encode()
    )
    result, peak = _measure(lambda: writer.analyse(body))
    assert isinstance(result, FileReport)
    assert peak < 64 * MiB
    if depth >= 100_000:
        # json.loads gives up (RecursionError): the SDK raises there too, so the stream ends as a transport error
        assert result.outcome == names.TRANSPORT_ERROR


def test_absurd_numbers_on_the_wire(writer: _Writer) -> None:
    huge = "9" * 4000  # JSON integers are unbounded (Python caps int parsing at 4300 digits)
    body = (
        b'data: {"type":"response.created","sequence_number":' + huge.encode() + b"}\n\n"
        b'data: {"type":"response.output_text.delta","sequence_number":-1,"delta":"x"}\n\n'
        b'data: {"type":"response.output_text.delta","sequence_number":1e400,"delta":"x"}\n\n'
        b'data: {"type":"response.output_text.delta","sequence_number":NaN,"delta":"x"}\n\n'
        b'data: {"type":"response.output_text.delta","sequence_number":-Infinity,"delta":"x"}\n\n'
        b'data: {"type":"response.completed","sequence_number":18446744073709551617,'
        b'"response":{"usage":{"input_tokens":NaN,"output_tokens":Infinity,'
        b'"input_tokens_details":{"cached_tokens":-5},"output_tokens_details":{"reasoning_tokens":1e999}}}}\n\n'
    )
    result = writer.analyse(body)
    assert isinstance(result, FileReport)
    (r,) = result.reports
    assert r.outcome == names.COMPLETED and r.deltas == 4
    assert r.usage.to_json() == dict.fromkeys(r.usage.to_json())  # every bad count dropped, none invented
