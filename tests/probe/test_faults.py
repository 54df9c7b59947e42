"""Every fault of issue 28 on every surface, through the probe against a scripted server: the row says what the
server did, the verdict applies the rules, and ``--strict`` exits 1 exactly where a request did not complete or an
anomaly was seen."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import pytest

from otelstream import names
from otelstream.probe import requests
from otelstream.probe.config import Target
from tests.probe import faults as F
from tests.probe.conftest import run_probe, target_url
from tests.support.scripted_server import ScriptedServer
from tests.support.sdk_features import OPENAI_WEBSOCKET_OBSERVED, WITHOUT_WEBSOCKET

FAIL, NOTE = names.VERDICT_FAIL, names.VERDICT_NOTE
BEFORE, DURING = names.PHASE_BEFORE_OUTPUT, names.PHASE_DURING_OUTPUT
_CHUNKED = (names.CHAT_COMPLETIONS, names.COMPLETIONS)
_SEQUENCED = (names.RESPONSES, names.RESPONSES_WEBSOCKET)
WS = names.RESPONSES_WEBSOCKET


@dataclass(frozen=True)
class Expect:
    outcome: str
    error_class: str | None = None
    error_type: str | None = None
    phase: str | None = None
    findings: tuple[tuple[str, str], ...] = ()  # (code, level)

    @property
    def strict_rc(self) -> int:
        return 1 if any(level == FAIL for _, level in self.findings) else 0


COMPLETED = Expect(names.COMPLETED)


def _completed_but(code: str, level: str = FAIL) -> Expect:
    return Expect(names.COMPLETED, findings=((code, level),))


def expected(surface: str, fault: str) -> Expect:
    """What the contract says the probe must report; a fault the surface's protocol lacks is a healthy body."""
    not_completed = ((names.VERDICT_NOT_COMPLETED, FAIL),)
    if fault == F.CUT:
        return Expect(names.CUT, names.EC_CUT, None, DURING, not_completed)
    if fault == F.RESET:
        # reset after two frames: chat and completions had sent a delta by then, the others had not
        return Expect(names.TRANSPORT_ERROR, names.EC_CONNECTION, "websocket_close_1006" if surface == WS else None,
                      DURING if surface in _CHUNKED else BEFORE, not_completed)  # fmt: skip
    if fault == F.INBAND_ERROR:
        if surface == names.MESSAGES:
            return Expect(names.ERROR, names.EC_OVERLOADED, "overloaded_error", DURING,
                          ((names.VERDICT_INBAND_ERROR, FAIL),))  # fmt: skip
        return Expect(names.ERROR, names.EC_SERVER_ERROR, "server_error", DURING, ((names.VERDICT_INBAND_ERROR, FAIL),))
    if fault == F.HTTP_429:
        code = {names.MESSAGES: "rate_limit_error", WS: "429"}.get(surface, "rate_limit_exceeded")
        return Expect(names.HTTP_ERROR, names.EC_RATE_LIMITED, code, BEFORE, not_completed)
    if fault == F.HTTP_503:
        return Expect(names.HTTP_ERROR, names.EC_OVERLOADED, "503", BEFORE, not_completed)
    if fault == F.KEEPALIVE_GAP:
        return COMPLETED if surface == WS else _completed_but(names.VERDICT_KEEPALIVE_GAP)
    if fault == F.MISSING_DONE:
        return _completed_but(names.ANOM_MISSING_DONE) if surface in _CHUNKED else COMPLETED
    if fault == F.MISSING_USAGE:
        return _completed_but(names.VERDICT_NO_USAGE)
    if fault == F.SEQUENCE_GAP:
        return _completed_but(names.ANOM_SEQUENCE_GAP) if surface in _SEQUENCED else COMPLETED
    if fault == F.SLOW_FIRST:
        return _completed_but(names.VERDICT_SLOW_FIRST_DELTA, NOTE)
    if fault == F.SILENT_WAIT:
        return _completed_but(names.VERDICT_SILENT_WAIT)
    if fault == F.PAST_TIMEOUT:
        if surface == WS:  # no read timeout in the SDK's WebSocket mode: the probe's own deadline ends it
            return Expect(names.ABANDONED, findings=not_completed)
        return Expect(names.TRANSPORT_ERROR, names.EC_TIMEOUT, None, BEFORE, not_completed)
    return COMPLETED


