"""The probe's output: a table of rows, the summary and the verdict per target as text, or the same as JSON.

Nothing here can print content, a key or a header value: rows hold measures, codes and types only, and a target is
shown by its name, surface, model and its base URL without user, password, query or fragment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from otelstream import names
from otelstream.probe.runner import Row
from otelstream.probe.verdict import TargetResult

COLUMNS: Final = ("#", "outcome", "class / code", "phase", "TTFD s", "TTFO s", "1st event s", "max wait s",
                  "keepalives (gap s)", "events", "deltas", "usage", "[DONE]", "sequence", "anomalies",
                  "request id")  # fmt: skip
_DONE_SURFACES: Final = (names.CHAT_COMPLETIONS, names.COMPLETIONS)
_SEQ_SHORT: Final = {
    names.SEQ_GAP: "gap",
    names.SEQ_DUPLICATE: "dup",
    names.SEQ_OUT_OF_ORDER: "backwards",
    names.SEQ_BAD_START: "bad start",
    names.SEQ_MISSING: "missing",
}


def _sec(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _done(row: Row) -> str:
    """``[DONE]`` belongs to chat and legacy completions; elsewhere only its presence is news (trailing_done)."""
    if row.surface not in _DONE_SURFACES and not row.done_sentinel:
        return "-"
    return _yes(row.done_sentinel)


def _class_code(row: Row) -> str:
    parts = [p for p in (row.error_class, row.error_type) if p]
    if len(parts) == 2 and parts[0] == parts[1]:
        parts = parts[:1]
    return " ".join(parts) or "-"


def _keepalives(row: Row) -> str:
    if row.keepalives is None:
        return "-"
    gap = row.max_keepalive_gap_s
    return str(row.keepalives) if gap is None else f"{row.keepalives} ({gap:.1f})"


def _sequence(row: Row) -> str:
    counts = row.sequence_counts
    if not counts:
        return "-" if row.sequence is not None else ""
    out = []
    for kind, n in counts.items():
        text = _SEQ_SHORT.get(kind, kind)
        if kind == names.SEQ_GAP and row.sequence is not None:
            text += f" +{row.sequence.skipped}"
        out.append(text if n == 1 else f"{text} x{n}")
    return ", ".join(out)


def _anomalies(row: Row) -> str:
    return ", ".join(kind if n == 1 else f"{kind} x{n}" for kind, n in row.anomalies) or "-"


def _phase(row: Row) -> str:
    return {names.PHASE_BEFORE_OUTPUT: "before", names.PHASE_DURING_OUTPUT: "during"}.get(row.failure_phase or "", "-")


def cells(row: Row) -> list[str]:
    return [
        str(row.index), row.outcome or "(no report)", _class_code(row), _phase(row), _sec(row.time_to_first_delta_s),
        _sec(row.time_to_first_output_s), _sec(row.time_to_first_event_s), _sec(row.max_wait_s), _keepalives(row),
        "-" if row.events is None else str(row.events), "-" if row.deltas is None else str(row.deltas),
        _yes(row.usage_reported), _done(row), _sequence(row) or "-", _anomalies(row),
        row.request_id or "-",
    ]  # fmt: skip


def table(rows: Sequence[Row]) -> list[str]:
    grid = [list(COLUMNS), *(cells(row) for row in rows)]
    widths = [max(len(line[i]) for line in grid) for i in range(len(COLUMNS))]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in grid]


def header(result: TargetResult) -> str:
    t = result.target
    where = f"round {result.round}, " if result.round is not None else ""
    return f"target {t.name}: {where}{t.surface}, model {t.model}, {t.shown_url}"


def summary_line(result: TargetResult) -> str:
    s = result.summary
    outcomes = ", ".join(f"{outcome} {n}" for outcome, n in s.outcomes.items()) or "no request sent"
    ttfd = "TTFD -" if s.ttfd_p50_s is None else f"TTFD p50 {s.ttfd_p50_s:.3f} s, max {s.ttfd_max_s:.3f} s"
    return f"{s.requests} request{'s' if s.requests != 1 else ''}: {outcomes}; {ttfd}"


def verdict_lines(result: TargetResult) -> list[str]:
    v = result.verdict
    lines = [f"verdict: {'conforms' if v.ok else 'FAIL'}" + (" (unreachable)" if v.unreachable else "")]
    for f in v.findings:
        times = f"{f.requests} request{'s' if f.requests != 1 else ''}"
        lines.append(f"  {f.level:<4}  {f.code} ({times}): {f.detail}")
    return lines


def text(results: Sequence[TargetResult]) -> str:
    blocks = []
    for result in results:
        notes = sorted({f"  note: {row.note}" for row in result.rows if row.note})
        lines = [header(result), *("  " + line for line in table(result.rows)), *notes,
                 "summary: " + summary_line(result), *verdict_lines(result)]  # fmt: skip
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def one_line(result: TargetResult) -> str:
    """The monitor's line per target and round: the summary and what failed."""
    failed = [f"{f.code} x{f.requests}" for f in result.verdict.findings if f.level == names.VERDICT_FAIL]
    status = "conforms" if result.ok else "FAIL " + ", ".join(failed)
    return f"{header(result)}: {summary_line(result)}; {status}"


def result_json(result: TargetResult) -> dict[str, Any]:
    t = result.target
    out: dict[str, Any] = {
        "name": t.name, "surface": t.surface, "model": t.model, "base_url": t.shown_url,
        "rows": [row.to_json() for row in result.rows], "summary": result.summary.to_json(),
        "verdict": result.verdict.to_json(),
    }  # fmt: skip
    if result.round is not None:
        out["round"] = result.round
    return out


def json_text(results: Sequence[TargetResult]) -> str:
    return json.dumps({"ok": all(r.ok for r in results), "targets": [result_json(r) for r in results]}, indent=2)


def json_line(result: TargetResult) -> str:
    """The monitor's JSON: one object per target and round, on one line (a log line)."""
    return json.dumps(result_json(result), separators=(",", ":"))
