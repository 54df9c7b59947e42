# ruff: noqa: E501  (the expectations table reads best one recording per line)
"""`otelstream check --json` on real recorded Gemini and Bedrock bodies (tests/fixtures/recorded, SOURCES.md says
where each comes from), against expectations read off each body by hand: outcome, finish reasons, events, deltas,
the first output's event index, usage (input, output, cache read, cache write, reasoning), id and model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otelstream import offline

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"

# file: surface, provider, outcome, finish_reasons, events, deltas, first output event, usage, response_id, response_model
EXPECTED: dict[str, tuple[Any, ...]] = {
    # 33 messages: messageStart, 29 text deltas, contentBlockStop, messageStop, metadata (its payloads carry Bedrock's "p" padding)
    "bedrock-converse-nova-micro.eventstream": ("converse", "aws.bedrock", "completed", ["end_turn"], 33, 29, 1, (13, 82, None, None, None), None, None),
    # 14 reasoningContent.text deltas, then a signature-only delta (none), then 5 text deltas from event 17
    "bedrock-converse-claude-reasoning.eventstream": ("converse", "aws.bedrock", "completed", ["end_turn"], 25, 19, 17, (36, 73, None, None, None), None, None),
    # 4 thought chunks, then 19 text chunks; last usage: candidates 469 + thoughts 787
    "gemini-2.5-pro-thoughts.sse": ("generate_content", "gcp.gemini", "completed", ["STOP"], 23, 23, 4, (34, 1256, None, None, 787), "beHBaJfEMIi-qtsP3769-Q8", "gemini-2.5-pro"),
    # a functionCall part (with a thoughtSignature) is output; the closing empty text is not
    "gemini-3-function-call-signature.sse": ("generate_content", "gcp.gemini", "completed", ["STOP"], 2, 1, 0, (29, 212, None, None, 202), "QUVVadTSNJ6_qtsPvN7J8Q0", "gemini-3-pro-preview"),
    # the last usageMetadata wins: its promptTokenCount (257) differs from the earlier chunks' (55)
    "gemini-3-text-after-tool.sse": ("generate_content", "gcp.gemini", "completed", ["STOP"], 3, 2, 0, (257, 8, None, None, None), "REVVabaiCdq4qtsPnZu96Qo", "gemini-3-pro-preview"),
    "gemini-2.5-flash-usage-each-chunk.sse": ("generate_content", "gcp.gemini", "completed", ["STOP"], 3, 3, 0, (18, 115, None, None, 35), "ru1garvBEoOiqtsP2fznmQw", "gemini-2.5-flash"),
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
