"""The span sink: one span per stream, started at the send on the caller's thread, ended on the export thread.

Only ``start`` runs on the caller's thread (it must: the span has to be current during the send so the HTTP
client span nests under it). Everything else (attributes from the report, events, status, ``end()`` with its span
processors and possibly a blocking exporter) runs on the dispatcher thread, with explicit timestamps converted
from the tracker's monotonic clock through an anchor pair (wall, monotonic) taken when the span started.

No prompt, output text, tool argument, header (except the request id) or credential ever reaches a span: every
attribute below is a count, a time, an id or a bounded enum taken from the report. Every string (span name,
attributes, event attributes, status description) is cleaned on its way in (``core.sanitize``): a model or id from
the caller or the server that is not valid UTF-8 would otherwise make the OTLP encoder drop the whole batch.
"""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import sampling
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from otelstream import __version__, _guard, names
from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.sanitize import clean_attributes, clean_text
from otelstream.export.handle import ConnectionHandle, StreamHandle, Tracked

Attrs = dict[str, AttributeValue]

_MAX_NAMES = 256  # span names kept (request models are the caller's strings: bounded by this, not by them)
_STALL_MATCH_NS = 5_000_000  # a report stall within 5 ms of a live-reported one is the same stall


def current_peer() -> str | None:
    """The instrumentation scope of the current span when it is already the GenAI call's CLIENT span (Anthropic SDK
    or a named peer; "" for an unnamed one), else None.

    Then otelstream nests an INTERNAL child instead of a second CLIENT span, so a trace has exactly one CLIENT
    span per call and token usage is counted once.
    """
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    scope = getattr(span, "instrumentation_scope", None)
    scope_name: str = getattr(scope, "name", None) or ""
    if scope_name.startswith(names.GENAI_PEER_SCOPES):
        return scope_name
    if scope_name == names.TRACER_NAME:
        return None  # our own span (e.g. a WebSocket connection span) is a parent, not a peer
    # An unnamed peer: a CLIENT span that already says it is a GenAI operation.
    if getattr(span, "kind", None) is SpanKind.CLIENT:
        attrs = getattr(span, "attributes", None) or {}
        if names.ATTR_OPERATION_NAME in attrs:
            return scope_name
    return None


def peer_span_current() -> bool:
    """True when the current span is already the GenAI call's CLIENT span (``current_peer``)."""
    return current_peer() is not None


def peer_records_metrics(scope_name: str | None) -> bool:
    """Whether the GenAI peer whose CLIENT span a stream nests under records the gen_ai.client.* metrics of the call
    itself (every one but those known to have no meter), so otelstream must not record them a second time."""
    return scope_name is not None and not scope_name.startswith(names.GENAI_SCOPES_WITHOUT_METRICS)


