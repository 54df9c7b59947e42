"""What one StreamReport contributes to the metrics: computed once here, applied by both metric sinks.

Keeping the semantics in one place is what makes the native Prometheus series and the OTel instruments agree
(the parity test compares them). Label values are positional, in the order of ``LABELNAMES[family]``; an empty
string means "absent" (Prometheus treats an empty label as a missing one, and the OTel sink drops it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from otelstream import names
from otelstream.core.report import StreamReport

COMMON = names.COMMON_LABELS

# the labels of each family beyond the common ones
_OWN: dict[str, tuple[str, ...]] = {
    names.PROM_OPERATION_DURATION: (names.LABEL_ERROR_TYPE,),
    names.PROM_TOKEN_USAGE: (names.LABEL_TOKEN_TYPE,),
    names.PROM_TIME_TO_FIRST_CHUNK: (),
    names.PROM_TIME_PER_OUTPUT_CHUNK: (),
    names.PROM_STREAMS: (names.LABEL_SURFACE, names.LABEL_OUTCOME, names.LABEL_ERROR_TYPE, names.LABEL_PHASE),
    names.PROM_TIME_TO_FIRST_EVENT: (names.LABEL_SURFACE,),
    names.PROM_TIME_TO_FIRST_OUTPUT: (names.LABEL_SURFACE,),
    names.PROM_MAX_WAIT: (names.LABEL_SURFACE,),
    names.PROM_SEQUENCE_ANOMALIES: (names.LABEL_SURFACE, names.LABEL_KIND),
    names.PROM_ANOMALIES: (names.LABEL_SURFACE, names.LABEL_KIND),
    names.PROM_STREAMS_ACTIVE: (names.LABEL_SURFACE,),
    names.PROM_STREAMS_STALLED: (names.LABEL_SURFACE,),
    names.PROM_REPORTS_DROPPED: (),
    names.PROM_RATELIMIT_REMAINING: (names.LABEL_KIND,),
    names.PROM_RATELIMIT_LIMIT: (names.LABEL_KIND,),
    # the latest semantic conventions' (names.SEMCONV_*): the same labels as the families they replace, the usage
    # counters by modality; the per-call token histograms have neither (failed calls are not recorded there)
    names.PROM_INFERENCE_DURATION: (names.LABEL_ERROR_TYPE,),
    names.PROM_INFERENCE_TIME_TO_FIRST_CHUNK: (),
    names.PROM_INFERENCE_TIME_PER_OUTPUT_CHUNK: (),
    names.PROM_USAGE_INPUT_TOKENS: (names.LABEL_TOKEN_MODALITY,),
    names.PROM_USAGE_OUTPUT_TOKENS: (names.LABEL_TOKEN_MODALITY,),
    names.PROM_USAGE_CACHE_READ_TOKENS: (names.LABEL_TOKEN_MODALITY,),
    names.PROM_USAGE_CACHE_WRITE_TOKENS: (names.LABEL_TOKEN_MODALITY,),
    names.PROM_USAGE_REASONING_TOKENS: (names.LABEL_TOKEN_MODALITY,),
    names.PROM_OPERATION_INPUT_TOKENS: (),
    names.PROM_OPERATION_OUTPUT_TOKENS: (),
}
# the built-in label names: an application attribute's label must not be one of them
BUILTIN_LABELS = frozenset({*COMMON, *(label for own in _OWN.values() for label in own), "le", "quantile"})


def attribute_label(key: str) -> str:
    """An application attribute key's label name: what the OTel Prometheus exporter makes of the attribute key
    (every character outside ``[a-zA-Z0-9_]`` as ``_``, a leading digit too), so both paths name it alike."""
    label = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in key)
    return "_" + label[1:] if label[:1].isdigit() else label


class Schema:
    """The label names of every family for one set of ``metric_attributes`` keys (fixed per registry: the
    families are created with them)."""

    def __init__(self, attribute_keys: tuple[str, ...] = ()) -> None:
        self.attribute_keys = attribute_keys
        self.attribute_labels = tuple(attribute_label(k) for k in attribute_keys)
        common = (*COMMON, *self.attribute_labels)
        self.common = common
        self.labelnames: dict[str, tuple[str, ...]] = {family: (*common, *own) for family, own in _OWN.items()}
        # OTel attribute keys: the dotted semantic-convention names, the application's own keys as given
        own = dict(zip(self.attribute_labels, attribute_keys, strict=True))
        self.otel_keys: dict[str, str] = {**names.OTEL_ATTR_BY_LABEL, **own}

    @staticmethod
    def usable(keys: tuple[str, ...]) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
        """The keys whose labels are distinct and not built-in, and (key, reason) for the others."""
        kept: list[str] = []
        seen: set[str] = set()
        refused: list[tuple[str, str]] = []
        for key in keys:
            label = attribute_label(key)
            if label in BUILTIN_LABELS or label.startswith("__"):
                refused.append((key, f"its label {label!r} is reserved"))
            elif label in seen:
                refused.append((key, f"its label {label!r} is another key's"))
            else:
                seen.add(label)
                kept.append(key)
        return tuple(kept), refused


DEFAULT_SCHEMA = Schema()
LABELNAMES: dict[str, tuple[str, ...]] = DEFAULT_SCHEMA.labelnames  # without application attributes


@dataclass(frozen=True)
class Spec:
    """One instrument: its Prometheus family, OTel name, kind, unit and buckets."""

    prom: str
    otel: str
    kind: str  # "histogram" | "counter" | "gauge" (live, counted when read) | "last" (the last value recorded)
    unit: str
    doc: str
    buckets: tuple[float, ...] = ()


_DURATION_DOC = "GenAI operation duration (request sent to end of stream)"
_TTFC_DOC = "Time from request to the first output delta"
_TPOC_DOC = "Time between consecutive output deltas as the caller received them"
# the gen_ai.client.* instruments of the default conventions (names.SEMCONV_DEFAULT)
GENAI_DEFAULT_SPECS: tuple[Spec, ...] = (
    Spec(names.PROM_OPERATION_DURATION, names.OTEL_OPERATION_DURATION, "histogram", "s", _DURATION_DOC,
         names.DURATION_BUCKETS),
    Spec(names.PROM_TOKEN_USAGE, names.OTEL_TOKEN_USAGE, "histogram", "{token}",
         "Tokens used, as the server reported them", names.TOKEN_BUCKETS),
    Spec(names.PROM_TIME_TO_FIRST_CHUNK, names.OTEL_TIME_TO_FIRST_CHUNK, "histogram", "s", _TTFC_DOC,
         names.TTFD_BUCKETS),
    Spec(names.PROM_TIME_PER_OUTPUT_CHUNK, names.OTEL_TIME_PER_OUTPUT_CHUNK, "histogram", "s", _TPOC_DOC,
         names.TIME_PER_CHUNK_BUCKETS),
)  # fmt: skip
# the same measures under the latest conventions' names (names.SEMCONV_LATEST): same buckets
GENAI_LATEST_SPECS: tuple[Spec, ...] = (
    Spec(names.PROM_INFERENCE_DURATION, names.OTEL_INFERENCE_DURATION, "histogram", "s", _DURATION_DOC,
         names.DURATION_BUCKETS),
    Spec(names.PROM_INFERENCE_TIME_TO_FIRST_CHUNK, names.OTEL_INFERENCE_TIME_TO_FIRST_CHUNK, "histogram", "s",
         _TTFC_DOC, names.TTFD_BUCKETS),
    Spec(names.PROM_INFERENCE_TIME_PER_OUTPUT_CHUNK, names.OTEL_INFERENCE_TIME_PER_OUTPUT_CHUNK, "histogram", "s",
         _TPOC_DOC, names.TIME_PER_CHUNK_BUCKETS),
    Spec(names.PROM_USAGE_INPUT_TOKENS, names.OTEL_USAGE_INPUT_TOKENS, "counter", "{token}",
         "Input tokens used, cached ones included, as the server reported them (0 when it reported none)"),
    Spec(names.PROM_USAGE_OUTPUT_TOKENS, names.OTEL_USAGE_OUTPUT_TOKENS, "counter", "{token}",
         "Output tokens used, reasoning ones included, as the server reported them (0 when it reported none)"),
    Spec(names.PROM_USAGE_CACHE_READ_TOKENS, names.OTEL_USAGE_CACHE_READ_TOKENS, "counter", "{token}",
         "Input tokens served from the provider's cache (0 when the server reported none)"),
    Spec(names.PROM_USAGE_CACHE_WRITE_TOKENS, names.OTEL_USAGE_CACHE_WRITE_TOKENS, "counter", "{token}",
         "Input tokens written to the provider's cache (0 when the server reported none)"),
    Spec(names.PROM_USAGE_REASONING_TOKENS, names.OTEL_USAGE_REASONING_TOKENS, "counter", "{token}",
         "Output tokens spent on reasoning (0 when the server reported none)"),
    Spec(names.PROM_OPERATION_INPUT_TOKENS, names.OTEL_OPERATION_INPUT_TOKENS, "histogram", "{token}",
         "Input tokens per successful call, as the server reported them", names.TOKEN_BUCKETS),
    Spec(names.PROM_OPERATION_OUTPUT_TOKENS, names.OTEL_OPERATION_OUTPUT_TOKENS, "histogram", "{token}",
         "Output tokens per successful call, as the server reported them", names.TOKEN_BUCKETS),
)  # fmt: skip
OWN_SPECS: tuple[Spec, ...] = (
    Spec(names.PROM_STREAMS, names.OTEL_STREAMS, "counter", "{stream}", "Streams by outcome"),
    Spec(names.PROM_TIME_TO_FIRST_EVENT, names.OTEL_TIME_TO_FIRST_EVENT, "histogram", "s",
         "Time from request to the first parsed event of any kind", names.DURATION_BUCKETS),
    Spec(names.PROM_TIME_TO_FIRST_OUTPUT, names.OTEL_TIME_TO_FIRST_OUTPUT, "histogram", "s",
         "Time from request to the first output delta that is not reasoning", names.TTFD_BUCKETS),
    Spec(names.PROM_MAX_WAIT, names.OTEL_MAX_WAIT, "histogram", "s",
         "Longest single wait inside the SDK for the next event, per stream", names.DURATION_BUCKETS),
    Spec(names.PROM_SEQUENCE_ANOMALIES, names.OTEL_SEQUENCE_ANOMALIES, "counter", "{anomaly}",
         "Sequence-number anomalies"),
    Spec(names.PROM_ANOMALIES, names.OTEL_ANOMALIES, "counter", "{anomaly}", "Protocol deviations that lost no data"),
    Spec(names.PROM_STREAMS_ACTIVE, names.OTEL_STREAMS_ACTIVE, "gauge", "{stream}", "Open streams right now"),
    Spec(names.PROM_STREAMS_STALLED, names.OTEL_STREAMS_STALLED, "gauge", "{stream}",
         "Open streams blocked inside the SDK's wait longer than the stall threshold right now"),
    Spec(names.PROM_REPORTS_DROPPED, names.OTEL_REPORTS_DROPPED, "counter", "{report}",
         "Stream reports dropped because the export queue was full"),
    # last-value gauges (kind "last"): what the server's rate-limit headers said on the latest answer
    Spec(names.PROM_RATELIMIT_REMAINING, names.OTEL_RATELIMIT_REMAINING, "last", "{request_or_token}",
         "Requests or tokens left in the current rate-limit window, as the server's headers said on the latest answer"),
    Spec(names.PROM_RATELIMIT_LIMIT, names.OTEL_RATELIMIT_LIMIT, "last", "{request_or_token}",
         "The rate limit (requests or tokens per window), as the server's headers said on the latest answer"),
)  # fmt: skip
SPECS: tuple[Spec, ...] = (*GENAI_DEFAULT_SPECS, *OWN_SPECS, *GENAI_LATEST_SPECS)  # every instrument there is
SPEC_BY_PROM: dict[str, Spec] = {s.prom: s for s in SPECS}
# the gen_ai.client.* families of either conventions: what another GenAI instrumentation may record for a call too
GENAI_FAMILIES = frozenset(s.prom for s in (*GENAI_DEFAULT_SPECS, *GENAI_LATEST_SPECS))


def emits_default(semconv: str) -> bool:
    """Whether streams under this ``semconv`` setting record the default conventions' gen_ai.client.* metrics."""
    return semconv == names.SEMCONV_DEFAULT or semconv == names.SEMCONV_DUP


