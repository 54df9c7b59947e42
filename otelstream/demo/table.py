"""The demo's summary, computed from the Prometheus exposition text (what ``/metrics`` serves, so what Grafana
would show): streams by outcome, time to first delta and max wait quantiles from histogram buckets exactly as
PromQL's ``histogram_quantile`` computes them, sequence anomalies, protocol anomalies and tokens.

Series without a ``surface`` label (TTFD, tokens: the semantic-convention instruments carry only provider,
operation and model) are attributed to a surface through the model the demo used on that surface only.

Pure apart from ``prometheus_client.parser`` (imported lazily).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from otelstream import names


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


def parse_exposition(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    return [
        Sample(s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """PromQL's ``histogram_quantile`` over cumulative ``(le, count)`` buckets; None when there are no observations.

    Linear interpolation inside the bucket holding rank ``q * count``, the first bucket starting at 0, and a rank
    in the ``+Inf`` bucket answered with the highest finite bound (as Prometheus does)."""
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]):
        return None
    total = ordered[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for i, (le, count) in enumerate(ordered):
        if count >= rank:
            if math.isinf(le):
                return ordered[i - 1][0] if i > 0 else None
            if i == 0 and le <= 0:
                return le
            in_bucket = count - prev_count
            if in_bucket <= 0:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / in_bucket
        prev_le, prev_count = le, count
    return None  # pragma: no cover - the +Inf bucket always holds the rank


def _matches(labels: Mapping[str, str], match: Mapping[str, str | tuple[str, ...]]) -> bool:
    """Every label of ``match`` has its value (or one of its values, for a tuple)."""
    return all(labels.get(k) in v if isinstance(v, tuple) else labels.get(k) == v for k, v in match.items())


def _buckets(
    samples: Iterable[Sample], family: str, match: Mapping[str, str | tuple[str, ...]]
) -> list[tuple[float, float]]:
    """``sum by (le)`` of ``family_bucket`` over the series whose labels include ``match``."""
    sums: dict[float, float] = {}
    for s in samples:
        if s.name != family + "_bucket" or not _matches(s.labels, match):
            continue
        le = float(s.labels["le"])
        sums[le] = sums.get(le, 0.0) + s.value
    return sorted(sums.items())


def _sum(samples: Iterable[Sample], name: str, match: Mapping[str, str | tuple[str, ...]]) -> float:
    return sum(s.value for s in samples if s.name == name and _matches(s.labels, match))


@dataclass(frozen=True, slots=True)
class SurfaceStats:
    surface: str
    outcomes: dict[str, int] = field(default_factory=dict)
    ttfd: tuple[float | None, float | None, float | None] = (None, None, None)  # p50, p95, p99 (s)
    max_wait_p95: float | None = None
    sequence: dict[str, int] = field(default_factory=dict)  # kind → occurrences
    anomalies: dict[str, int] = field(default_factory=dict)  # protocol-anomaly kind → occurrences
    tokens_in: int = 0
    tokens_out: int = 0
    error_classes: dict[str, int] = field(default_factory=dict)  # error class (error_type label) → streams

    @property
    def streams(self) -> int:
        return sum(self.outcomes.values())


def collect(
    samples: Sequence[Sample], model_by_surface: Mapping[str, str | tuple[str, ...]] | None = None
) -> dict[str, SurfaceStats]:
    """Per-surface figures, in ``names.SURFACES`` order, for every surface that has streams. A surface's TTFD and
    tokens are those of its model, or of its models together (``messages`` straight and through Bedrock)."""
    out: dict[str, SurfaceStats] = {}
    for surface in names.SURFACES:
        by_surface: dict[str, str | tuple[str, ...]] = {names.LABEL_SURFACE: surface}
        outcomes = {
            o: int(_sum(samples, names.PROM_STREAMS + "_total", {**by_surface, names.LABEL_OUTCOME: o}))
            for o in names.OUTCOMES
        }
        if not any(outcomes.values()):
            continue
        model = (model_by_surface or {}).get(surface)
        by_model: dict[str, str | tuple[str, ...]] = {names.LABEL_MODEL: model} if model else {}
        ttfd_buckets = _buckets(samples, names.PROM_TIME_TO_FIRST_CHUNK, by_model) if model else []
        wait_buckets = _buckets(samples, names.PROM_MAX_WAIT, by_surface)

        def kinds(
            family: str, known: Sequence[str], surface_labels: Mapping[str, str | tuple[str, ...]] = by_surface
        ) -> dict[str, int]:
            return {
                k: n
                for k in known
                if (n := int(_sum(samples, family + "_total", {**surface_labels, names.LABEL_KIND: k})))
            }

        tokens = {
            t: int(_sum(samples, names.PROM_TOKEN_USAGE + "_sum", {**by_model, names.LABEL_TOKEN_TYPE: t}))
            if model
            else 0
            for t in (names.TOKEN_TYPE_INPUT, names.TOKEN_TYPE_OUTPUT)
        }
        classes = {
            c: n
            for c in names.ERROR_CLASSES
            if (n := int(_sum(samples, names.PROM_STREAMS + "_total", {**by_surface, names.LABEL_ERROR_TYPE: c})))
        }
        out[surface] = SurfaceStats(
            surface=surface,
            outcomes=outcomes,
            error_classes=classes,
            ttfd=(
                histogram_quantile(0.5, ttfd_buckets),
                histogram_quantile(0.95, ttfd_buckets),
                histogram_quantile(0.99, ttfd_buckets),
            ),
            max_wait_p95=histogram_quantile(0.95, wait_buckets),
            sequence=kinds(names.PROM_SEQUENCE_ANOMALIES, names.SEQUENCE_KINDS),
            anomalies=kinds(names.PROM_ANOMALIES, names.PROTOCOL_ANOMALY_KINDS),
            tokens_in=tokens[names.TOKEN_TYPE_INPUT],
            tokens_out=tokens[names.TOKEN_TYPE_OUTPUT],
        )
    return out


# --- rendering ---------------------------------------------------------------------------------------

_OUTCOME_HEADS: Final = {
    names.COMPLETED: "completed",
    names.INCOMPLETE: "incomplete",
    names.FAILED: "failed",
    names.ERROR: "error",
    names.CUT: "cut",
    names.ABANDONED: "abandoned",
    names.TRANSPORT_ERROR: "transport",
    names.HTTP_ERROR: "http",
}


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    lines = []
    for r in (header, *rows):
        cells = [str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def outcome_rows(stats: Mapping[str, SurfaceStats]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the outcome table (one row per surface, then ``total``)."""
    header = ["surface", "streams", *_OUTCOME_HEADS.values()]
    rows: list[list[str]] = []
    totals = {o: 0 for o in names.OUTCOMES}
    for st in stats.values():
        rows.append([st.surface, str(st.streams), *(str(st.outcomes.get(o, 0)) for o in _OUTCOME_HEADS)])
        for o in names.OUTCOMES:
            totals[o] += st.outcomes.get(o, 0)
    rows.append(["total", str(sum(totals.values())), *(str(totals[o]) for o in _OUTCOME_HEADS)])
    return header, rows


