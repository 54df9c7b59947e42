"""`otelstream check`: the project's own fixtures (every surface × outcome and the quirks), the CLI contract
(exit codes, `--json` keys, `--strict`), bad inputs, and cuts at every event boundary."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otelstream import names, offline
from otelstream.examples import paths as example_paths
from tests.support.paths import FIXTURES

# docs/api.md: exactly these keys (extra keys allowed)
DESIGN_KEYS = {"file", "surface", "provider", "outcome", "finish_reasons", "error_type", "error_class", "events",
               "deltas",
               "keepalives", "done_sentinel", "sequence", "usage", "response_id", "response_model",
               "anomalies"}  # fmt: skip
SEQUENCE_KEYS = {"first", "last", "gaps", "skipped", "duplicates", "out_of_order", "bad_start"}
USAGE_KEYS = {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_write_input_tokens",
              "reasoning_output_tokens"}  # fmt: skip

R, C, CO, M = names.RESPONSES, names.CHAT_COMPLETIONS, names.COMPLETIONS, names.MESSAGES
# file: surface, outcome, finish_reasons, error_type, events, deltas, keepalives, (input, output), anomaly counts
EXPECTED: dict[str, tuple[str, str, list[str], str | None, int, int, int, tuple[Any, Any], dict[str, int]]] = {
    "responses-completed.sse": (R, "completed", ["stop"], None, 8, 3, 0, (20, 3), {}),
    "responses-incomplete.sse": (R, "incomplete", ["max_output_tokens"], None, 8, 3, 0, (20, 3), {}),
    "responses-failed.sse": (R, "failed", ["error"], "server_error", 8, 3, 0, (None, None), {}),
    "responses-error.sse": (R, "error", [], "rate_limit_exceeded", 8, 3, 0, (None, None), {}),
    "responses-cut.sse": (R, "cut", [], None, 7, 3, 0, (None, None), {}),
    "responses-resumed-starting-after.sse": (R, "completed", ["stop"], None, 4, 2, 0, (20, 3), {}),
    "responses-seq-dup-gap.sse": (R, "completed", ["stop"], None, 8, 3, 0, (20, 3),
                                  {"sequence_duplicate": 1, "sequence_gap": 1}),
    "responses-gateway-untyped-done.sse": (R, "completed", ["stop"], None, 8, 3, 0, (20, 3),
                                           {"untyped_event": 5, "trailing_done": 1}),
    "responses-keepalive-crlf.sse": (R, "completed", ["stop"], None, 8, 3, 3, (20, 3), {}),
    "responses-undecodable.sse": (R, "transport_error", [], None, 4, 1, 0, (None, None),
                                  {"undecodable_event": 1}),
    "responses-unterminated.sse": (R, "cut", [], None, 7, 3, 0, (None, None), {"unterminated_event": 1}),
    "responses-payloads.payloads.jsonl": (R, "failed", ["error"], "server_error", 8, 3, 0, (None, None), {}),
    "chat-completed-usage.sse": (C, "completed", ["stop"], None, 5, 2, 0, (12, 4), {}),
    "chat-completed-no-usage.sse": (C, "completed", ["stop"], None, 4, 2, 0, (None, None), {"usage_missing": 1}),
    "chat-completed-no-done.sse": (C, "completed", ["stop"], None, 5, 2, 0, (12, 4), {"missing_done": 1}),
    "chat-thinking-parts.sse": (C, "completed", ["stop"], None, 7, 4, 0, (12, 4), {}),
    "chat-no-finish-done.sse": (C, "completed", [], None, 4, 2, 0, (12, 4), {"missing_finish_reason": 1}),
    "chat-no-finish-no-done.sse": (C, "cut", [], None, 4, 2, 0, (12, 4), {}),
    "chat-cache-write-details.sse": (C, "completed", ["stop"], None, 5, 2, 0, (12, 4), {}),
    "chat-cache-write-top-level.sse": (C, "completed", ["stop"], None, 5, 2, 0, (12, 4), {}),
    "chat-incomplete-length.sse": (C, "incomplete", ["length"], None, 5, 2, 0, (12, 4), {}),
    "chat-content-filter.sse": (C, "incomplete", ["content_filter"], None, 5, 2, 0, (12, 4), {}),
    "chat-cut.sse": (C, "cut", [], None, 3, 2, 0, (None, None), {}),
    "chat-cut-before-usage.sse": (C, "cut", ["stop"], None, 4, 2, 0, (None, None), {"usage_missing": 1}),
    "chat-inband-error.sse": (C, "error", [], "server_error", 4, 2, 0, (None, None), {}),
    "chat-n2-interleaved.sse": (C, "incomplete", ["stop", "length"], None, 9, 4, 0, (12, 4), {}),
    "chat-parallel-tool-calls.sse": (C, "completed", ["tool_calls"], None, 9, 4, 0, (12, 4), {}),
    "chat-reasoning-keepalive.sse": (C, "completed", ["stop"], None, 4, 3, 2, (12, 4), {}),
    "completions-completed.sse": (CO, "completed", ["stop"], None, 3, 2, 0, (None, None), {"usage_missing": 1}),
    "completions-incomplete.sse": (CO, "incomplete", ["length"], None, 2, 2, 0, (None, None), {"usage_missing": 1}),
    "completions-cut.sse": (CO, "cut", [], None, 2, 2, 0, (None, None), {}),
    "messages-completed-cache.sse": (M, "completed", ["end_turn"], None, 7, 2, 1, (160, 5), {}),
    "messages-incomplete-max-tokens.sse": (M, "incomplete", ["max_tokens"], None, 6, 1, 0, (10, 2), {}),
    "messages-error-overloaded.sse": (M, "error", [], "overloaded_error", 4, 1, 1, (10, 1), {}),
    "messages-cut.sse": (M, "cut", [], None, 4, 2, 0, (10, 1), {}),
    "messages-thinking-tool-use.sse": (M, "completed", ["tool_use"], None, 11, 2, 0, (10, 30), {}),
}  # fmt: skip
# the error class of each bad outcome (None for every other fixture)
CLASSES = {
    "responses-failed.sse": "server_error", "responses-error.sse": "rate_limited", "responses-cut.sse": "cut",
    "responses-undecodable.sse": "protocol", "responses-unterminated.sse": "cut",
    "responses-payloads.payloads.jsonl": "server_error", "chat-cut.sse": "cut", "chat-cut-before-usage.sse": "cut",
    "chat-inband-error.sse": "server_error", "completions-cut.sse": "cut",
    "messages-error-overloaded.sse": "overloaded", "messages-cut.sse": "cut", "chat-no-finish-no-done.sse": "cut",
}  # fmt: skip


def test_every_fixture_has_an_expectation() -> None:
    on_disk = {p.name for p in FIXTURES.iterdir()} - {"websocket-lanes.jsonl"}
    assert on_disk == set(EXPECTED)
    # each SSE surface has each outcome reachable offline
    seen = {(v[0], v[1]) for v in EXPECTED.values()}
    for surface in (R, C, CO, M):
        assert {(surface, o) for o in ("completed", "incomplete", "cut")} <= seen
    for surface in (R, C, M):
        assert (surface, "error") in seen
    assert (R, "failed") in seen and (R, "transport_error") in seen


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name: str) -> None:
    surface, outcome, finish, error_type, events, deltas, keepalives, (inp, out), anomalies = EXPECTED[name]
    fr = offline.analyse(str(FIXTURES / name))
    d = fr.to_json()
    assert (d["surface"], d["outcome"], d["finish_reasons"], d["error_type"]) == (surface, outcome, finish, error_type)
    assert d["error_class"] == CLASSES.get(name)
    assert (d["events"], d["deltas"], d["keepalives"]) == (events, deltas, keepalives)
    assert (d["usage"]["input_tokens"], d["usage"]["output_tokens"]) == (inp, out)
    assert d["anomaly_counts"] == anomalies
    assert d["events"] == d["deltas"] + (d["events"] - d["deltas"]) >= d["deltas"]
    assert d["provider"] == ("anthropic" if surface == M else "openai")


def test_fixture_details() -> None:
    d = offline.analyse(str(FIXTURES / "responses-resumed-starting-after.sse")).to_json()
    assert d["resumed"] and d["sequence"]["first"] == 4 and not d["sequence"]["bad_start"]
    d = offline.analyse(str(FIXTURES / "responses-seq-dup-gap.sse")).to_json()
    assert {k: d["sequence"][k] for k in ("gaps", "skipped", "duplicates", "out_of_order")} == {
        "gaps": 1, "skipped": 1, "duplicates": 1, "out_of_order": 0}  # fmt: skip
    assert [a["detail"] for a in d["anomalies"]] == ["3 seen before", "expected 5, got 6"]
    d = offline.analyse(str(FIXTURES / "responses-completed.sse")).to_json()
    assert d["usage"] == {"input_tokens": 20, "output_tokens": 3, "cache_read_input_tokens": 8,
                          "cache_write_input_tokens": None, "reasoning_output_tokens": 1}  # fmt: skip
    assert d["sequence"]["first"] == 0 and d["sequence"]["last"] == 7 and d["response_id"] == "resp_fx1"
    d = offline.analyse(str(FIXTURES / "messages-completed-cache.sse")).to_json()
    assert d["usage"]["cache_read_input_tokens"] == 100 and d["usage"]["cache_write_input_tokens"] == 50
    assert d["sequence"]["first"] is None and d["sequence"]["last"] is None
    d = offline.analyse(str(FIXTURES / "chat-completed-usage.sse")).to_json()
    assert d["done_sentinel"] is True and d["response_model"] == "gpt-4o-mini"
    # chat cache writes where gateways report them (prompt_tokens_details, or Anthropic's top-level names)
    for name, read, write in (("chat-cache-write-details.sse", 0, 9), ("chat-cache-write-top-level.sse", 3, 7)):
        u = offline.analyse(str(FIXTURES / name)).to_json()["usage"]
        assert (u["input_tokens"], u["cache_read_input_tokens"], u["cache_write_input_tokens"]) == (12, read, write)


def test_thinking_parts_are_deltas_and_ttfd_is_the_first_of_them() -> None:
    """check's clock ticks once per record: the first delta is the first thinking part (the record after the
    role-only chunk), as in a plain text stream, not the answer three records later."""
    r = offline.analyse(str(FIXTURES / "chat-thinking-parts.sse")).reports[0]
    plain = offline.analyse(str(FIXTURES / "chat-cut.sse")).reports[0]  # role-only chunk, then text deltas
    assert r.deltas == 4 and r.time_to_first_delta_ns == plain.time_to_first_delta_ns is not None


def test_text_summary_names_the_error_class_of_bad_outcomes() -> None:
    bad = offline.analyse(str(FIXTURES / "messages-error-overloaded.sse")).to_text()
    assert "error_class=overloaded" in bad and "error_type=overloaded_error" in bad
    assert "error_class=cut" in offline.analyse(str(FIXTURES / "chat-cut.sse")).to_text()
    assert "error_class" not in offline.analyse(str(FIXTURES / "chat-completed-usage.sse")).to_text()


def test_websocket_lanes() -> None:
    fr = offline.analyse(str(FIXTURES / "websocket-lanes.jsonl"))
    d = fr.to_json()
    assert d["surface"] == names.RESPONSES_WEBSOCKET and d["outcome"] == "failed"
    assert set(d) >= DESIGN_KEYS
    lanes = d["lanes"]
    assert [(x["stream_id"], x["outcome"]) for x in lanes] == [(None, "completed"), ("lane-b", "failed"),
                                                               (None, "cut")]  # fmt: skip
    for lane in lanes:
        assert DESIGN_KEYS - {"file"} <= set(lane) and "stream_id" in lane and "response_id" in lane
        assert lane["sequence"]["first"] == 0 and not lane["anomalies"]
    assert d["events"] == sum(x["events"] for x in lanes) == 21
    assert d["responses"] == 3
    text = fr.to_text()
    assert "3 responses on 2 lanes" in text and "[lane-b]" in text


def test_websocket_transcript_single_response_and_client_events(tmp_path: Path) -> None:
    lines = [{"type": "response.create", "model": "gpt-4o"},
             {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1"}},
             {"type": "response.output_text.delta", "sequence_number": 1, "delta": "hi"},
             {"type": "response.completed", "sequence_number": 2, "response": {"id": "resp_1"}}]  # fmt: skip
    p = tmp_path / "ws.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    d = offline.analyse(str(p)).to_json()
    assert d["outcome"] == "completed" and [x["response_id"] for x in d["lanes"]] == ["resp_1"]
    assert d["lanes"][0]["events"] == 3 and not d["lanes"][0]["anomalies"]


def test_websocket_error_refusing_the_next_request_is_its_own_response(tmp_path: Path) -> None:
    """An `error` answering the second response.create (no response.created) belongs to that request, not to the
    response that completed before it; requests queued on a lane (FIFO) are matched in order."""
    lines = [{"type": "response.create", "model": "gpt-4o"}, {"type": "response.create", "model": "gpt-4o"},
             {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1"}},
             {"type": "response.output_text.delta", "sequence_number": 1, "delta": "hi"},
             {"type": "response.completed", "sequence_number": 2, "response": {"id": "resp_1"}},
             {"type": "error", "status": 400, "error": {"code": "previous_response_not_found", "message": "m"}},
             {"type": ["not", "a", "type"], "sequence_number": 1}]  # fmt: skip
    p = tmp_path / "ws.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    lanes = offline.analyse(str(p)).to_json()["lanes"]
    assert [(x["response_id"], x["outcome"], x["error_type"]) for x in lanes] == [
        ("resp_1", "completed", None), (None, "error", "previous_response_not_found")]  # fmt: skip
    assert lanes[1]["anomalies"][-1]["kind"] == names.ANOM_UNKNOWN_EVENT  # a `type` that is no string: not a crash


def _ws_response(i: int, lane: str | None = None, terminal: str = "response.completed") -> list[str]:
    sid = {} if lane is None else {"stream_id": lane}
    end: dict[str, Any] = {
        "type": terminal,
        "sequence_number": 2,
        **sid,
        "response": {"id": f"resp_{i}", "usage": {"input_tokens": 1, "output_tokens": 2}},
    }
    if terminal == "response.failed":
        end["response"]["error"] = {"code": "server_error", "message": "m"}
    return [json.dumps(x) for x in (
        {"type": "response.created", "sequence_number": 0, **sid, "response": {"id": f"resp_{i}", "model": f"m{i}"}},
        {"type": "response.output_text.delta", "sequence_number": 1, **sid, "delta": "x"}, end)]  # fmt: skip


def test_websocket_counts_are_exact_beyond_the_listed_responses(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 21 (7): `lanes` lists the first MAX_REPORTED_LANE_RESPONSES responses, but the outcome, error_type and
    every count cover all of them (before, a response past the listed ones was neither listed nor counted: a
    transcript whose only failure came later read `completed`)."""
    cap = offline.MAX_REPORTED_LANE_RESPONSES
    n, bad = cap + 200, cap + 100
    lines: list[str] = []
    for i in range(n):
        lines += _ws_response(i, terminal="response.failed" if i == bad else "response.completed")
    p = tmp_path / "ws.jsonl"
    p.write_text("\n".join(lines) + "\n")
    fr = offline.analyse(str(p))
    d = fr.to_json()
    assert (d["outcome"], d["error_type"]) == ("failed", "server_error")
    alone = tmp_path / "failed.jsonl"
    alone.write_text("\n".join(_ws_response(bad, terminal="response.failed")) + "\n")
    expected_class = offline.analyse(str(alone)).to_json()["error_class"]
    assert expected_class is not None and d["error_class"] == expected_class
    assert (d["responses"], d["responses_dropped"], len(d["lanes"])) == (n, n - cap, cap)
    assert [x["response_id"] for x in d["lanes"]] == [f"resp_{i}" for i in range(cap)]
    assert (d["events"], d["deltas"]) == (3 * n, n)
    assert (d["usage"]["input_tokens"], d["usage"]["output_tokens"]) == (n, 2 * n)
    assert d["response_model"] == "m0" and "lanes_evicted" not in d
    assert len(d["finish_reasons"]) == cap  # a list: from the listed responses, like `anomalies`
    text = fr.to_text()
    assert text.startswith(f"{p}: failed  responses_websocket  {n} responses on 1 lane\n")
    assert text.endswith(f"… {n - cap} more responses not listed")
    assert check(capsys, "--strict", str(p))[0] == 1


