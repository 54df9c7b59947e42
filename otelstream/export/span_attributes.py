"""A stream span's attributes: those a sampler may decide on at creation, the request's, and the report's at the end,
and which samplers read none (then the span starts with none, off the caller's cost).

No prompt, output text, tool argument, header (except the request id and the rate-limit numbers) or credential: every
attribute is a count, a time, an id or a bounded enum. Strings are cleaned on their way in (``core.sanitize``): a
model or id that is not valid UTF-8 would otherwise make the OTLP encoder drop the whole batch.
"""

from __future__ import annotations

from opentelemetry.sdk.trace import sampling
from opentelemetry.util.types import AttributeValue

from otelstream import names
from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.sanitize import clean_attributes

Attrs = dict[str, AttributeValue]


def creation_attributes(start: StreamStart) -> Attrs:
    """The attributes the semantic conventions ask for at span creation (a sampler may decide on them), and the
    application's own; strings cleaned."""
    attrs: Attrs = {
        names.ATTR_OPERATION_NAME: start.operation,
        names.ATTR_PROVIDER_NAME: start.provider,
    }
    if start.request_model:
        attrs[names.ATTR_REQUEST_MODEL] = start.request_model
    if start.server_address:
        attrs[names.ATTR_SERVER_ADDRESS] = start.server_address
    if start.server_port is not None:
        attrs[names.ATTR_SERVER_PORT] = start.server_port
    if start.attributes:
        # validated and cleaned when captured (otelstream.attribution); none uses otelstream's own namespaces
        attrs.update(start.attributes)
    clean_attributes(attrs)
    return attrs


# what the SDK's own samplers that read no attribute describe themselves as (Sampler.get_description)
_BLIND_DESCRIPTIONS = ("AlwaysOnSampler", "AlwaysOffSampler")
_RATIO_DESCRIPTION = "TraceIdRatioBased{"


def attribute_blind(sampler: object) -> bool:
    """Whether ``sampler`` is one of the OTel SDK's samplers that decide without the span's attributes: always on or
    off, trace-id ratio, or parent-based over those (told by their public descriptions). Anything else (a sampler of
    the application's, no SDK tracer) may read them: False."""
    t = type(sampler)
    if t is sampling.StaticSampler or t is sampling.TraceIdRatioBased:
        return True
    if t not in (sampling.ParentBased, sampling.ParentBasedTraceIdRatio):
        return False
    try:
        description = sampler.get_description()  # type: ignore[attr-defined]
    except Exception:
        return False
    head, _, rest = description.partition("{")
    if head != "ParentBased" or not rest.endswith("}"):
        return False
    # root:X,remoteParentSampled:Y,…: each delegate always on/off or a ratio (whose own description has no comma)
    for part in rest[:-1].split(","):
        _, _, delegate = part.partition(":")
        if delegate not in _BLIND_DESCRIPTIONS and not (
            delegate.startswith(_RATIO_DESCRIPTION) and delegate.endswith("}")
        ):
            return False
    return True


# attributes set only when their value is known, in span order: (attribute, the field that holds its value)
_REQUEST_KNOWN = (
    (names.ATTR_REQUEST_MAX_TOKENS, "request_max_tokens"),
    (names.ATTR_REQUEST_TEMPERATURE, "request_temperature"),
    (names.ATTR_REQUEST_TOP_P, "request_top_p"),
)
_REPORT_COUNTS_KNOWN = ((names.ATTR_RETRIES, "retries"), (names.ATTR_KEEPALIVES, "keepalives"))
_REPORT_TIMES_KNOWN = (
    (names.ATTR_STREAM_ID, "stream_id"),
    (names.ATTR_TIME_TO_FIRST_EVENT, "time_to_first_event_s"),
    (names.ATTR_TIME_TO_FIRST_DELTA, "time_to_first_delta_s"),
    (names.ATTR_TIME_TO_FIRST_OUTPUT, "time_to_first_output_s"),
)
_USAGE_KNOWN = ((names.ATTR_USAGE_INPUT, "input_tokens"), (names.ATTR_USAGE_OUTPUT, "output_tokens"))
# the usage breakdown: set when known, and under the latest conventions only when not zero
_USAGE_BREAKDOWN = (
    (names.ATTR_USAGE_CACHE_READ, "cache_read_input_tokens"),
    (names.ATTR_USAGE_CACHE_WRITE, "cache_write_input_tokens"),
    (names.ATTR_USAGE_REASONING, "reasoning_output_tokens"),
)