def emits_latest(semconv: str) -> bool:
    """Whether they record the latest conventions' (names.SEMCONV_LATEST, or both under names.SEMCONV_DUP)."""
    return semconv == names.SEMCONV_LATEST or semconv == names.SEMCONV_DUP


def specs_for(semconv: str) -> tuple[Spec, ...]:
    """The instruments a pipeline with this ``semconv`` setting records into: its gen_ai.client.* ones and
    otelstream's own."""
    default = GENAI_DEFAULT_SPECS if emits_default(semconv) else ()
    latest = GENAI_LATEST_SPECS if emits_latest(semconv) else ()
    return (*default, *OWN_SPECS, *latest)


def chunk_families(semconv: str) -> tuple[str, ...]:
    """The time-per-output-chunk families a stream records into (merged from its local buckets, not via points)."""
    out = (names.PROM_TIME_PER_OUTPUT_CHUNK,) if emits_default(semconv) else ()
    return (*out, names.PROM_INFERENCE_TIME_PER_OUTPUT_CHUNK) if emits_latest(semconv) else out

_PROTOCOL_KINDS = frozenset(names.PROTOCOL_ANOMALY_KINDS)


def points(
    report: StreamReport, surface: str, semconv: str = names.SEMCONV_DEFAULT
) -> Iterator[tuple[str, tuple[str, ...], float]]:
    """(family, own label values, value) for every histogram observation and counter increment of one report: the
    label values after the stream's common ones (``labels.finished``), which every point of a report shares, so a
    sink looks its series up per common label set once, then by these; ``semconv``: which conventions'
    gen_ai.client.* families to record into (``names.SEMCONV_*``).

    The time-per-output-chunk histograms are not here: they are merged from the report's local buckets
    (``chunk_merge``), without one call per chunk.
    """
    old, new = emits_default(semconv), emits_latest(semconv)
    # error_type is the error class: a closed set (never a provider code, which is unbounded server data); "" (absent)
    # for good outcomes
    klass = (report.error_class or names.EC_OTHER) if report.is_bad else ""
    if names.MEASURE_DURATION not in report.unobserved:  # else t_request was not stamped at the send
        if old:
            yield (names.PROM_OPERATION_DURATION, (klass,), report.duration_s)
        if new:
            yield (names.PROM_INFERENCE_DURATION, (klass,), report.duration_s)
    usage = report.usage
    if old:
        if usage.input_tokens is not None:
            yield (names.PROM_TOKEN_USAGE, _INPUT, float(usage.input_tokens))
        if usage.output_tokens is not None:
            yield (names.PROM_TOKEN_USAGE, _OUTPUT, float(usage.output_tokens))
    if new:
        # The conventions count every call's tokens, failed ones included (what a failed call consumed is still
        # spent), and record 0 where the server reported none.
        modal = _MODALITY_UNKNOWN
        yield (names.PROM_USAGE_INPUT_TOKENS, modal, float(usage.input_tokens or 0))
        yield (names.PROM_USAGE_OUTPUT_TOKENS, modal, float(usage.output_tokens or 0))
        yield (names.PROM_USAGE_CACHE_READ_TOKENS, modal, float(usage.cache_read_input_tokens or 0))
        yield (names.PROM_USAGE_CACHE_WRITE_TOKENS, modal, float(usage.cache_write_input_tokens or 0))
        yield (names.PROM_USAGE_REASONING_TOKENS, modal, float(usage.reasoning_output_tokens or 0))
        # Per-call distributions: a failed call's partial count would skew the percentiles, an unknown one is none.
        if not report.is_bad:
            if usage.input_tokens is not None:
                yield (names.PROM_OPERATION_INPUT_TOKENS, (), float(usage.input_tokens))
            if usage.output_tokens is not None:
                yield (names.PROM_OPERATION_OUTPUT_TOKENS, (), float(usage.output_tokens))
    ttfd = report.time_to_first_delta_s
    # A resumed stream's first delta comes from a replay, not from the model: it would fake a fast TTFT.
    if ttfd is not None and not report.resumed:
        if old:
            yield (names.PROM_TIME_TO_FIRST_CHUNK, (), ttfd)
        if new:
            yield (names.PROM_INFERENCE_TIME_TO_FIRST_CHUNK, (), ttfd)
    # the failure phase, like the class: bad outcomes only, "" (absent) for good ones
    yield (names.PROM_STREAMS, (surface, report.outcome, klass, report.failure_phase or ""), 1.0)
    own = (surface,)
    ttfe = report.time_to_first_event_s
    if ttfe is not None:
        yield (names.PROM_TIME_TO_FIRST_EVENT, own, ttfe)
    ttfo = report.time_to_first_output_s
    if ttfo is not None and not report.resumed:  # (a replay's first output, like its first delta, is no latency)
        yield (names.PROM_TIME_TO_FIRST_OUTPUT, own, ttfo)
    # Max wait only for streams that produced events: an http_error never waited for one.
    if ttfe is not None or report.events:
        yield (names.PROM_MAX_WAIT, own, report.max_wait_s)
    for kind, n in report.sequence.counts_by_kind().items():
        if n > 0:
            yield (names.PROM_SEQUENCE_ANOMALIES, (surface, kind), float(n))
    for kind, n in report.anomaly_counts:
        # The label is a closed enum: sequence_* kinds have their own family, anything else is not a label value.
        if n > 0 and kind in _PROTOCOL_KINDS:
            yield (names.PROM_ANOMALIES, (surface, kind), float(n))


