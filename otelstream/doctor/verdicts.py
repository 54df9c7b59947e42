"""From the runtime self-check's differing cells to the measures later streams report as unknown.

A cell that differs casts doubt on every measure it compares (not only those that differed: they share the code
path that went wrong), for the streams of its SDK and mode. ``publish`` hands them to ``adapters.doubted`` and
returns the WARNING's sentence saying what is now reported unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from otelstream import names
from otelstream.adapters import _patch, doubted
from otelstream.doctor import faults as F
from otelstream.doctor.clients import SDK_BY_SURFACE

if TYPE_CHECKING:
    from otelstream.doctor.runner import Row

# a cell's compared measure -> the MEASURE_* a stream lists in ``unobserved`` ("unobserved" itself: a missing patch
# point, already reported unknown by the patcher)
MEASURE_OF: Final = {
    "outcome": names.MEASURE_OUTCOME,
    "abandoned_reason": names.MEASURE_OUTCOME,
    "error_class": names.MEASURE_ERROR_CLASS,
    "ttfd": names.MEASURE_TIME_TO_FIRST_DELTA,
    "events": names.MEASURE_COUNTS,
    "deltas": names.MEASURE_COUNTS,
    "sequence_gaps": names.MEASURE_COUNTS,
    "keepalives": names.MEASURE_KEEPALIVES,
    "usage": names.MEASURE_USAGE,
    "done_sentinel": names.MEASURE_DONE_SENTINEL,
    "anomalies": names.MEASURE_ANOMALIES,
}
SCOPE_OF: Final = {
    ("openai", F.SYNC): _patch.OPENAI,
    ("openai", F.ASYNC): _patch.OPENAI_ASYNC,
    ("anthropic", F.SYNC): _patch.ANTHROPIC,
    ("anthropic", F.ASYNC): _patch.ANTHROPIC_ASYNC,
}


def doubts(rows: Iterable[Row]) -> dict[str, set[str]]:
    """Scope -> the measures its differing cells compare. A cell that differs only where its report already said
    "unknown" (a missing patch point's measures), or whose streams are not observed at all, adds nothing."""
    found: dict[str, set[str]] = {}
    for row in rows:
        if row.ok or _explained(row):
            continue
        scope = SCOPE_OF.get((SDK_BY_SURFACE.get(row.cell.surface, ""), row.cell.mode))
        if scope is None or names.MEASURE_STREAM in _patch.PATCHER.unobserved(scope):
            continue
        measures = {MEASURE_OF[key] for key in row.expected if key in MEASURE_OF}
        if measures:
            found.setdefault(scope, set()).update(measures)
    return found


def _explained(row: Row) -> bool:
    if row.problem is not None or row.observed is None:
        return False
    declared = set(row.observed.get("unobserved") or ())
    return all(key == "unobserved" or MEASURE_OF.get(key) in declared for key in row.mismatches)


def publish(rows: Iterable[Row]) -> str:
    """Make the differing cells' measures unknown on every later stream of their scopes; the WARNING's sentence
    naming them ('' when nothing new is doubted)."""
    added = doubted.doubt(doubts(rows))
    if not added:
        return ""
    parts = [f"{_patch.scope_text(scope)}: {', '.join(sorted(measures))}" for scope, measures in sorted(added.items())]
    return (
        " From now on these measures are reported unknown (listed in the report's and the span's unobserved, the "
        "outcome label keeping its value) for " + "; ".join(parts) + "."
    )