def test_websocket_open_lanes_are_bounded(tmp_path: Path) -> None:
    """Issue 21 (7): at most MAX_OPEN_LANES lanes are followed at once; a new lane beyond that ends the longest-idle
    one (its open response is reported cut and counted in `lanes_evicted`), so memory does not grow with the lanes
    of a transcript. A lane fed again stays followed, and a lane answering after its requests stays matched."""
    cap = offline.MAX_OPEN_LANES
    extra = 76
    lines = [json.dumps({"type": "response.create", "stream_id": "kept"}),
             _ws_response(0, "kept")[0]]  # fmt: skip
    for i in range(1, cap + extra + 1):
        lines.append(_ws_response(i, f"s{i}")[0])  # response.created only: the response stays open
        if i % 100 == 0:
            lines.append(_ws_response(0, "kept")[1])  # "kept" is fed now and then: never the longest idle
    lines.append(_ws_response(0, "kept")[2])
    p = tmp_path / "ws.jsonl"
    p.write_text("\n".join(lines) + "\n")
    fr = offline.analyse(str(p))
    d = fr.to_json()
    n = cap + extra + 1
    assert (d["responses"], d["events"]) == (n, n + 1 + (cap + extra) // 100)
    assert d["lanes_evicted"] == n - cap  # n lanes, cap of them still followed at the end
    lanes = d["lanes"]
    assert lanes[0]["stream_id"] == "kept" and lanes[0]["outcome"] == "completed"
    assert [x["stream_id"] for x in lanes[1:]] == [f"s{i}" for i in range(1, len(lanes))]
    assert {x["outcome"] for x in lanes[1:]} == {"cut"}
    assert fr.to_text().splitlines()[-1] == (
        f"  … {n - cap} responses ended as cut: their lane idled while more than {cap} lanes were open"
    )


# --- the CLI contract ------------------------------------------------------------------------------------------
def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = offline.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_single_file_keys(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "responses-seq-dup-gap.sse")
    rc, out, err = check(capsys, "--json", path)
    assert rc == 0 and err == ""
    d = json.loads(out)
    assert isinstance(d, dict) and set(d) >= DESIGN_KEYS and d["file"] == path
    assert set(d["sequence"]) >= SEQUENCE_KEYS and set(d["usage"]) == USAGE_KEYS
    assert set(d["anomalies"][0]) == {"kind", "event_index", "detail"}


def test_json_several_files_is_an_array_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(FIXTURES / n) for n in ("chat-cut.sse", "messages-cut.sse", "responses-completed.sse")]
    rc, out, _ = check(capsys, "--json", *files)
    docs = json.loads(out)
    assert rc == 0 and [d["file"] for d in docs] == files
    assert [d["outcome"] for d in docs] == ["cut", "cut", "completed"]


