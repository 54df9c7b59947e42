"""``otelstream doctor``: the fault matrix through the installed SDKs. Every cell holds on this stack;
the CLI's exit codes and JSON shape; a difference in any measure is named; the doctor's streams stay out of the
application's spans and series, and the patches are left as the doctor found them.

(A renamed patch point makes the doctor exit 1 naming it: tests/reliability/test_sdk_renames.py.)
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from otelstream import cli, names
from otelstream.adapters._patch import PATCHER
from otelstream.adapters.calls import RUNTIME
from otelstream.core.report import StreamReport, Usage
from otelstream.doctor import bedrock_cells, clients, faults, render, runner
from otelstream.doctor.routing import DoctorListener
from tests.support.instrumented import instrumented
from tests.support.paths import REPO

CELLS = runner.cells()
MEASURES = {"outcome", "error_class", "abandoned_reason", "ttfd", "events", "deltas", "keepalives", "usage",
            "sequence_gaps", "done_sentinel", "anomalies", "unobserved", "reported_at_close"}  # fmt: skip


@pytest.fixture(scope="module")
def result() -> Iterator[runner.Result]:
    yield runner.run()


def test_every_installed_surface_sync_and_async_with_every_fault() -> None:
    surfaces = {c.surface for c in CELLS}
    assert surfaces == {*faults.SURFACES, names.CONVERSE}  # every SDK is installed in the test environment
    for surface in faults.SSE_SURFACES:
        for mode in faults.MODES:
            have = {c.fault.name for c in CELLS if (c.surface, c.mode, c.via) == (surface, mode, "")}
            want = {f.name for f in faults.FAULTS if surface in f.surfaces and mode in f.modes}
            assert have == want and len(have) >= (12 if surface == names.GENERATE_CONTENT else 14), (surface, mode)


def test_generate_content_cells_and_the_self_checks_couple() -> None:
    """Gemini's rows: every fault but keepalives and a close before reading (no request is sent before the first
    pull), and the runtime self-check adds only a couple of cells for it."""
    gemini = {(c.fault.name, c.mode) for c in CELLS if c.surface == names.GENERATE_CONTENT}
    assert {"keepalives", "close"}.isdisjoint(name for name, _ in gemini)
    assert {("cut", faults.SYNC), ("cancel", faults.ASYNC), ("http_429", faults.ASYNC)} <= gemini
    small = {(c.fault.name, c.mode) for c in runner.cells([names.GENERATE_CONTENT], small=True)}
    assert small == set(faults.GEMINI_SMALL)


def test_doctor_surface_generate_content_exits_0() -> None:
    out = subprocess.run([sys.executable, "-m", "otelstream.cli", "doctor", "--surface", "generate_content", "--json"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert {row["surface"] for row in doc["cells"]} == {names.GENERATE_CONTENT}
    assert doc["summary"]["mismatched"] == 0 and doc["summary"]["cells"] == 25


@pytest.mark.parametrize("cell", CELLS, ids=[c.key for c in CELLS])
def test_cell_holds(result: runner.Result, cell: runner.Cell) -> None:
    row = next(r for r in result.rows if r.cell == cell)
    assert row.ok, (row.problem, {m: (row.expected[m], row.observed and row.observed[m]) for m in row.mismatches})


def test_no_patch_point_missing_and_websocket_said_not_covered(result: runner.Result) -> None:
    assert result.missing == []
    assert any(names.RESPONSES_WEBSOCKET in note and "not covered" in note for note in result.notes)
    assert set(result.versions) == {"python", "openai", "anthropic", "google-genai", "httpx2", "httpx", "aiohttp",
                                    "botocore", "aiobotocore", "otelstream"}  # fmt: skip
    assert all(result.versions[k] for k in ("python", "openai", "anthropic", "httpx2", "otelstream"))


def test_converse_cells_sync_and_async() -> None:
    """Bedrock's ConverseStream through boto3 and aiobotocore, served in-process: every fault the wire has."""
    from otelstream.doctor import bedrock_cells

    for mode in faults.MODES:
        have = {c.fault.name for c in CELLS if (c.surface, c.mode) == (names.CONVERSE, mode)}
        want = {name for name in bedrock_cells.FAULT_NAMES if mode in faults.BY_NAME[name].modes}
        assert have == want and len(have) >= 11, mode


def test_messages_through_bedrock_invoke_cells_sync_and_async() -> None:
    """An Anthropic model's invoke stream is a ``messages`` stream: its cells run beside the anthropic SDK's, under
    keys of their own (each is checked by ``test_cell_holds``), in the full doctor only (not the self-check's)."""
    from otelstream.doctor import bedrock_cells

    for mode in faults.MODES:
        have = {c.fault.name for c in CELLS if (c.surface, c.mode, c.via) == (names.MESSAGES, mode, "invoke")}
        assert have == {name for name in bedrock_cells.FAULT_NAMES if mode in faults.BY_NAME[name].modes}, mode
    assert len({c.key for c in CELLS}) == len(CELLS)
    assert not any(c.via for c in runner.cells(small=True))
    assert all(c.via for c in runner.cells([names.MESSAGES]) if c.key.startswith("messages+invoke/"))