def class_rows(stats: Mapping[str, SurfaceStats]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the error-class table: the classes any surface saw, in ``names.ERROR_CLASSES`` order."""
    seen = [c for c in names.ERROR_CLASSES if any(st.error_classes.get(c) for st in stats.values())]
    rows = [[st.surface, *(str(st.error_classes.get(c, 0)) for c in seen)] for st in stats.values()]
    return ["surface", *seen], rows


def render(stats: Mapping[str, SurfaceStats]) -> str:
    """Three compact tables: outcomes per surface, the bad ones by error class, then timing, integrity and tokens."""
    header, rows = outcome_rows(stats)
    lines = ["Streams by outcome  (otelstream_streams_total)", *_grid(header, rows), ""]
    header_c, rows_c = class_rows(stats)
    if len(header_c) > 1:
        lines += ["Failed streams by error class  (error_type label)", *_grid(header_c, rows_c), ""]
    header2 = ["surface", "TTFD p50", "p95", "p99", "max wait p95", "seq gaps", "seq dups", "anomalies", "tokens in",
               "tokens out"]  # fmt: skip
    rows2 = []
    for st in stats.values():
        anomalies = ", ".join(f"{k} {n}" for k, n in st.anomalies.items()) or "-"
        rows2.append([
            st.surface, _ms(st.ttfd[0]), _ms(st.ttfd[1]), _ms(st.ttfd[2]), _ms(st.max_wait_p95),
            str(st.sequence.get(names.SEQ_GAP, 0)), str(st.sequence.get(names.SEQ_DUPLICATE, 0)), anomalies,
            str(st.tokens_in), str(st.tokens_out),
        ])  # fmt: skip
    lines += ["Latency, integrity, cost  (quantiles from histogram buckets, as histogram_quantile computes them)"]
    lines += _grid(header2, rows2)
    return "\n".join(lines)


def parse_outcome_table(text: str) -> dict[str, dict[str, int]]:
    """Read the outcome table back from rendered text: surface → outcome → count (for tests and scripts)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("surface") and "streams" in line)
    heads = lines[start].split()
    outcome_by_head = {v: k for k, v in _OUTCOME_HEADS.items()}
    out: dict[str, dict[str, int]] = {}
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        cells = line.split()
        row = dict(zip(heads, cells, strict=True))
        out[row["surface"]] = {outcome_by_head[h]: int(row[h]) for h in heads if h in outcome_by_head}
    return out