def test_strict(capsys: pytest.CaptureFixture[str]) -> None:
    ok = str(FIXTURES / "responses-completed.sse")
    assert check(capsys, "--strict", ok)[0] == 0
    assert check(capsys, "--strict", ok, str(FIXTURES / "chat-cut.sse"))[0] == 1
    assert check(capsys, "--strict", str(FIXTURES / "websocket-lanes.jsonl"))[0] == 1
    assert check(capsys, str(FIXTURES / "chat-cut.sse"))[0] == 0  # without --strict a cut is still exit 0


def test_bad_file_is_exit_2_and_others_still_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.sse"
    empty.write_bytes(b"")
    good = str(FIXTURES / "chat-cut.sse")
    rc, out, err = check(capsys, "--strict", str(empty), good)
    assert rc == 2  # 2 wins over --strict's 1
    assert err == f"otelstream check: {empty}: empty file\n"
    assert out.startswith(f"{good}: cut")
    rc, out, err = check(capsys, "--json", str(empty), good)
    docs = json.loads(out)
    assert rc == 2 and docs[0] == {"file": str(empty), "error": "empty file"} and docs[1]["outcome"] == "cut"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (bytes(range(256)) * 4, "binary data"),
        (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "binary data"),
        (b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>", "an HTML page"),
        (b"  \n<html><head><title>Error</title>", "an HTML page"),
        (b'data: {"a": "caf\xe9"}\n\n', "invalid UTF-8 at byte 16"),
        (b'{"error": {"message": "Invalid API key", "type": "invalid_request_error"}}', "a JSON document"),
        (b"hello world\nthis is not a stream\n", "no SSE events"),
        (b"data: hello\n\ndata: world\n\n", "no JSON event payloads"),
        (b'data: {"foo": 1}\n\n', "cannot tell the surface"),
        (b": keepalive\n\n: keepalive\n\n", "no SSE events"),
        (b"\x1f\x8b\x08\x00garbage", "corrupt gzip data"),
    ],
)
def test_bad_inputs_one_line_no_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, reason: str
) -> None:
    p = tmp_path / "bad.sse"
    p.write_bytes(content)
    rc, out, err = check(capsys, str(p))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"otelstream check: {p}: ") and reason in err, err
    assert "Traceback" not in err


