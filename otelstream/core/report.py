"""The immutable results of the core: what one stream was (``StreamStart``) and how it went (``StreamReport``).

Sinks consume these and nothing else. Times are monotonic nanoseconds from the injected clock; durations are
exposed in seconds. Pure module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from otelstream import names

_T = TypeVar("_T")

AttributeValue = str | int | float | bool
# the application's attributes of one stream (``otelstream.attributes()``, baggage): validated, never mutated
Attributes = Mapping[str, AttributeValue]
NO_ATTRIBUTES: Attributes = MappingProxyType({})


def _no_attributes() -> Attributes:
    return NO_ATTRIBUTES  # shared and read-only: no dict per stream


def assemble(cls: type[_T], values: dict[str, Any]) -> _T:
    """``cls(**values)`` for a frozen dataclass without ``__slots__``, given every one of its fields.

    The ``__init__`` that ``dataclass(frozen=True)`` generates sets each field through ``object.__setattr__``, a slot
    wrapper call of about 1 600 machine instructions: 60 000 for a 37-field report, once per stream, more than the
    rest of building it. This writes the instance dictionary once. The tracker passes every field (a test checks
    that the result equals the generated ``__init__``'s)."""
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


@dataclass(frozen=True, slots=True)
class StreamStart:
    """What is known when the request is sent (or the WebSocket ``response.create`` is written)."""

    surface: str
    provider: str = names.PROVIDER_OPENAI
    request_model: str | None = None
    server_address: str | None = None
    server_port: int | None = None
    api_type: str | None = None  # openai.api.type: "responses" / "chat_completions" / "completions"
    t_request_ns: int = 0
    resumed: bool = False
    stream_id: str | None = None
    # the request parameters as the call passed them (None: not passed)
    request_max_tokens: int | None = None
    request_temperature: float | None = None
    request_top_p: float | None = None
    request_choice_count: int | None = None
    # captured when the request is sent; a mapping, so left out of the hash
    attributes: Attributes = field(default_factory=_no_attributes, hash=False)

    @property
    def operation(self) -> str:
        return names.OPERATION_BY_SURFACE.get(self.surface, "chat")


@dataclass(frozen=True)
class Usage:
    """Token counts exactly as the server reported them; ``None`` when the stream carried none."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_write_input_tokens: int | None = None
    reasoning_output_tokens: int | None = None

    def to_json(self) -> dict[str, int | None]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_write_input_tokens": self.cache_write_input_tokens,
            "reasoning_output_tokens": self.reasoning_output_tokens,
        }


@dataclass(frozen=True)
class SequenceStats:
    first: int | None = None
    last: int | None = None
    gaps: int = 0
    skipped: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    bad_start: bool = False
    missing: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "last": self.last,
            "gaps": self.gaps,
            "skipped": self.skipped,
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
            "bad_start": self.bad_start,
            "missing": self.missing,
        }

    def added(self, other: SequenceStats) -> SequenceStats:
        """The counts of two streams together (a transcript's over its responses): each count summed, each flag set
        when either's is. ``first`` and ``last`` number one stream's events only: unknown."""
        return SequenceStats(
            gaps=self.gaps + other.gaps,
            skipped=self.skipped + other.skipped,
            duplicates=self.duplicates + other.duplicates,
            out_of_order=self.out_of_order + other.out_of_order,
            bad_start=self.bad_start or other.bad_start,
            missing=self.missing or other.missing,
        )

    def counts_by_kind(self) -> dict[str, int]:
        """Occurrences per sequence-anomaly label value (``missing`` and ``bad_start`` count once)."""
        return {
            names.SEQ_GAP: self.gaps,
            names.SEQ_DUPLICATE: self.duplicates,
            names.SEQ_OUT_OF_ORDER: self.out_of_order,
            names.SEQ_BAD_START: int(self.bad_start),
            names.SEQ_MISSING: int(self.missing),
        }


@dataclass(frozen=True, slots=True)
class Anomaly:
    kind: str
    event_index: int
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "event_index": self.event_index, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Stall:
    """One wait longer than the stall threshold: when it began (from ``t_request``) and how long it was."""

    offset_s: float
    wait_s: float


@dataclass(frozen=True, slots=True)
class RateLimit:
    """The rate-limit headroom the server sent with the answer, for one ``kind`` (``names.RATELIMIT_KINDS``): its
    numbers only, None where that header was not sent."""

    kind: str
    remaining: float | None = None
    limit: float | None = None


@dataclass(frozen=True)
class StreamReport:
    """Everything measured about one stream, produced exactly once when it ends (public as
    ``otelstream.StreamReport``; docs/api.md lists every field and its unit)."""

    surface: str
    provider: str
    outcome: str
    request_model: str | None = None
    response_model: str | None = None
    response_id: str | None = None
    request_id: str | None = None
    stream_id: str | None = None
    server_address: str | None = None
    server_port: int | None = None
    api_type: str | None = None
    service_tier: str | None = None  # OpenAI: the tier that served the response, as the server sent it
    system_fingerprint: str | None = None  # OpenAI chat/completions, as the server sent it
    provider_latency_ms: int | None = None  # Bedrock converse: metadata.metrics.latencyMs, the service's own figure
    # the application's (otelstream.attributes(), baggage), captured when the request was sent
    attributes: Attributes = field(default_factory=_no_attributes, hash=False)  # a mapping: not in the hash
    abandoned_reason: str | None = None
    error_type: str | None = None  # the provider's code or type as sent, or the HTTP status of an http_error
    error_class: str | None = None  # one of names.ERROR_CLASSES for a bad outcome, else None
    finish_reasons: tuple[str, ...] = ()
    resumed: bool = False
    retries: int | None = 0  # None: unknown (see ``unobserved``)
    # times (monotonic ns from the injected clock; t_request_ns is the anchor of every offset)
    t_request_ns: int = 0
    t_end_ns: int = 0
    time_to_first_event_ns: int | None = None
    time_to_first_delta_ns: int | None = None
    # to the first delta that is not reasoning (TTFO): what a user waiting for the answer waits; None without one
    time_to_first_output_ns: int | None = None
    first_output_event: int | None = None  # that delta's index among the events (offline, where there is no clock)
    max_wait_ns: int = 0
    wait_ns: int = 0
    consumer_ns: int = 0
    # counts
    events: int = 0
    deltas: int = 0
    keepalives: int | None = 0  # None: unknown (see ``unobserved``)
    # the largest gap between two keepalives (None: fewer than two, unknown, or offline where there is no clock)
    max_keepalive_gap_ns: int | None = None
    done_sentinel: bool | None = False  # None: `[DONE]` could not be seen at the layer observed
    sequence: SequenceStats = field(default_factory=SequenceStats)
    usage: Usage = field(default_factory=Usage)
    usage_requested: bool = False
    anomalies: tuple[Anomaly, ...] = ()  # the first names.MAX_REPORTED_ANOMALIES
    anomaly_counts: tuple[tuple[str, int], ...] = ()  # exact count per protocol-anomaly kind
    stalls: tuple[Stall, ...] = ()  # the first names.MAX_RECORDED_STALLS
    stall_count: int = 0
    # time per output chunk: per bucket of names.TIME_PER_CHUNK_BUCKETS (+ overflow), count and sum (ns)
    chunk_counts: tuple[int, ...] = ()
    chunk_sums_ns: tuple[int, ...] = ()
    # rate-limit headroom from the answer's headers at the send (the last attempt's), one per kind the server sent
    ratelimits: tuple[RateLimit, ...] = ()
    # the names.MEASURE_* this stream could not observe (a patch point missing from the installed SDK): those fields
    # are None, their metrics are not recorded; duration (the span's times) stays, its histogram is not recorded
    unobserved: tuple[str, ...] = ()

    @property
    def operation(self) -> str:
        return names.OPERATION_BY_SURFACE.get(self.surface, "chat")

    @property
    def duration_s(self) -> float:
        return max(0, self.t_end_ns - self.t_request_ns) / 1e9

    @property
    def time_to_first_event_s(self) -> float | None:
        return _seconds(self.time_to_first_event_ns)

    @property
    def time_to_first_delta_s(self) -> float | None:
        return _seconds(self.time_to_first_delta_ns)

    @property
    def time_to_first_output_s(self) -> float | None:
        return _seconds(self.time_to_first_output_ns)

    @property
    def failure_phase(self) -> str | None:
        """For a bad outcome: ``before_output`` when no delta reached the caller before the failure (a retry is
        invisible to the end user; always so for ``http_error``), else ``during_output``. None for a good outcome."""
        if self.outcome not in names.BAD_OUTCOMES:
            return None
        if self.deltas and self.outcome != names.HTTP_ERROR:
            return names.PHASE_DURING_OUTPUT
        return names.PHASE_BEFORE_OUTPUT

    @property
    def max_wait_s(self) -> float:
        return self.max_wait_ns / 1e9

    @property
    def consumer_time_s(self) -> float:
        return self.consumer_ns / 1e9

    @property
    def is_bad(self) -> bool:
        return self.outcome in names.BAD_OUTCOMES

    @property
    def output_tokens_per_second(self) -> float | None:
        """Output tokens over the generation time (first delta to end), when both are known."""
        out, ttfd = self.usage.output_tokens, self.time_to_first_delta_ns
        if out is None or ttfd is None:
            return None
        gen_ns = self.t_end_ns - self.t_request_ns - ttfd
        return out / (gen_ns / 1e9) if gen_ns > 0 else None

    def chunk_buckets(self) -> list[tuple[int, float]]:
        """(count, sum in seconds) per bucket of names.TIME_PER_CHUNK_BUCKETS, last entry = +Inf."""
        return [(c, s / 1e9) for c, s in zip(self.chunk_counts, self.chunk_sums_ns, strict=True)]

    def to_json(self) -> dict[str, Any]:
        """The ``otelstream check --json`` object minus ``file``."""
        return {
            "surface": self.surface,
            "provider": self.provider,
            "outcome": self.outcome,
            "finish_reasons": list(self.finish_reasons),
            "error_type": self.error_type,
            "error_class": self.error_class,
            "failure_phase": self.failure_phase,
            "events": self.events,
            "deltas": self.deltas,
            # offline has no clock: TTFO as the index of the event that carried the first output
            "first_output_event_index": self.first_output_event,
            "keepalives": self.keepalives,
            "max_keepalive_gap_ns": self.max_keepalive_gap_ns,
            "done_sentinel": self.done_sentinel,
            "sequence": self.sequence.to_json(),
            "usage": self.usage.to_json(),
            "response_id": self.response_id,
            "response_model": self.response_model,
            "stream_id": self.stream_id,
            "anomalies": [a.to_json() for a in self.anomalies],
            "anomaly_counts": dict(self.anomaly_counts),
        }


def _seconds(ns: int | None) -> float | None:
    """A duration in seconds from nanoseconds; None (unknown) stays None."""
    return None if ns is None else ns / 1e9
