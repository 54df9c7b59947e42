"""`otelstream check` on what a user waits for (issue 26): time to first output as an event index (offline has no
clock), the failure phase of a bad outcome, aborted generations, in the JSON and in the text line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otelstream import names, offline


def _chat(*deltas: dict[str, Any], finish: str = "stop", done: bool = True) -> bytes:
    frames = [{"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                       "finish_reason": None}]}]  # fmt: skip
    frames += [{"id": "c1", "model": "m", "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    frames.append({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    body = b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames)
    return body + (b"data: [DONE]\n\n" if done else b"")


THINK = {"reasoning_content": "hm"}
SAY = {"content": "42"}


def _check(tmp_path: Path, body: bytes, name: str = "s.sse") -> tuple[dict[str, Any], str]:
    p = tmp_path / name
    p.write_bytes(body)
    fr = offline.analyse(str(p))
    return fr.to_json(), fr.to_text()


def test_first_output_is_an_event_index(tmp_path: Path) -> None:
    d, text = _check(tmp_path, _chat(THINK, THINK, THINK, SAY, SAY))
    assert (d["deltas"], d["first_output_event_index"]) == (5, 4)  # role chunk, three thoughts, then the answer
    assert "first_output=event 4" in text
    d, text = _check(tmp_path, _chat(SAY, SAY))
    assert d["first_output_event_index"] == 1 and "first_output=" not in text  # no reasoning: nothing to tell apart
    d, text = _check(tmp_path, _chat(THINK, finish="length"))
    assert d["first_output_event_index"] is None and "first_output=none" in text  # thought, never answered
    d, _ = _check(tmp_path, _chat())
    assert d["first_output_event_index"] is None and d["deltas"] == 0


@pytest.mark.parametrize(
    ("body", "outcome", "phase"),
    [(_chat(SAY, finish="abort"), names.ERROR, names.PHASE_DURING_OUTPUT),
     (_chat(finish="abort"), names.ERROR, names.PHASE_BEFORE_OUTPUT),
     (_chat(THINK, SAY, done=False)[: -len(b"data: {}\n\n")], names.CUT, names.PHASE_DURING_OUTPUT),
     (_chat(THINK, finish="error"), names.ERROR, names.PHASE_DURING_OUTPUT),  # the user saw the thinking
     (_chat(SAY), names.COMPLETED, None)],
)  # fmt: skip
def test_failure_phase(tmp_path: Path, body: bytes, outcome: str, phase: str | None) -> None:
    d, text = _check(tmp_path, body)
    assert (d["outcome"], d["failure_phase"]) == (outcome, phase)
    assert (f"phase={phase}" in text) == (phase is not None) and ("phase=" in text) == (phase is not None)


def test_abort_reads_as_a_server_error(tmp_path: Path) -> None:
    d, text = _check(tmp_path, _chat(SAY, finish="abort"))
    assert (d["outcome"], d["error_type"], d["error_class"], d["finish_reasons"]) == (
        names.ERROR, "abort", names.EC_SERVER_ERROR, ["abort"])  # fmt: skip
    assert "error_class=server_error  error_type=abort  phase=during_output" in text
    assert offline.main(["--strict", str(tmp_path / "s.sse")]) == 1


def test_websocket_transcript_phase_is_the_first_failed_response(tmp_path: Path) -> None:
    def response(i: int, terminal: str, delta: bool) -> list[dict[str, Any]]:
        end: dict[str, Any] = {"type": terminal, "sequence_number": 2, "response": {"id": f"r{i}"}}
        if terminal == "response.failed":
            end["response"]["error"] = {"code": "server_error"}
        mid = {"type": "response.output_text.delta" if delta else "response.in_progress", "sequence_number": 1,
               "delta": "x"}  # fmt: skip
        return [{"type": "response.created", "sequence_number": 0, "response": {"id": f"r{i}"}}, mid, end]

    lines = [*response(0, "response.completed", True), *response(1, "response.failed", False),
             *response(2, "response.failed", True)]  # fmt: skip
    d, _ = _check(tmp_path, "\n".join(json.dumps(x) for x in lines).encode() + b"\n", "ws.jsonl")
    assert (d["outcome"], d["failure_phase"], d["first_output_event_index"]) == (
        names.FAILED, names.PHASE_BEFORE_OUTPUT, None)  # fmt: skip
    assert [x["failure_phase"] for x in d["lanes"]] == [None, names.PHASE_BEFORE_OUTPUT, names.PHASE_DURING_OUTPUT]
    assert [x["first_output_event_index"] for x in d["lanes"]] == [1, None, 1]