class SpanSink:
    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, span_events: bool = True,
        semconv: str = names.SEMCONV_DEFAULT,
    ) -> None:  # fmt: skip
        # With tracer_provider=None this is the global ProxyTracer: it follows a provider installed later.
        self.provider = tracer_provider
        self._tracer = trace.get_tracer(names.TRACER_NAME, __version__, tracer_provider=tracer_provider)
        self._span_events = span_events
        # A span has one value per attribute, so under /dup it follows the latest conventions (their attributes keep
        # the old names; only the values differ).
        self._latest = semconv != names.SEMCONV_DEFAULT
        # The tracer's sampler reads no attribute (the SDK's own samplers): the span starts with none, and those a
        # sampler could have read are set at the end with the rest, off the caller's thread (the SDK cleans each
        # attribute given to start_span: ≈ 8 000 instructions apiece).
        self._blind = attribute_blind(getattr(self._tracer, "sampler", None))
        self._names: dict[tuple[str, str | None], str] = {}  # _span_name

    # --- caller's thread ------------------------------------------------------------------------------------
    def start(
        self, start: StreamStart, tracker: Tracked, labels: tuple[str, ...], parent: object | None
    ) -> StreamHandle:
        try:
            mono_now: int = tracker.clock()
        except Exception:  # a tracker without a clock still gets a span (times then approximate)
            mono_now = time.monotonic_ns()
        wall_now = time.time_ns()
        t_request = start.t_request_ns or mono_now
        start_wall = wall_now - (mono_now - t_request)

        ctx: Context | None = None
        peer: str | None = None
        if isinstance(parent, ConnectionHandle):
            ctx = trace.set_span_in_context(parent.span)
        else:
            peer = current_peer()
        internal = peer is not None

        # What a sampler may decide on (the semantic conventions' attributes "at span creation") and the
        # application's own, unless the sampler reads none; the rest of the request's attributes are set at the end,
        # off the caller's thread (request_attributes): each attribute costs the caller the OTel SDK's cleaning of it.
        attrs = None if self._blind else creation_attributes(start)
        if internal:
            name, kind = names.SPAN_STREAM_INTERNAL, SpanKind.INTERNAL
        else:
            name, kind = self._span_name(start), SpanKind.CLIENT
        try:
            span = self._tracer.start_span(name, context=ctx, kind=kind, attributes=attrs, start_time=start_wall)
        except Exception as exc:
            # a broken tracer or span processor must cost the span only: metrics still need a handle
            _guard.report("export.span_start", exc)
            span = trace.INVALID_SPAN
        # anchored at the request (one line through the same two clock readings): the handle keeps start's own int
        return StreamHandle(
            span, start, tracker, labels, start_wall, t_request, internal,
            names.MAX_SPAN_EVENTS if self._span_events else 0, peer,
        )  # fmt: skip

    def _span_name(self, start: StreamStart) -> str:
        """"{operation} {request model}", cleaned: kept per (surface, model) (the operation follows the surface), up
        to ``_MAX_NAMES`` of them, so a stream of a known model neither formats nor cleans it again."""
        key = (start.surface, start.request_model)
        name = self._names.get(key)
        if name is None:
            name = f"{start.operation} {start.request_model}" if start.request_model else start.operation
            name = clean_text(name, names.MAX_SPAN_NAME_LENGTH)
            if len(self._names) < _MAX_NAMES:
                self._names[key] = name
        return name

    def connection_opened(self, server_address: str | None, server_port: int | None) -> ConnectionHandle:
        attrs: Attrs = {names.ATTR_PROVIDER_NAME: names.PROVIDER_OPENAI, names.ATTR_SURFACE: names.RESPONSES_WEBSOCKET}
        if server_address:
            attrs[names.ATTR_SERVER_ADDRESS] = server_address
        if server_port is not None:
            attrs[names.ATTR_SERVER_PORT] = server_port
        clean_attributes(attrs)
        # INTERNAL: a connection is not a call, so span metrics and service graphs count only its responses
        span = self._tracer.start_span(names.SPAN_WEBSOCKET, kind=SpanKind.INTERNAL, attributes=attrs)
        return ConnectionHandle(span)

    # --- watchdog thread ------------------------------------------------------------------------------------
    def stall_began(self, handle: StreamHandle, t_pull_ns: int, now_ns: int, threshold_ns: int) -> None:
        """A wait just crossed the stall threshold: one span event, at the moment the wait began."""
        if handle.finished or handle.events_left <= 0 or not handle.span.is_recording():
            return
        handle.events_left -= 1
        handle.live_stalls.append(t_pull_ns)
        # from the last attempt's send, as the report's stalls (the start's time is the first attempt's)
        ref = handle.tracker_ref
        tracker = ref() if ref is not None else None
        t0 = getattr(tracker, "t_request", 0) or handle.start.t_request_ns or handle.mono_anchor_ns
        handle.span.add_event(
            names.SPAN_EVENT_STALL,
            {
                names.ATTR_STALL_OFFSET: max(0, t_pull_ns - t0) / 1e9,
                names.ATTR_STALL_WAIT: (now_ns - t_pull_ns) / 1e9,
                names.ATTR_STALL_ONGOING: True,
            },
            timestamp=handle.wall_ns(t_pull_ns),
        )

    # --- dispatcher thread ----------------------------------------------------------------------------------
    def finish(self, report: StreamReport, handle: StreamHandle) -> None:
        if handle.ended:  # exactly once, whatever path (report, orphan, shutdown) got here first
            return
        handle.ended = True
        span = handle.span
        if not span.is_recording():
            return
        attrs = report_attributes(
            report, internal=handle.internal, latest=self._latest, choices=handle.start.request_choice_count or 1
        )
        attrs.update(request_attributes(handle.start))
        if self._blind:
            attrs.update(creation_attributes(handle.start))
        span.set_attributes(attrs)
        if handle.events_left > 0:
            self._add_events(report, handle)
        if report.is_bad:
            span.set_status(Status(StatusCode.ERROR, clean_text(report.error_type or report.error_class or "")))
        start_wall = handle.wall_ns(handle.start.t_request_ns or handle.mono_anchor_ns)
        span.end(end_time=max(start_wall, handle.wall_ns(report.t_end_ns)))

    def finish_orphan(self, handle: StreamHandle) -> None:
        """The tracker vanished without a report: end the span as abandoned (gc) rather than leak it open."""
        if handle.ended:
            return
        handle.ended = True
        span = handle.span
        if span.is_recording():
            attrs = request_attributes(handle.start)
            if self._blind:
                attrs.update(creation_attributes(handle.start))
            attrs.update({names.ATTR_OUTCOME: names.ABANDONED, names.ATTR_ABANDONED_REASON: names.ABANDON_GC})
            if self._latest:  # no finish reason came for any choice
                choices = handle.start.request_choice_count or 1
                attrs[names.ATTR_RESPONSE_FINISH_REASONS] = (names.FINISH_REASON_ERROR,) * choices
            span.set_attributes(attrs)
            span.end()

    def connection_closed(self, handle: ConnectionHandle, error_type: str | None, end_wall_ns: int) -> None:
        span = handle.span
        if error_type:
            error_type = clean_text(error_type)
            span.set_attribute(names.ATTR_ERROR_TYPE, error_type)
            span.set_status(Status(StatusCode.ERROR, error_type))
        span.end(end_time=end_wall_ns)

    def _add_events(self, report: StreamReport, handle: StreamHandle) -> None:
        span = handle.span
        t0 = report.t_request_ns
        end_wall = handle.wall_ns(report.t_end_ns)
        if report.time_to_first_delta_ns is not None and handle.events_left > 0:
            handle.events_left -= 1
            span.add_event(
                names.SPAN_EVENT_FIRST_DELTA,
                {names.ATTR_RESPONSE_TTFC: report.time_to_first_delta_ns / 1e9},
                timestamp=handle.wall_ns(t0 + report.time_to_first_delta_ns),
            )
        live = handle.live_stalls
        for stall in report.stalls:
            if handle.events_left <= 0:
                return
            begin = t0 + int(stall.offset_s * 1e9)
            if any(abs(begin - t) <= _STALL_MATCH_NS for t in live):
                continue  # already reported live by the watchdog when it began
            handle.events_left -= 1
            span.add_event(
                names.SPAN_EVENT_STALL,
                {names.ATTR_STALL_OFFSET: stall.offset_s, names.ATTR_STALL_WAIT: stall.wait_s},
                timestamp=handle.wall_ns(begin),
            )
        for anomaly in report.anomalies:
            if handle.events_left <= 0:
                return
            handle.events_left -= 1
            attrs: Attrs = {
                names.ATTR_ANOMALY_KIND: anomaly.kind,
                names.ATTR_ANOMALY_EVENT_INDEX: anomaly.event_index,
            }
            if anomaly.detail:
                attrs[names.ATTR_ANOMALY_DETAIL] = anomaly.detail
            clean_attributes(attrs)
            # Anomalies carry an event index, not a time: stamp them at the end of the stream.
            span.add_event(names.SPAN_EVENT_ANOMALY, attrs, timestamp=end_wall)


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