def test_invoke_cells_expect_the_messages_rules() -> None:
    """What the invoke cells must report, read by hand: message_start's usage (5 in, 1 out) stays on a stream that
    ends early; message_delta's output count (2) replaces it on a whole one."""
    by = {(c.fault.name, c.mode): runner.expected_of(c, None) for c in CELLS if c.via}
    assert by[("completed", faults.SYNC)] == {"outcome": names.COMPLETED, "error_class": None,
                                                   "abandoned_reason": None, "ttfd": True, "events": 7, "deltas": 2,
                                                   "usage": [5, 2], "unobserved": []}  # fmt: skip
    assert by[("cut", faults.SYNC)]["usage"] == [5, 1] and by[("cut", faults.SYNC)]["outcome"] == names.CUT
    assert by[("cancel", faults.ASYNC)]["events"] == 1 and by[("cancel", faults.ASYNC)]["ttfd"] is False


def test_gemini_error_dropped_by_the_sdk_is_expected_cut() -> None:
    """A google-genai release that drops an in-band error object (before 1.50) hands the caller a stream that ends
    without its finish: the cell then expects ``cut``, and the run says why in a note."""
    cell = next(c for c in CELLS if c.surface == names.GENERATE_CONTENT and c.fault.name == "error_after_output")
    served = runner.bodies.serve(cell.surface, cell.fault)
    assert runner.expected_of(cell, served)["outcome"] == names.ERROR
    dropped = runner.expected_of(cell, served, dropped=True)
    assert (dropped["outcome"], dropped["error_class"]) == (names.CUT, names.EC_CUT)


