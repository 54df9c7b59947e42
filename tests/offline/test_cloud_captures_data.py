"""The recorded Gemini and Bedrock bodies in tests/fixtures/captures/ are what their sidecars say: the bytes hash
right, Gemini bodies are CRLF ``data:`` objects, and every Bedrock body decodes message by message with botocore's own
decoder (both CRCs checked) to the event count of the hand reading. The bodies' meaning is checked by the tests of
``otelstream check``; this only guards the data they stand on."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from botocore.eventstream import EventStreamBuffer

from tests.support.paths import REPO

CAPTURES = REPO / "tests" / "fixtures" / "captures"
BODIES = sorted(p for p in CAPTURES.glob("*/*") if p.suffix in (".sse", ".eventstream"))


def test_there_are_captures_of_both_wires() -> None:
    assert {p.parent.name for p in BODIES} == {"gemini", "bedrock"}
    assert all(3 <= sum(p.parent.name == d for p in BODIES) <= 6 for d in ("gemini", "bedrock"))


@pytest.mark.parametrize("body", BODIES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_body_matches_its_sidecar(body: Path) -> None:
    side = json.loads(body.with_suffix(".json").read_text())
    data = body.read_bytes()
    assert side["file"] == body.name
    assert hashlib.sha256(data).hexdigest() == side["sha256"]
    assert len(data) == side["bytes"]
    reading = side["hand_reading"]
    if body.suffix == ".sse":
        frames = [f for f in data.split(b"\r\n\r\n") if f]
        assert all(f.startswith(b"data: ") and b"\n" not in f for f in frames)
        assert len(frames) == reading["events"]
    else:
        buffer = EventStreamBuffer()
        buffer.add_data(data)
        messages = list(buffer)
        assert sum(m.prelude.total_length for m in messages) == len(data)  # nothing left over
        assert len(messages) == reading["events"] == side["wire"]["messages"]
