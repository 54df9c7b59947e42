"""The doctor's result as text (one row per cell, then the patch points, the notes and a verdict) or as one JSON
object. Only measures are printed: no body, prompt or output text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from otelstream import accelerator
from otelstream.doctor.runner import Result, Row
from otelstream.doctor.versions import one_line

# (column title, measure): the measures every row shows
_COLUMNS: Final = (
    ("outcome", "outcome"),
    ("class", "error_class"),
    ("reason", "abandoned_reason"),
    ("ttfd", "ttfd"),
    ("events", "events"),
    ("deltas", "deltas"),
    ("keepalives", "keepalives"),
    ("usage in/out", "usage"),
    ("gaps", "sequence_gaps"),
    ("[DONE]", "done_sentinel"),
    ("anomalies", "anomalies"),
)


def _value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        if len(value) == 2 and all(v is None or isinstance(v, int) for v in value):
            return "/".join(_value(v) for v in value)
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def _cell(row: Row, measure: str) -> str:
    if row.observed is None:
        return "?" if measure == "outcome" else ""
    shown = _value(row.observed.get(measure))
    if measure in row.mismatches:
        return f"{shown} (want {_value(row.expected[measure])})"
    return shown if measure in row.expected else f"({shown})"  # in brackets: shown, not compared


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def text(result: Result) -> str:
    lines = [f"otelstream doctor: {one_line(result.versions)}", f"per-event path: {accelerator.describe()}", ""]
    if result.rows:
        table: list[list[str]] = [["result", "surface", "mode", "fault", *(t for t, _ in _COLUMNS)]]
        for row in result.rows:
            verdict = "ok" if row.ok else "MISMATCH"
            table.append([verdict, row.cell.label, row.cell.mode, row.cell.fault.name,
                          *(_cell(row, m) for _, m in _COLUMNS)])  # fmt: skip
        lines.extend(_table(table))
        for row in result.rows:
            if row.problem is not None:
                lines.append(f"  {row.cell.key}: {row.problem}")
        unobserved = [r for r in result.rows if "unobserved" in r.mismatches]
        for row in unobserved:
            assert row.observed is not None
            lines.append(f"  {row.cell.key}: unobserved measures {', '.join(row.observed['unobserved'])}")
    else:
        lines.append("no cell ran")
    for why in result.unchecked:
        lines.append(f"NOT CHECKED: {why}")
    lines.append("")
    if result.missing:
        for point in result.missing:
            lines.append(f"MISSING patch point {point.point} ({point.effect}; {', '.join(point.scopes)})")
    else:
        lines.append("patch points: every one otelstream needs was found in the installed SDKs")
    for note in result.notes:
        lines.append(f"note: {note}")
    if result.interrupted:
        lines.append("INTERRUPTED: instrumentation changed during the run (the rows above prove nothing)")
    failed = result.failed
    verdict = "all held" if result.ok else "MISMATCH" if result.wrong else "NOT CHECKED"
    summary = f"{len(result.rows)} cells, {len(result.rows) - len(failed)} held, {len(failed)} mismatched"
    if result.missing:
        summary += f"; {len(result.missing)} patch point(s) missing"
    if result.unchecked:
        summary += f"; {len(result.unchecked)} asked not checked"
    lines.append(f"{verdict}: {summary} ({result.seconds:.1f} s)")
    if result.wrong:
        lines.append("otelstream's numbers for the mismatched cells are not to be trusted on this stack: please report "
                     "this output (it carries no content) with the versions above.")  # fmt: skip
    return "\n".join(lines)


def to_json(result: Result) -> dict[str, Any]:
    failed = result.failed
    return {
        "ok": result.ok,
        "versions": result.versions,
        "seconds": round(result.seconds, 3),
        "summary": {
            "cells": len(result.rows),
            "held": len(result.rows) - len(failed),
            "mismatched": len(failed),
            "missing_patch_points": len(result.missing),
        },
        "cells": [row.to_json() for row in result.rows],
        "missing_patch_points": [p.to_json() for p in result.missing],
        "notes": list(result.notes),
        "interrupted": result.interrupted,
        "unchecked": list(result.unchecked),
    }


def json_text(result: Result) -> str:
    return json.dumps(to_json(result), indent=2)
