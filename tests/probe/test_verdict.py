"""Verdict rules the fault matrix does not reach: a finish reason missing before ``[DONE]``, an in-band error a client
cannot read, a stream that trickles past the probe's deadline, and requests kept within --concurrency."""

from __future__ import annotations

from typing import Any

from otelstream import names
from tests.probe import faults as F
from tests.probe.conftest import http_url, run_probe
from tests.support import bodies
from tests.support.scripted_server import Pause, ScriptedServer, Step


def _probe(scripted: ScriptedServer, surface: str, steps: list[Step], *argv: str) -> tuple[int, Any]:
    url = http_url(scripted, surface, scripted.add(steps))
    run = run_probe("--base-url", url, "--surface", surface, "--model", "m", "--json", "--strict", *argv)
    return run.rc, run.json()["targets"][0]


def test_finish_reason_missing(scripted: ScriptedServer) -> None:
    frames = [f for f in bodies.chat("ok") if b'"finish_reason": "stop"' not in f]
    rc, target = _probe(scripted, names.CHAT_COMPLETIONS, frames, "--requests", "1")
    assert rc == 1
    assert target["verdict"]["findings"] == [{
        "code": names.ANOM_MISSING_FINISH_REASON, "level": names.VERDICT_FAIL, "requests": 1,
        "detail": "finish_reason missing on a choice"}]  # fmt: skip


def test_an_inband_error_without_code_or_type(scripted: ScriptedServer) -> None:
    frames = [*bodies.chat("ok")[:2], bodies.sse({"error": {"message": "something broke"}})]
    rc, target = _probe(scripted, names.CHAT_COMPLETIONS, frames, "--requests", "1")
    assert rc == 1
    (finding,) = target["verdict"]["findings"]
    assert finding["code"] == names.VERDICT_INBAND_ERROR
    assert finding["detail"] == ("in-band error after HTTP 200 with no code or type: clients cannot tell what failed, "
                                 "during output")  # fmt: skip


def test_a_stream_trickling_past_the_deadline_is_ended(scripted: ScriptedServer) -> None:
    """Keepalives every 0.2 s keep every read under the SDK's 0.5 s timeout: the probe's own bound (timeout + 1 s)
    ends it, and otelstream reports the cancelled stream abandoned."""
    frames = bodies.chat("ok")
    trickle: list[Step] = [frames[0]]
    for _ in range(12):
        trickle += [bodies.KEEPALIVE, Pause(0.2)]
    rc, target = _probe(scripted, names.CHAT_COMPLETIONS, [*trickle, *frames[1:]], "--requests", "1",
                        "--timeout", "0.5")  # fmt: skip
    assert rc == 1
    row = target["rows"][0]
    assert (row["outcome"], row["timed_out"]) == (names.ABANDONED, True)
    assert 5 <= row["keepalives"] < 12  # the server was still talking, and the probe ended it before the body's end
    assert [f["code"] for f in target["verdict"]["findings"]] == [names.VERDICT_NOT_COMPLETED]


def test_concurrency_bounds_the_requests_open_at_once(scripted: ScriptedServer) -> None:
    steps = F.http_script(names.RESPONSES, F.SLOW_FIRST).steps  # each answer waits PAUSE_S before its first delta
    key = scripted.add(steps)
    run = run_probe("--base-url", http_url(scripted, names.RESPONSES, key), "--surface", names.RESPONSES, "--model",
                    "m", "--json", "--strict", "--requests", "6", "--concurrency", "3")  # fmt: skip
    target = run.json()["targets"][0]
    assert run.rc == 0 and target["summary"]["outcomes"] == {names.COMPLETED: 6}
    assert 1 < scripted.most_open(key) <= 3  # side by side, never more than three (the server counted)
    assert [r["request"] for r in target["rows"]] == [1, 2, 3, 4, 5, 6]


def test_measures_the_sdk_hides_are_a_note_not_a_failure() -> None:
    """A patch point missing from the installed SDK leaves measures unknown: the verdict says which, and does not fail
    on what it could not see."""
    from otelstream.core.report import Usage
    from otelstream.probe import verdict
    from otelstream.probe.config import RunOptions
    from otelstream.probe.runner import Row

    seen = Row("t", 1, names.CHAT_COMPLETIONS, names.COMPLETED, usage=Usage(3, 2), done_sentinel=True)
    hidden = Row("t", 2, names.CHAT_COMPLETIONS, names.COMPLETED, usage=Usage(3, 2), done_sentinel=None,
                 unobserved=(names.MEASURE_DONE_SENTINEL, names.MEASURE_KEEPALIVES))  # fmt: skip
    result = verdict.judge([seen, hidden], RunOptions())
    assert result.ok
    assert [f.to_json() for f in result.findings] == [{
        "code": names.VERDICT_UNOBSERVED, "level": names.VERDICT_NOTE, "requests": 1,
        "detail": "not observable with the installed SDK release: done_sentinel, keepalives"}]  # fmt: skip