_INPUT = (names.TOKEN_TYPE_INPUT,)
_OUTPUT = (names.TOKEN_TYPE_OUTPUT,)
_MODALITY_UNKNOWN = (names.TOKEN_MODALITY_UNKNOWN,)


def last_values(report: StreamReport) -> Iterator[tuple[str, tuple[str, ...], float]]:
    """(family, own label values, value) of the last-value gauges one report sets: the rate-limit headroom per
    kind."""
    for rl in report.ratelimits:
        if rl.remaining is not None:
            yield (names.PROM_RATELIMIT_REMAINING, (rl.kind,), rl.remaining)
        if rl.limit is not None:
            yield (names.PROM_RATELIMIT_LIMIT, (rl.kind,), rl.limit)


class Measures:
    """What one report records, computed once for every metric sink (each applies it under the stream's common label
    values): its points, its last values, and its local time-per-chunk buckets with the families they merge into."""

    __slots__ = ("chunk_families", "last", "merge", "points")

    def __init__(self, report: StreamReport, surface: str, semconv: str) -> None:
        self.points = list(points(report, surface, semconv))
        self.last = list(last_values(report)) if report.ratelimits else []
        self.merge = list(chunk_merge(report))
        self.chunk_families = chunk_families(semconv) if self.merge else ()

    def own_only(self) -> Measures:
        """These measures without the gen_ai.client.* families: what the OTel instruments record for a call whose
        CLIENT span another GenAI instrumentation owns (it records those through the MeterProvider the two share)."""
        kept = Measures.__new__(Measures)
        kept.points = [point for point in self.points if point[0] not in GENAI_FAMILIES]
        kept.last = self.last
        kept.merge = self.merge
        kept.chunk_families = ()  # time per output chunk is a gen_ai.client.* family under either conventions
        return kept


def chunk_merge(report: StreamReport) -> Iterator[tuple[int, int, float, float]]:
    """(bucket index, count, sum seconds, mean seconds) per non-empty local bucket of time per output chunk.

    Observing each bucket's mean ``count`` times keeps count, sum and bucket placement exact: every value in
    (b[i-1], b[i]] has its mean in the same interval. The mean is clamped into that interval so float rounding
    of ns → s can never push it across a bound.
    """
    bounds = names.TIME_PER_CHUNK_BUCKETS
    for i, (count, sum_ns) in enumerate(zip(report.chunk_counts, report.chunk_sums_ns, strict=False)):
        if count <= 0:
            continue
        total = sum_ns / 1e9
        mean = total / count
        if i < len(bounds) and mean > bounds[i]:
            mean = bounds[i]
        if 0 < i <= len(bounds) and mean <= bounds[i - 1]:
            mean = math.nextafter(bounds[i - 1], math.inf)
        yield i, count, total, mean