def request_attributes(start: StreamStart) -> Attrs:
    """The request's span attributes a sampler does not need at the span's start (no strings from server data)."""
    a: Attrs = {names.ATTR_REQUEST_STREAM: True, names.ATTR_SURFACE: start.surface}
    if start.api_type:
        a[names.ATTR_OPENAI_API_TYPE] = start.api_type
    if start.request_max_tokens is not None:
        a[names.ATTR_REQUEST_MAX_TOKENS] = start.request_max_tokens
    if start.request_temperature is not None:
        a[names.ATTR_REQUEST_TEMPERATURE] = start.request_temperature
    if start.request_top_p is not None:
        a[names.ATTR_REQUEST_TOP_P] = start.request_top_p
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
    if report.retries is not None:
        a[names.ATTR_RETRIES] = report.retries
    if report.keepalives is not None:
        a[names.ATTR_KEEPALIVES] = report.keepalives
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
    if report.stream_id is not None:
        a[names.ATTR_STREAM_ID] = report.stream_id
    if report.time_to_first_event_s is not None:
        a[names.ATTR_TIME_TO_FIRST_EVENT] = report.time_to_first_event_s
    if report.time_to_first_delta_s is not None:
        # on every stream span: under an SDK's CLIENT span, gen_ai.response.time_to_first_chunk is the SDK's value
        a[names.ATTR_TIME_TO_FIRST_DELTA] = report.time_to_first_delta_s
    if report.time_to_first_output_s is not None:
        a[names.ATTR_TIME_TO_FIRST_OUTPUT] = report.time_to_first_output_s
    if report.service_tier:
        a[names.ATTR_OPENAI_SERVICE_TIER] = report.service_tier
    if report.system_fingerprint:
        a[names.ATTR_OPENAI_SYSTEM_FINGERPRINT] = report.system_fingerprint
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
        for key, value in ((names.ATTR_USAGE_INPUT, u.input_tokens), (names.ATTR_USAGE_OUTPUT, u.output_tokens)):
            if value is not None:
                a[key] = value
        for key, value in (
            (names.ATTR_USAGE_CACHE_READ, u.cache_read_input_tokens),
            (names.ATTR_USAGE_CACHE_WRITE, u.cache_write_input_tokens),
            (names.ATTR_USAGE_REASONING, u.reasoning_output_tokens),
        ):
            # the latest conventions: a breakdown only where the provider reported a non-zero count
            if value is not None and (value or not latest):
                a[key] = value
    clean_attributes(a)
    return a
