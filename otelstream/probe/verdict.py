"""The conformance verdict of a target: the contract's outcome rules and anomalies applied to what its server sent,
plus what a proxy on the path would do with its silences, as findings; and the round's summary.

Every finding fails the verdict (and ``--strict``): a request that did not complete, an anomaly, a keepalive gap or
silence longer than a proxy's read timeout; but the notes, said and not failed: a slow first delta, and measures the
installed SDK release hides from otelstream.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from otelstream import names
from otelstream.probe.config import RunOptions, Target
from otelstream.probe.runner import Row

# what each protocol anomaly means, said to the operator of the server
ANOMALY_TEXT: Final = {
    names.ANOM_MISSING_DONE: "no [DONE]: the answer ended without `data: [DONE]`",
    names.ANOM_TRAILING_DONE: "[DONE] on a surface that has none",
    names.ANOM_UNTYPED_EVENT: "events without a `type` field (classified by their SSE event name)",
    names.ANOM_USAGE_MISSING: "no usage when asked (stream_options.include_usage), or no metadata usage (converse)",
    names.ANOM_MISSING_FINISH_REASON: "finish_reason missing on a choice",
    names.ANOM_NO_DELTA: "the answer ended without a single delta",
    names.ANOM_UNKNOWN_EVENT: "event types this otelstream does not know",
    names.ANOM_EVENT_AFTER_TERMINAL: "events after the terminal event",
    names.ANOM_UNDECODABLE: "event data that is not JSON",
    names.ANOM_BAD_FIELD: "a field of the wrong type or value",
    names.ANOM_UNTERMINATED_EVENT: "the body ended inside an event",
}
SEQUENCE_TEXT: Final = {
    names.SEQ_GAP: "sequence gap: sequence_number skipped",
    names.SEQ_DUPLICATE: "sequence_number repeated",
    names.SEQ_OUT_OF_ORDER: "sequence_number went backwards",
    names.SEQ_BAD_START: "sequence_number did not start at 0",
    names.SEQ_MISSING: "events without sequence_number",
}
OUTCOME_TEXT: Final = {
    names.CUT: "the body ended before its terminal event, with no error (a truncated answer that looks whole)",
    names.TRANSPORT_ERROR: "the stream broke on the client side after it started",
    names.HTTP_ERROR: "no stream: refused, or no answer before the headers",
    names.FAILED: "response.failed",
    names.INCOMPLETE: "cut short by a limit or filter (raise max_output_tokens for reasoning models)",
    names.ABANDONED: "still streaming when the probe's time limit ran out",
}
# surfaces whose terminal event carries the usage without being asked (chat/completions and converse: the
# usage_missing anomaly)
_USAGE_IN_TERMINAL: Final = (names.RESPONSES, names.RESPONSES_WEBSOCKET, names.MESSAGES, names.GENERATE_CONTENT)


@dataclass(frozen=True)
class Finding:
    code: str  # a protocol or sequence anomaly kind, or one of names.VERDICT_*
    level: str  # names.VERDICT_FAIL / VERDICT_NOTE
    requests: int  # how many of the round's requests showed it
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "level": self.level, "requests": self.requests, "detail": self.detail}


@dataclass(frozen=True)
class Summary:
    requests: int
    outcomes: dict[str, int]  # outcome (or "no_report") -> requests
    ttfd_p50_s: float | None
    ttfd_max_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "outcomes": self.outcomes, "time_to_first_delta_p50_s": self.ttfd_p50_s,
                "time_to_first_delta_max_s": self.ttfd_max_s}  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    findings: tuple[Finding, ...]
    unreachable: bool  # every request failed to connect

    @property
    def ok(self) -> bool:
        return not self.unreachable and all(f.level != names.VERDICT_FAIL for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "unreachable": self.unreachable, "findings": [f.to_json() for f in self.findings]}


def summarize(rows: list[Row]) -> Summary:
    outcomes = Counter(row.outcome or names.VERDICT_NO_REPORT for row in rows)
    ttfd = [row.time_to_first_delta_s for row in rows if row.time_to_first_delta_s is not None]
    return Summary(
        requests=len(rows), outcomes=dict(sorted(outcomes.items())),
        ttfd_p50_s=statistics.median(ttfd) if ttfd else None, ttfd_max_s=max(ttfd) if ttfd else None,
    )  # fmt: skip


def judge(rows: list[Row], options: RunOptions) -> Verdict:
    unreachable = bool(rows) and all(row.connect_failed for row in rows)
    if unreachable:
        return Verdict((Finding(names.VERDICT_UNREACHABLE, names.VERDICT_FAIL, len(rows),
                                "no connection could be made"),), True)  # fmt: skip
    findings = [*_outcomes(rows), *_anomalies(rows), *_usage(rows), *_silences(rows, options), *_latency(rows, options),
                *_unobserved(rows)]  # fmt: skip
    return Verdict(tuple(findings), False)


def _outcomes(rows: list[Row]) -> Iterable[Finding]:
    """One finding per kind of end that is not ``completed``, its error class and provider code in the detail."""
    groups: Counter[tuple[str | None, str | None, str | None, str | None]] = Counter(
        (row.outcome, row.error_class, row.error_type, row.failure_phase)
        for row in rows
        if row.outcome != names.COMPLETED
    )
    for (outcome, error_class, error_type, phase), n in groups.items():
        if outcome is None:
            yield Finding(names.VERDICT_NO_REPORT, names.VERDICT_FAIL, n, "otelstream made no report of the stream")
            continue
        where = f", {phase.replace('_', ' ')}" if phase else ""
        if outcome == names.ERROR:
            yield Finding(names.VERDICT_INBAND_ERROR, names.VERDICT_FAIL, n, _inband(error_type, error_class) + where)
            continue
        said = f" ({_class_code(error_class, error_type)})" if error_class or error_type else ""
        yield Finding(names.VERDICT_NOT_COMPLETED, names.VERDICT_FAIL, n,
                      f"{outcome}{said}{where}: {OUTCOME_TEXT.get(outcome, outcome)}")  # fmt: skip


def _inband(error_type: str | None, error_class: str | None) -> str:
    """How the in-band error was shaped: a code or type the SDK raised with is what clients expect; none leaves them
    unable to tell a rate limit from a crash."""
    if error_type is None:
        return "in-band error after HTTP 200 with no code or type: clients cannot tell what failed"
    return f"in-band error after HTTP 200: {error_type} (class {error_class}), shaped as clients expect"


def _class_code(error_class: str | None, error_type: str | None) -> str:
    if error_type and error_type != error_class:
        return f"{error_class} {error_type}" if error_class else error_type
    return error_class or ""


def _anomalies(rows: list[Row]) -> Iterable[Finding]:
    seen: Counter[str] = Counter()
    for row in rows:
        seen.update(kind for kind, n in row.anomalies if n)
    for kind, n in sorted(seen.items()):
        yield Finding(kind, names.VERDICT_FAIL, n, ANOMALY_TEXT.get(kind, kind))
    by_kind: Counter[str] = Counter()
    skipped = 0
    for row in rows:
        counts = row.sequence_counts
        by_kind.update(counts.keys())
        if counts.get(names.SEQ_GAP) and row.sequence is not None:
            skipped += row.sequence.skipped
    for kind in names.SEQUENCE_KINDS:
        if by_kind[kind]:
            text = SEQUENCE_TEXT[kind] + (f" ({skipped} numbers in all)" if kind == names.SEQ_GAP else "")
            yield Finding(names.SEQUENCE_ANOMALY_BY_KIND[kind], names.VERDICT_FAIL, by_kind[kind], text)


def _usage(rows: list[Row]) -> Iterable[Finding]:
    """Responses and Messages carry usage in their terminal event unasked; a server that leaves it out breaks every
    client's token accounting. (Chat and legacy completions: the usage_missing anomaly says it.)"""
    n = sum(
        1
        for row in rows
        if row.surface in _USAGE_IN_TERMINAL and row.outcome == names.COMPLETED and row.usage_reported is False
    )
    if n:
        yield Finding(names.VERDICT_NO_USAGE, names.VERDICT_FAIL, n, "no usage in the terminal event")