def test_missing_file_and_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = check(capsys, str(tmp_path / "nope.sse"), str(tmp_path))
    assert rc == 2
    assert err.splitlines() == [f"otelstream check: {tmp_path / 'nope.sse'}: no such file",
                                f"otelstream check: {tmp_path}: is a directory, not a file"]  # fmt: skip


def test_unsupported_legacy_complete(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "complete.sse"
    p.write_bytes(b'event: completion\r\ndata: {"type": "completion", "completion": "Hi", "stop_reason": null}\r\n\r\n')
    rc, _, err = check(capsys, str(p))
    assert rc == 2 and "unsupported surface" in err


def test_gzip_body_is_decompressed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "body.sse"
    p.write_bytes(gzip.compress((FIXTURES / "messages-completed-cache.sse").read_bytes()))
    rc, out, _ = check(capsys, str(p))
    assert rc == 0 and ": completed  messages" in out


def test_forced_surface(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "responses-payloads.payloads.jsonl")
    rc, out, _ = check(capsys, "--json", "--surface", "responses", path)
    assert rc == 0 and json.loads(out)["outcome"] == "failed"
    # a chat body read as Messages: nothing it knows, reported as a cut stream with unknown events, not a crash
    rc, out, _ = check(capsys, "--json", "--surface", "messages", str(FIXTURES / "chat-completed-usage.sse"))
    d = json.loads(out)
    assert rc == 0 and d["outcome"] == "cut" and d["anomaly_counts"]["unknown_event"] == 5


def test_bom_and_crlf(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "bom.sse"
    p.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "responses-keepalive-crlf.sse").read_bytes())
    rc, out, _ = check(capsys, str(p))
    assert rc == 0 and "completed" in out and "keepalives=3" in out


