"""The benchmark's Gemini and Bedrock cells (``bench/canned.py``, ``bench/workers/cloud.py``, the peer verdict of
``bench/report/budgets.py``): the real SDK clients read the canned bodies as the service's, and a peer that records
nothing or only the call is never the "best peer"."""

from __future__ import annotations

import asyncio

import pytest

from bench import canned, configs
from bench.report.budgets import budget_table

pytest.importorskip("google.genai")
pytest.importorskip("boto3")


@pytest.mark.parametrize("surface", canned.CLOUD_SURFACES)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_sdks_read_the_canned_bodies(surface: str, mode: str) -> None:
    if surface == "converse" and mode == "async":
        pytest.importorskip("aiobotocore")
    from bench.workers.clients import make_client, open_stream

    body = canned.frames(surface, 7)
    client = make_client(surface, mode, configs.setup("baseline", surface), lambda _r: body)
    if mode == "sync":
        got = list(open_stream(client, surface))
    else:

        async def read() -> list:
            stream = await open_stream(client, surface)
            return [ev async for ev in stream]

        got = asyncio.run(read())
    assert len(got) == canned.expected_events(surface, 7)
    if surface == "converse":  # botocore checked both CRCs of every frame and named each event
        assert [next(iter(ev)) for ev in got] == ["messageStart", *["contentBlockDelta"] * 7, "contentBlockStop",
                                                   "messageStop", "metadata"]  # fmt: skip
        assert got[-1]["metadata"]["usage"]["outputTokens"] == 7
    else:
        assert "".join(ev.text for ev in got) == "".join(canned._WORDS[i % len(canned._WORDS)] for i in range(7))
        assert got[-1].candidates[0].finish_reason == "STOP" and got[-1].usage_metadata.candidates_token_count == 7


def _row(sdk: str, config: str, added: float, *, produced: bool = True, observes: bool | None = True) -> dict:
    row = {"sdk": sdk, "config": config, "surface": "converse", "mode": "sync", "added_ir_per_event": added,
           "added_marginal_ir_per_event": added, "added_fixed_ir_per_stream": 0.0,
           "added_fixed_caller_ir_per_stream": 0.0, "produced": produced, "http": "botocore"}  # fmt: skip
    if observes is not None:
        row["observes_stream"] = observes
    return row


def _peer_line(rows: list[dict]) -> str:
    res = {"cg": {"rows": rows}, "sdk_sets": ["newest"], "machine": {"sdks": {"newest": {"boto3": "1.43"}}}}
    [line] = [ln for ln in budget_table(res) if "best peer" in ln]
    return line


def test_a_peer_without_the_stream_is_not_the_best_peer() -> None:
    rows = [_row("newest", "otelstream", 10_000), _row("newest", "otel-botocore", 100, observes=False),
            _row("newest", "openllmetry", 50, produced=False), _row("newest", "openinference", 30_000)]  # fmt: skip
    line = _peer_line(rows)
    assert "openinference 30,000" in line and "×3.0" in line and line.endswith("**met** |")
    assert "otel-botocore (the call only)" in line and "openllmetry (no telemetry)" in line


def test_no_observing_peer_is_said_not_judged() -> None:
    line = _peer_line([_row("newest", "otelstream", 10_000), _row("newest", "otel-botocore", 100, observes=False)])
    assert "no peer observes this stream" in line and line.endswith("| – |")