def _silences(rows: list[Row], options: RunOptions) -> Iterable[Finding]:
    """A proxy closes a connection that carried nothing for its read timeout: keepalives must come more often, and
    a server that sends none must not wait that long."""
    limit = options.proxy_read_timeout_s
    gaps = [row.max_keepalive_gap_s for row in rows if row.max_keepalive_gap_s is not None]
    over = [g for g in gaps if g > limit]
    if over:
        yield Finding(names.VERDICT_KEEPALIVE_GAP, names.VERDICT_FAIL, len(over),
                      f"keepalive gap {_s(max(over))} > read timeout {_s(limit)}")  # fmt: skip
    silent = [row.max_wait_s for row in rows if not row.keepalives and row.max_wait_s is not None and
              row.max_wait_s > limit]  # fmt: skip
    if silent:
        yield Finding(names.VERDICT_SILENT_WAIT, names.VERDICT_FAIL, len(silent),
                      f"silent for {_s(max(silent))} with no keepalive > read timeout {_s(limit)}")  # fmt: skip


def _latency(rows: list[Row], options: RunOptions) -> Iterable[Finding]:
    slow = [row.time_to_first_delta_s for row in rows
            if row.time_to_first_delta_s is not None and row.time_to_first_delta_s > options.ttfd_budget_s]  # fmt: skip
    if slow:
        yield Finding(names.VERDICT_SLOW_FIRST_DELTA, names.VERDICT_NOTE, len(slow),
                      f"time to first delta {_s(max(slow))} > {_s(options.ttfd_budget_s)}")  # fmt: skip


def _unobserved(rows: list[Row]) -> Iterable[Finding]:
    """Measures the installed SDK release gives otelstream no way to see: their columns are empty, not zero, and the
    rules that rest on them did not run."""
    missing = sorted({m for row in rows for m in row.unobserved})
    if missing:
        n = sum(1 for row in rows if row.unobserved)
        yield Finding(names.VERDICT_UNOBSERVED, names.VERDICT_NOTE, n,
                      "not observable with the installed SDK release: " + ", ".join(missing))  # fmt: skip


def _s(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds < 10 else f"{seconds:.0f} s"


@dataclass(frozen=True)
class TargetResult:
    """A target's round: its rows, their summary and the verdict (or why the round could not run)."""

    target: Target
    rows: tuple[Row, ...]
    summary: Summary
    verdict: Verdict
    round: int | None = None  # the monitor's round number; None for a single run

    @property
    def ok(self) -> bool:
        return self.verdict.ok


def evaluate(target: Target, rows: list[Row], options: RunOptions, round: int | None = None) -> TargetResult:
    return TargetResult(target, tuple(rows), summarize(rows), judge(rows, options), round)