def _skip_without_websocket_mode(surface: str) -> None:
    """Skipped when the installed releases lack WebSocket mode, as the tests read it; otherwise the probe must agree
    (a probe that wrongly says "not installed" fails here rather than skipping the row)."""
    if surface == WS:
        if not OPENAI_WEBSOCKET_OBSERVED or importlib.util.find_spec("websockets") is None:
            pytest.skip(WITHOUT_WEBSOCKET)
        requests.require_sdk(Target("t", "ws://x", WS, "m"))


@pytest.mark.parametrize("fault", F.FAULTS)
@pytest.mark.parametrize("surface", names.OPENAI_ANTHROPIC_SURFACES)
def test_row_verdict_and_strict(surface: str, fault: str, scripted: ScriptedServer,
                                request: pytest.FixtureRequest) -> None:  # fmt: skip
    _skip_without_websocket_mode(surface)
    want = expected(surface, fault)
    ws_server = request.getfixturevalue("ws_scripted") if surface == WS else None  # needs websockets
    url = target_url(surface, fault, scripted, ws_server)
    run = run_probe("--base-url", url, "--surface", surface, "--model", "m", "--requests", "1", "--json",
                    "--strict", *F.FLAGS.get(fault, ["--timeout", "10"]))  # fmt: skip
    assert run.rc == want.strict_rc, run.out + run.err
    target = run.json()["targets"][0]
    row = target["rows"][0]
    assert (row["outcome"], row["error_class"], row["error_type"], row["failure_phase"]) == (
        want.outcome, want.error_class, want.error_type, want.phase)  # fmt: skip
    findings = [(f["code"], f["level"]) for f in target["verdict"]["findings"]]
    assert findings == list(want.findings), target["verdict"]
    assert target["verdict"]["ok"] is (want.strict_rc == 0)
    assert target["summary"]["outcomes"] == {want.outcome: 1}
    _measures(surface, fault, row)


def _measures(surface: str, fault: str, row: dict[str, Any]) -> None:
    """The measures each fault moves, as the row shows them."""
    refused_handshake = surface == WS and fault in (F.HTTP_429, F.HTTP_503)
    assert row["observed"] is not refused_handshake
    if refused_handshake:  # no response began, so no otelstream report: the probe's own row, and it says so
        assert row["note"] and "handshake" in row["note"] and row["raised"] == "InvalidStatus"
        return
    assert row["request_id"] == (None if surface == WS else "req_scripted")
    if row["outcome"] == names.COMPLETED:
        assert row["deltas"] == (1 if fault == F.SEQUENCE_GAP and surface in _SEQUENCED else 2)
        assert row["time_to_first_event_s"] is not None
        assert row["time_to_first_output_s"] == row["time_to_first_delta_s"] is not None
    if fault in (F.SLOW_FIRST, F.SILENT_WAIT):
        assert row["time_to_first_delta_s"] >= F.PAUSE_S - 0.05
        assert row["max_wait_s"] >= F.PAUSE_S - 0.05
    if fault == F.KEEPALIVE_GAP and surface != WS:
        assert row["keepalives"] == 2 and row["max_keepalive_gap_s"] >= F.PAUSE_S - 0.05
    if fault == F.OK:
        assert row["usage_reported"] is True and row["anomalies"] == {} and row["sequence_anomalies"] == {}
        assert row["done_sentinel"] is (surface in _CHUNKED)
    if fault == F.MISSING_DONE and surface in _CHUNKED:
        assert row["done_sentinel"] is False and row["anomalies"] == {names.ANOM_MISSING_DONE: 1}
    if fault == F.MISSING_USAGE:
        assert row["usage_reported"] is False
        assert row["anomalies"] == ({names.ANOM_USAGE_MISSING: 1} if surface in _CHUNKED else {})
    if fault == F.SEQUENCE_GAP and surface in _SEQUENCED:
        assert row["sequence_anomalies"] == {names.SEQ_GAP: 1} and row["sequence"]["skipped"] == 1
    if fault in (F.CUT, F.INBAND_ERROR):
        assert row["deltas"] >= 1
    if fault == F.PAST_TIMEOUT:
        assert row["timed_out"] is (surface == WS)
        # the SDK's own timeout error (openai 2.x lets httpx's through mid-body)
        assert row["raised"] in ((None,) if surface == WS else ("APITimeoutError", "ReadTimeout"))