def request_attributes(start: StreamStart) -> Attrs:
    """The request's span attributes a sampler does not need at the span's start (no strings from server data)."""
    a: Attrs = {names.ATTR_REQUEST_STREAM: True, names.ATTR_SURFACE: start.surface}
    if start.api_type:
        a[names.ATTR_OPENAI_API_TYPE] = start.api_type
    _put_known(a, start, _REQUEST_KNOWN)
    if start.request_choice_count is not None and start.request_choice_count != 1:
        a[names.ATTR_REQUEST_CHOICE_COUNT] = start.request_choice_count
    return a


def report_attributes(report: StreamReport, *, internal: bool, latest: bool = False, choices: int = 1) -> Attrs:
    """Span attributes from a report, strings cleaned. ``internal``: the SDK's/peer's CLIENT span carries usage and
    TTFT already. ``latest``: as the latest semantic conventions ask (``finish_reasons`` padded with ``error`` up to
    the ``choices`` the call asked for, cache and reasoning token counts only when not zero)."""
    a: Attrs = {
        names.ATTR_OUTCOME: report.outcome,
        names.ATTR_MAX_WAIT: report.max_wait_s,
        names.ATTR_CONSUMER_TIME: report.consumer_time_s,
        names.ATTR_EVENTS: report.events,
        names.ATTR_DELTAS: report.deltas,
        names.ATTR_SEQ_GAPS: report.sequence.gaps,
        names.ATTR_SEQ_SKIPPED: report.sequence.skipped,
        names.ATTR_SEQ_DUPLICATES: report.sequence.duplicates,
        names.ATTR_SEQ_OUT_OF_ORDER: report.sequence.out_of_order,
    }
    # None: unknown (a patch point is missing from the SDK; the unobserved attribute names what)
    _put_known(a, report, _REPORT_COUNTS_KNOWN)
    if report.max_keepalive_gap_ns is not None:
        a[names.ATTR_KEEPALIVE_MAX_GAP] = report.max_keepalive_gap_ns / 1e9
    if report.unobserved:
        a[names.ATTR_UNOBSERVED] = report.unobserved
    if report.resumed:
        a[names.ATTR_RESUMED] = True
    if report.abandoned_reason:
        a[names.ATTR_ABANDONED_REASON] = report.abandoned_reason
    if report.request_id:
        a[names.ATTR_REQUEST_ID] = report.request_id
    # the time to first delta on every stream span: under an SDK's CLIENT span, gen_ai.response.time_to_first_chunk
    # is the SDK's value
    _put_known(a, report, _REPORT_TIMES_KNOWN)
    if report.service_tier:
        a[names.ATTR_OPENAI_SERVICE_TIER] = report.service_tier
    if report.system_fingerprint:
        a[names.ATTR_OPENAI_SYSTEM_FINGERPRINT] = report.system_fingerprint
    if report.provider_latency_ms is not None:
        a[names.ATTR_BEDROCK_LATENCY_MS] = report.provider_latency_ms
    tps = report.output_tokens_per_second
    if tps is not None:
        a[names.ATTR_OUTPUT_TOKENS_PER_SECOND] = tps
    if report.response_model:
        a[names.ATTR_RESPONSE_MODEL] = report.response_model
    if report.response_id:
        a[names.ATTR_RESPONSE_ID] = report.response_id
    reasons = tuple(report.finish_reasons)  # what the SDK would store
    if latest and report.outcome in names.FINISH_REASON_PADDED_OUTCOMES and len(reasons) < choices:
        # a finish reason was expected for each choice the stream did not finish: the conventions say `error`
        reasons += (names.FINISH_REASON_ERROR,) * (choices - len(reasons))
    if reasons:
        a[names.ATTR_RESPONSE_FINISH_REASONS] = reasons
    if report.is_bad:
        # the provider's code as sent where there is one (a trace query finds the exact cause), else the class
        klass = report.error_class or names.EC_OTHER
        a[names.ATTR_ERROR_TYPE] = report.error_type or klass
        a[names.ATTR_ERROR_CLASS] = klass
        phase = report.failure_phase  # (set for every bad outcome)
        if phase is not None:
            a[names.ATTR_FAILURE_PHASE] = phase
    if not internal:
        if report.time_to_first_delta_s is not None:
            a[names.ATTR_RESPONSE_TTFC] = report.time_to_first_delta_s
        u = report.usage
        _put_known(a, u, _USAGE_KNOWN)
        for key, field in _USAGE_BREAKDOWN:
            value = getattr(u, field)
            # the latest conventions: a breakdown only where the provider reported a non-zero count
            if value is not None and (value or not latest):
                a[key] = value
    clean_attributes(a)
    return a


def _put_known(a: Attrs, source: object, table: tuple[tuple[str, str], ...]) -> None:
    """Each attribute of ``table`` whose value, the field of ``source`` it names, is known, in the table's order:
    None is unknown, and left out."""
    for key, field in table:
        value = getattr(source, field)
        if value is not None:
            a[key] = value
