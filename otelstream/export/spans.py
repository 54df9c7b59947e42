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
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider

from otelstream import __version__, _guard, names
from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.sanitize import clean_attributes, clean_text
from otelstream.export.genai_peers import current_peer
from otelstream.export.handle import ConnectionHandle, StreamHandle, Tracked
from otelstream.export.span_attributes import (
    Attrs,
    attribute_blind,
    creation_attributes,
    report_attributes,
    request_attributes,
)

_MAX_NAMES = 256  # span names kept (request models are the caller's strings: bounded by this, not by them)
_STALL_MATCH_NS = 5_000_000  # a report stall within 5 ms of a live-reported one is the same stall


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
        """ "{operation} {request model}", cleaned: kept per (surface, model) (the operation follows the surface), up
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