def test_doctor_surface_converse_exits_0() -> None:
    out = subprocess.run([sys.executable, "-m", "otelstream.cli", "doctor", "--surface", "converse", "--json"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = json.loads(out.stdout)["cells"]
    assert {r["surface"] for r in rows} == {names.CONVERSE} and all(r["ok"] for r in rows) and len(rows) == 23


def _report(**fields: object) -> StreamReport:
    base: dict[str, object] = {"surface": names.CHAT_COMPLETIONS, "provider": "openai", "outcome": names.CUT,
                               "error_class": names.EC_CUT, "time_to_first_delta_ns": 5, "events": 3,
                               "deltas": 2}  # fmt: skip
    base.update(fields)
    return StreamReport(**base)  # type: ignore[arg-type]


def test_compare_names_each_measure_that_differs() -> None:
    cell = next(c for c in CELLS if c.key == "chat_completions/async/cut")
    expected = runner.expected_of(cell, runner.bodies.serve(cell.surface, cell.fault))
    assert runner.compare(cell, expected, [_report()]).ok
    wrong = _report(outcome=names.ABANDONED, error_class=None, abandoned_reason=names.ABANDON_CLOSE,
                    usage=Usage(1, 2), unobserved=(names.MEASURE_KEEPALIVES,))  # fmt: skip
    row = runner.compare(cell, expected, [wrong])
    assert set(row.mismatches) == {"outcome", "error_class", "abandoned_reason", "usage", "unobserved"}
    assert "abandoned (want cut)" in render.text(runner.Result(rows=[row]))
    assert runner.compare(cell, expected, []).problem == "no report"
    assert runner.compare(cell, expected, [_report(), _report()]).problem == "2 reports for one stream"


def test_json_shape_and_exit_code() -> None:
    """The real command, in a fresh interpreter, as CI runs it."""
    done = subprocess.run([sys.executable, "-m", "otelstream.cli", "doctor", "--json"], capture_output=True,
                          text=True, cwd=REPO, timeout=120)  # fmt: skip
    doc = json.loads(done.stdout)
    assert set(doc) == {"ok", "versions", "seconds", "summary", "cells", "missing_patch_points", "notes", "interrupted",
                        "unchecked"}  # fmt: skip
    assert done.returncode == (0 if doc["ok"] else 1), done.stderr
    assert len(doc["cells"]) == len(CELLS) == doc["summary"]["cells"]
    for row in doc["cells"]:
        assert set(row) == {"surface", "via", "mode", "fault", "ok", "expected", "observed", "mismatches", "problem"}
        assert row["via"] in (None, "invoke")
        assert {"outcome", "error_class", "abandoned_reason", "ttfd", "deltas", "usage"} <= set(row["expected"])
        assert set(row["expected"]) <= MEASURES and set(row["observed"]) == MEASURES
        assert row["ok"] == (not row["mismatches"] and row["problem"] is None)
    assert done.returncode == 0 and doc["ok"] is True, [row for row in doc["cells"] if not row["ok"]]
    assert doc["summary"]["mismatched"] == len([r for r in doc["cells"] if not r["ok"]])
    assert doc["missing_patch_points"] == [] and doc["interrupted"] is False


def test_text_output_and_surface_choice(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["doctor", "--surface", names.MESSAGES, "--surface", names.RESPONSES_WEBSOCKET])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("ok ", "MISMATCH "))]
    assert len(rows) == len([c for c in CELLS if c.surface == names.MESSAGES])
    assert all(f" {names.MESSAGES} " in line or f" {names.MESSAGES}+invoke " in line for line in rows)
    assert len([line for line in rows if f" {names.MESSAGES}+invoke " in line]) == 23  # Bedrock's, sync and async
    assert "anthropic" in out.splitlines()[0] and "httpx2" in out.splitlines()[0]
    assert "patch points: every one otelstream needs was found" in out
    # every cell held, but the WebSocket surface asked has no cells: not "all held", exit 2
    assert code == 2 and all(line.startswith("ok ") for line in rows)
    assert out.strip().splitlines()[-1].startswith(
        f"NOT CHECKED: {len(rows)} cells, {len(rows)} held, 0 mismatched; 1 asked not checked")
    assert cli.main(["doctor", "--surface", names.MESSAGES]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(f"all held: {len(rows)} cells")


def test_websocket_alone_is_not_checked_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """The doctor has no WebSocket cells: asked for that surface alone, it said "all held: 0 cells" and exited 0
    (and "no SDK installed", with openai installed). A surface asked and not checked is exit 2, said as such."""
    assert cli.main(["doctor", "--surface", names.RESPONSES_WEBSOCKET]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert "no SDK installed" not in "\n".join(lines) and "all held" not in "\n".join(lines)
    assert f"NOT CHECKED: {names.RESPONSES_WEBSOCKET}: the doctor has no cells for it" in lines
    assert lines[-1].startswith("NOT CHECKED: 0 cells, 0 held, 0 mismatched; 1 asked not checked")


def test_websocket_asked_checks_its_patch_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the doctor does check of WebSocket mode: its patch points. A release without one is a mismatch, exit 1
    (before, asking for the WebSocket surface alone checked no SDK's patch points at all)."""
    websocket_connection = pytest.importorskip("openai._websocket_connection")
    base = websocket_connection.WebSocketConnectionBase
    monkeypatch.setattr(base, "send_bytes", base.send_raw, raising=False)
    monkeypatch.delattr(base, "send_raw")  # a release that renamed it
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["doctor", "--json", "--surface", names.RESPONSES_WEBSOCKET])
    doc = json.loads(out.getvalue())
    assert code == 1 and doc["ok"] is False and doc["cells"] == []
    assert [p["point"] for p in doc["missing_patch_points"]] == [
        "openai._websocket_connection.WebSocketConnectionBase.send_raw"]  # fmt: skip
    assert doc["unchecked"] == [f"{names.RESPONSES_WEBSOCKET}: the doctor has no cells for it"]


def test_a_surface_whose_sdk_is_missing_is_not_checked(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setattr(clients, "installed", lambda sdk: sdk != "anthropic")
    # without anthropic, messages streams still come through Bedrock's invoke: those cells check the surface
    assert cli.main(["doctor", "--surface", names.MESSAGES]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("ok ")]
    assert len(rows) == 23 and all(f" {names.MESSAGES}+invoke " in line for line in rows)
    monkeypatch.setattr(bedrock_cells, "installed", lambda: False)
    assert cli.main(["doctor", "--surface", names.MESSAGES]) == 2
    out = capsys.readouterr().out
    assert f"NOT CHECKED: {names.MESSAGES}: the anthropic SDK is not installed" in out.splitlines()
    monkeypatch.setattr(clients, "installed", lambda sdk: False)
    assert cli.main(["doctor"]) == 2
    sdks = ", ".join(sorted(runner._SDKS))
    assert f"NOT CHECKED: every surface: no SDK installed ({sdks})" in capsys.readouterr().out


def test_streams_stay_out_of_the_application_telemetry() -> None:
    with instrumented() as inst:
        pipeline = RUNTIME.listener
        result = runner.run([names.CHAT_COMPLETIONS], small=True)
        assert result.rows and not result.interrupted
        assert RUNTIME.listener is pipeline and PATCHER.active
        assert inst.streams_total() == 0 and inst.finished() == []
        assert inst.sample(names.PROM_STREAMS_ACTIVE) == 0


def test_patches_left_as_found() -> None:
    assert not PATCHER.active and RUNTIME.listener is None
    result = runner.run([names.MESSAGES], small=True)
    assert result.rows and not result.interrupted
    assert not PATCHER.active and RUNTIME.listener is None
    assert not isinstance(RUNTIME.listener, DoctorListener)
