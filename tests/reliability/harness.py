"""The reliability suite's harness: the body corpus, the byte-level mutator, report validity checks, run figures."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

from otelstream import names
from otelstream.core.report import StreamReport
from tests.support.paths import CAPTURES, FIXTURES, REPO

EXAMPLES = REPO / "otelstream" / "examples"
RECORDED = REPO / "tests" / "fixtures" / "recorded"  # real Gemini and Bedrock bodies (SOURCES.md)

# OTELSTREAM_RELIABILITY_SCALE=10 runs ten times the default counts (long local runs); CI runs the default.
SCALE = max(0.01, float(os.environ.get("OTELSTREAM_RELIABILITY_SCALE", "1") or "1"))

SMALL_BODY = 4096  # truncation at every byte up to this size; beyond it, at event boundaries ± 3 and seeded cuts
SEEDED_CUTS = 200
BODY_SUFFIXES = (".sse", ".jsonl", ".eventstream")
# Outcomes an offline analysis can produce: no caller, no HTTP status, so never abandoned or http_error.
OFFLINE_OUTCOMES = frozenset(
    {names.COMPLETED, names.INCOMPLETE, names.FAILED, names.ERROR, names.CUT, names.TRANSPORT_ERROR}
)
INT64_MAX = 2**63 - 1


class Figures(dict[str, float]):
    """Counts the suite reports at the end of the run (inputs fuzzed, faults injected, streams, peak memory)."""

    def __missing__(self, key: str) -> float:
        return 0

    def peak(self, key: str, value: float) -> None:
        self[key] = max(self[key], value)


FIGURES = Figures()


def scaled(n: int) -> int:
    return max(1, int(n * SCALE))


def corpus_files(*, captures: bool = True) -> list[Path]:
    """Every stream body we have: the real captures (when present), the project's fixtures and bundled examples."""
    roots = [FIXTURES, RECORDED, EXAMPLES]
    if captures and CAPTURES.is_dir():
        roots.insert(0, CAPTURES)
    out: list[Path] = []
    for root in roots:
        if root.is_dir():
            out.extend(p for p in sorted(root.rglob("*")) if p.is_file() and p.name.endswith(BODY_SUFFIXES))
    return out


def label(path: Path) -> str:
    for root in (CAPTURES, FIXTURES, RECORDED, EXAMPLES):
        try:
            return f"{root.name}/{path.relative_to(root)}"
        except ValueError:
            continue
    return path.name


def event_boundaries(body: bytes, jsonl: bool) -> list[int]:
    """Byte offsets just after each event: a blank line (LF, CRLF or CR framing), or a line end for JSON lines."""
    seps = (b"\n",) if jsonl else (b"\n\n", b"\r\n\r\n", b"\r\r")
    out: set[int] = set()
    for sep in seps:
        i = body.find(sep)
        while i >= 0:
            out.add(i + len(sep))
            i = body.find(sep, i + 1)
    return sorted(out)


def cut_points(body: bytes, jsonl: bool, seed: int) -> list[int]:
    """Every byte for small bodies; else every event boundary ± 3 bytes plus SEEDED_CUTS seeded positions."""
    n = len(body)
    if n <= SMALL_BODY:
        return list(range(n + 1))
    cuts: set[int] = {0, n}
    for b in event_boundaries(body, jsonl):
        cuts.update(range(max(0, b - 3), min(n, b + 3) + 1))
    rng = random.Random(seed)
    cuts.update(rng.randrange(n + 1) for _ in range(scaled(SEEDED_CUTS)))
    return sorted(cuts)


def mutations(body: bytes, rng: random.Random, count: int) -> Iterator[tuple[str, bytes]]:
    """Byte-level mutants: flips, deletions, insertions of hostile bytes, duplicated and swapped spans."""
    hostile = [b"\x00", b"\xff", b"\xc3", b"\xe2\x82", b"\r", b"\n", b"\r\n", b":", b"data: ", b"event: error\n",
               b"data: [DONE]\n\n", b"{", b"}", b'"', b"\\", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xef\xbb\xbf",
               b"NaN", b"-1", b"1" * 30, b"[" * 50]  # fmt: skip
    n = len(body)
    for i in range(count):
        b = bytearray(body)
        op = i % 6
        if n == 0:
            yield "empty+insert", bytes(rng.choice(hostile))
            continue
        pos = rng.randrange(n)
        if op == 0:
            b[pos] ^= 1 << rng.randrange(8)
            yield f"flip@{pos}", bytes(b)
        elif op == 1:
            del b[pos : pos + rng.randint(1, 64)]
            yield f"delete@{pos}", bytes(b)
        elif op == 2:
            b[pos:pos] = rng.choice(hostile)
            yield f"insert@{pos}", bytes(b)
        elif op == 3:
            end = min(n, pos + rng.randint(1, 512))
            b[pos:pos] = body[pos:end]
            yield f"dup@{pos}", bytes(b)
        elif op == 4:
            other = rng.randrange(n)
            lo, hi = sorted((pos, other))
            yield f"swap@{lo}:{hi}", bytes(b[:lo] + body[hi:] + body[lo:hi])
        else:
            b[pos] = rng.randrange(256)
            yield f"byte@{pos}", bytes(b)


def assert_valid_report(r: StreamReport, *, offline: bool = False) -> None:
    """A report that honours docs/telemetry.md: one outcome of the closed set and bounded, consistent fields."""
    allowed = OFFLINE_OUTCOMES if offline else frozenset(names.OUTCOMES)
    assert r.outcome in allowed, r.outcome
    assert r.surface in names.SURFACES
    assert 0 <= r.deltas <= r.events
    assert r.keepalives >= 0
    assert len(r.anomalies) <= names.MAX_REPORTED_ANOMALIES
    assert len(r.stalls) <= names.MAX_RECORDED_STALLS
    assert all(a.kind in names.PROTOCOL_ANOMALY_KINDS or a.kind in names.SEQUENCE_ANOMALY_BY_KIND.values()
               for a in r.anomalies), r.anomalies  # fmt: skip
    assert all(len(a.detail) <= 200 for a in r.anomalies)
    assert r.abandoned_reason is None or (r.outcome == names.ABANDONED and r.abandoned_reason in names.ABANDON_REASONS)
    assert r.error_type is None or (isinstance(r.error_type, str) and 0 < len(r.error_type) <= 64)
    assert len(r.finish_reasons) <= 128 and all(isinstance(f, str) and len(f) <= 64 for f in r.finish_reasons)
    for text in (r.response_id, r.response_model):
        assert text is None or (isinstance(text, str) and len(text) <= 128)
    for value in r.usage.to_json().values():
        assert value is None or (type(value) is int and value >= 0), r.usage
    s = r.sequence
    assert min(s.gaps, s.skipped, s.duplicates, s.out_of_order) >= 0
    assert r.t_end_ns >= r.t_request_ns
    assert sum(r.chunk_counts) == max(0, r.deltas - 1)
