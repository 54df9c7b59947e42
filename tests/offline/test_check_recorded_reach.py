# ruff: noqa: E501  (the expectations table reads best one recording per line)
"""`otelstream check --json` on real recorded Gemini and Bedrock bodies (tests/fixtures/recorded, SOURCES.md says
where each comes from), against expectations read off each body by hand: outcome, finish reasons, events, deltas,
the first output's event index, usage (input, output, cache read, cache write, reasoning), id and model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otelstream import names, offline

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"

# file: surface, provider, outcome, finish_reasons, events, deltas, first output event, usage, response_id, response_model
# Gemini's usageMetadata is proto3 JSON: a count it leaves out is 0 (cache read, thoughts); it has no cache writes
EXPECTED: dict[str, tuple[Any, ...]] = {
    # 33 messages: messageStart, 29 text deltas, contentBlockStop, messageStop, metadata (its payloads carry Bedrock's "p" padding)
    "bedrock-converse-nova-micro.eventstream": ("converse", "aws.bedrock", "completed", ["end_turn"], 33, 29, 1, (13, 82, None, None, None), None, None),
    # the last usageMetadata wins: its promptTokenCount (257) differs from the earlier chunks' (55)
    "gemini-3-text-after-tool.sse": ("generate_content", "gcp.gemini", "completed", ["STOP"], 3, 2, 0, (257, 8, 0, None, 0), "REVVabaiCdq4qtsPnZu96Qo", "gemini-3-pro-preview"),
    "gemini-2.5-flash-usage-each-chunk.sse": ("generate_content", "gcp.gemini", "completed", ["STOP"], 3, 3, 0, (18, 115, 0, None, 35), "ru1garvBEoOiqtsP2fznmQw", "gemini-2.5-flash"),
}
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_write_input_tokens", "reasoning_output_tokens")


def test_every_recording_has_expectations() -> None:
    assert sorted(p.name for p in RECORDED.iterdir() if p.suffix in (".sse", ".eventstream")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_body(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    surface, provider, outcome, finish, events, deltas, first_output, usage, rid, model = EXPECTED[name]
    assert offline.main(["--json", "--strict", str(RECORDED / name)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["surface"], doc["provider"], doc["outcome"], doc["finish_reasons"]) == (surface, provider, outcome, finish)
    assert (doc["events"], doc["deltas"], doc["first_output_event_index"]) == (events, deltas, first_output)
    assert tuple(doc["usage"][k] for k in USAGE_KEYS) == usage
    assert (doc["response_id"], doc["response_model"]) == (rid, model)
    assert (doc["keepalives"], doc["done_sentinel"], doc["sequence"]["first"]) == (0, False, None)
    assert doc["anomalies"] == [] and doc["error_type"] is None and doc["error_class"] is None


# --- tests/fixtures/captures: each body beside a sidecar whose hand reading was written before the checker ran ---
CAPTURES = RECORDED.parent / "captures"
SIDECARS = sorted(CAPTURES.glob("*/*.json"))
READ_KEYS = ("outcome", "finish_reasons", "error_type", "error_class", "events", "deltas", "usage", "response_id")


@pytest.mark.parametrize("sidecar", SIDECARS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_capture_agrees_with_its_hand_reading(sidecar: Path, capsys: pytest.CaptureFixture[str]) -> None:
    side = json.loads(sidecar.read_text())
    reading = side["hand_reading"]
    assert offline.main(["--json", str(sidecar.parent / side["file"])]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    assert {k: doc[k] for k in READ_KEYS} == {k: reading[k] for k in READ_KEYS}
    assert [a["kind"] for a in doc["anomalies"]] == [a if isinstance(a, str) else a["kind"] for a in reading["anomalies"]]
    # an event stream carries no model: offline it is unknown, live it is the request's modelId
    live_only = " ".join(reading.get("live_only", ()))
    assert doc["response_model"] == (None if "response_model" in live_only else reading["response_model"])
    provider = names.PROVIDER_GEMINI if "provider" in live_only else side["provider"]
    assert (doc["surface"], doc["provider"]) == (side["surface"], provider)