def test_human_output(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = check(capsys, str(FIXTURES / "responses-seq-dup-gap.sse"), str(FIXTURES / "chat-inband-error.sse"))
    lines = out.splitlines()
    assert rc == 0 and len(lines) == 2
    assert "completed  responses  events=8 deltas=3" in lines[0] and "gaps=1 skipped=1 duplicates=1" in lines[0]
    assert "error  chat_completions" in lines[1] and "error_type=server_error" in lines[1]


def test_bundled_examples(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(p) for p in example_paths()]
    assert len(files) == 3
    rc, out, _ = check(capsys, "--json", *files)
    got = {Path(d["file"]).name: d["outcome"] for d in json.loads(out)}
    assert rc == 0 and got == {"responses-completed.sse": "completed", "chat-cut.sse": "cut",
                               "messages-overloaded.sse": "error"}  # fmt: skip


# --- cut at every event boundary ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n in sorted(EXPECTED) if n.endswith(".sse")])
def test_cut_at_every_event_boundary(name: str, tmp_path: Path) -> None:
    body = (FIXTURES / name).read_bytes().replace(b"\r\n", b"\n")
    full = offline.analyse(str(FIXTURES / name))
    boundaries = [i + 2 for i in range(len(body)) if body[i : i + 2] == b"\n\n"]
    last_events = -1
    for end in boundaries:
        p = tmp_path / f"cut-{end}.sse"
        p.write_bytes(body[:end])
        try:
            r = offline.analyse(str(p)).reports[0]
        except offline.CheckError as exc:  # only a prefix without any JSON event may be refused
            assert "no JSON" in str(exc) or "no SSE events" in str(exc) or "cannot tell" in str(exc)
            continue
        assert r.outcome in names.OUTCOMES
        assert r.events >= last_events
        last_events = r.events
        if end < boundaries[-1] and full.reports[0].outcome == names.COMPLETED:
            # a prefix of a completed stream is never an error, and completes only once its terminal condition is in
            assert r.outcome in (names.COMPLETED, names.CUT)
    assert r.outcome == full.reports[0].outcome


# --- subprocess: the real entry points ---------------------------------------------------------------------
def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([*argv], capture_output=True, text=True, env=env, timeout=60, check=False)


def test_subprocess_module_entry_point(tmp_path: Path) -> None:
    bad = tmp_path / "junk.sse"
    bad.write_bytes(os.urandom(64) + b"\0")
    proc = _run(sys.executable, "-m", "otelstream.offline", "--json", str(FIXTURES / "chat-cut.sse"), str(bad))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"otelstream check: {bad}: binary data, not a text stream body"
    assert [d.get("outcome") for d in json.loads(proc.stdout)] == ["cut", None]


def test_subprocess_otelstream_check() -> None:
    proc = _run(sys.executable, "-m", "otelstream.cli", "check", "--strict", *(str(p) for p in example_paths()))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stdout.splitlines()) == 3
