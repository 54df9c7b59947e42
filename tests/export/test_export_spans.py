"""Span sink: name, kind, parent, attributes, events, status, timestamps; INTERNAL child under a GenAI peer."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from otelstream import names
from otelstream.core.report import Anomaly, SequenceStats, Stall
from tests.export.harness import T0, Clock, Ended, FakeTracker, make_report, make_start, run_stream

# Every attribute key a stream span may carry: anything else (prompt, output, headers) is a leak.
ALLOWED_KEYS = {v for k, v in vars(names).items() if k.startswith("ATTR_")}


def spans(exporter: InMemorySpanExporter, name: str | None = None) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if name is None or s.name == name]


def test_completed_stream_client_span(make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter) -> None:
    p = make_pipeline()
    _handle, _, _report = run_stream(p, clock)
    assert p.flush(5.0)
    (span,) = spans(span_exporter)
    assert span.name == "chat gpt-test"
    assert span.kind is SpanKind.CLIENT
    assert span.parent is None
    assert span.status.status_code is StatusCode.UNSET
    a = dict(span.attributes or {})
    assert a == {
        names.ATTR_OPERATION_NAME: "chat",
        names.ATTR_PROVIDER_NAME: "openai",
        names.ATTR_REQUEST_MODEL: "gpt-test",
        names.ATTR_REQUEST_STREAM: True,
        names.ATTR_SERVER_ADDRESS: "127.0.0.1",
        names.ATTR_SERVER_PORT: 8080,
        names.ATTR_OPENAI_API_TYPE: "responses",
        names.ATTR_SURFACE: "responses",
        names.ATTR_OUTCOME: "completed",
        names.ATTR_RETRIES: 0,
        names.ATTR_REQUEST_ID: "req_1",
        names.ATTR_TIME_TO_FIRST_EVENT: 0.1,
        names.ATTR_TIME_TO_FIRST_DELTA: 0.2,
        names.ATTR_TIME_TO_FIRST_OUTPUT: 0.3,
        names.ATTR_MAX_WAIT: 0.2,
        names.ATTR_CONSUMER_TIME: 0.05,
        names.ATTR_EVENTS: 12,
        names.ATTR_DELTAS: 5,
        names.ATTR_KEEPALIVES: 0,
        names.ATTR_SEQ_GAPS: 0,
        names.ATTR_SEQ_SKIPPED: 0,
        names.ATTR_SEQ_DUPLICATES: 0,
        names.ATTR_SEQ_OUT_OF_ORDER: 0,
        names.ATTR_OUTPUT_TOKENS_PER_SECOND: 5 / 1.3,
        names.ATTR_RESPONSE_MODEL: "gpt-test-2025",
        names.ATTR_RESPONSE_ID: "resp_1",
        names.ATTR_RESPONSE_FINISH_REASONS: ("stop",),
        names.ATTR_RESPONSE_TTFC: 0.2,
        names.ATTR_USAGE_INPUT: 10,
        names.ATTR_USAGE_OUTPUT: 5,
        names.ATTR_USAGE_CACHE_READ: 2,
        names.ATTR_USAGE_CACHE_WRITE: 0,
        names.ATTR_USAGE_REASONING: 1,
    }
    assert set(a) <= ALLOWED_KEYS
    # explicit timestamps from the report: the span lasts exactly the report's 1.5 s
    assert span.end_time is not None and span.start_time is not None
    assert span.end_time - span.start_time == 1_500_000_000
    (ev,) = span.events
    assert ev.name == names.SPAN_EVENT_FIRST_DELTA
    assert ev.timestamp - span.start_time == 200_000_000


def test_request_parameters_and_server_response_fields(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    """The request parameters as the call passed them (choice.count only when it is not 1), the service
    tier and system fingerprint when the server sent them; none of them when absent."""
    p = make_pipeline()
    run_stream(
        p, clock, {"service_tier": "default", "system_fingerprint": "fp_1"}, surface=names.CHAT_COMPLETIONS,
        request_max_tokens=64, request_temperature=0.0, request_top_p=0.5, request_choice_count=2,
    )  # fmt: skip
    run_stream(p, clock, request_choice_count=1)
    assert p.flush(5.0)
    first, second = spans(span_exporter)
    a = dict(first.attributes or {})
    assert {k: a[k] for k in a if k.startswith(("gen_ai.request.", "openai.response."))} == {
        names.ATTR_REQUEST_MODEL: "gpt-test",
        names.ATTR_REQUEST_STREAM: True,
        names.ATTR_REQUEST_MAX_TOKENS: 64,
        names.ATTR_REQUEST_TEMPERATURE: 0.0,
        names.ATTR_REQUEST_TOP_P: 0.5,
        names.ATTR_REQUEST_CHOICE_COUNT: 2,
        names.ATTR_OPENAI_SERVICE_TIER: "default",
        names.ATTR_OPENAI_SYSTEM_FINGERPRINT: "fp_1",
    }
    b = dict(second.attributes or {})
    assert not [k for k in b if k.startswith("openai.response.") or k in (
        names.ATTR_REQUEST_MAX_TOKENS, names.ATTR_REQUEST_TEMPERATURE, names.ATTR_REQUEST_TOP_P,
        names.ATTR_REQUEST_CHOICE_COUNT)]  # fmt: skip


@pytest.mark.parametrize("outcome", names.OUTCOMES)
def test_status_per_outcome(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter, outcome: str
) -> None:
    p = make_pipeline()
    error_type = "server_error" if outcome == names.ERROR else None
    run_stream(p, clock, {"outcome": outcome, "error_type": error_type})
    assert p.flush(5.0)
    (span,) = spans(span_exporter)
    a = span.attributes or {}
    assert a[names.ATTR_OUTCOME] == outcome
    klass = {names.ERROR: names.EC_SERVER_ERROR, names.CUT: names.EC_CUT,
             names.TRANSPORT_ERROR: names.EC_CONNECTION}.get(outcome, names.EC_OTHER)  # fmt: skip
    if outcome in names.BAD_OUTCOMES:
        assert span.status.status_code is StatusCode.ERROR
        # the provider's code where there is one, else the class; the class always
        assert a[names.ATTR_ERROR_TYPE] == (error_type or klass)
        assert a[names.ATTR_ERROR_CLASS] == klass
        # the report's 5 deltas reached the caller before the failure; an http_error never had output
        phase = names.PHASE_BEFORE_OUTPUT if outcome == names.HTTP_ERROR else names.PHASE_DURING_OUTPUT
        assert a[names.ATTR_FAILURE_PHASE] == phase
    else:
        assert span.status.status_code is StatusCode.UNSET
        assert names.ATTR_ERROR_TYPE not in a and names.ATTR_ERROR_CLASS not in a
        assert names.ATTR_FAILURE_PHASE not in a


def test_span_name_without_model_and_completions_operation(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    p = make_pipeline()
    run_stream(p, clock, request_model=None)
    run_stream(p, clock, surface=names.COMPLETIONS, request_model="davinci")
    assert p.flush(5.0)
    assert sorted(s.name for s in spans(span_exporter)) == ["chat", "text_completion davinci"]


def test_stream_finished_twice_ends_once(make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter) -> None:
    p = make_pipeline()
    handle, _, report = run_stream(p, clock)
    p.stream_finished(Ended(report), handle)
    p.stream_finished(Ended(report), handle)
    p.stream_finished(Ended(report), object())  # a foreign handle is ignored
    assert p.flush(5.0)
    assert len(spans(span_exporter)) == 1
    assert not p.dispatcher.pending


def test_events_capped_at_16(make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter) -> None:
    p = make_pipeline()
    anomalies = tuple(Anomaly(names.ANOM_UNKNOWN_EVENT, i, f"type x{i}") for i in range(30))
    stalls = (Stall(0.5, 31.0), Stall(40.0, 35.0))
    run_stream(p, clock, {"anomalies": anomalies, "stalls": stalls, "stall_count": 2})
    assert p.flush(5.0)
    (span,) = spans(span_exporter)
    evs = [e.name for e in span.events]
    assert len(evs) == names.MAX_SPAN_EVENTS
    assert evs[:3] == [names.SPAN_EVENT_FIRST_DELTA, names.SPAN_EVENT_STALL, names.SPAN_EVENT_STALL]
    assert set(evs[3:]) == {names.SPAN_EVENT_ANOMALY}
    stall = span.events[1]
    assert stall.attributes == {names.ATTR_STALL_OFFSET: 0.5, names.ATTR_STALL_WAIT: 31.0}
    assert span.events[3].attributes == {
        names.ATTR_ANOMALY_KIND: names.ANOM_UNKNOWN_EVENT,
        names.ATTR_ANOMALY_EVENT_INDEX: 0,
        names.ATTR_ANOMALY_DETAIL: "type x0",
    }


def test_span_events_setting_off(make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter) -> None:
    p = make_pipeline(span_events=False)
    run_stream(p, clock, {"anomalies": (Anomaly(names.ANOM_NO_DELTA, 0),)})
    assert p.flush(5.0)
    assert spans(span_exporter)[0].events == ()


def test_sequence_and_abandoned_attributes(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    p = make_pipeline()
    seq = SequenceStats(first=0, last=9, gaps=2, skipped=3, duplicates=1, out_of_order=1)
    run_stream(p, clock, {"outcome": names.ABANDONED, "abandoned_reason": "close", "sequence": seq, "retries": 2})
    assert p.flush(5.0)
    a = spans(span_exporter)[0].attributes or {}
    assert (a[names.ATTR_SEQ_GAPS], a[names.ATTR_SEQ_SKIPPED]) == (2, 3)
    assert (a[names.ATTR_SEQ_DUPLICATES], a[names.ATTR_SEQ_OUT_OF_ORDER]) == (1, 1)
    assert a[names.ATTR_ABANDONED_REASON] == "close"
    assert a[names.ATTR_RETRIES] == 2


def test_span_is_current_during_send_and_http_span_nests(
    make_pipeline: Any, clock: Clock, tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> None:
    p = make_pipeline()
    start = make_start(t_request_ns=clock())
    tracker = FakeTracker(start, clock)
    handle = p.stream_started(start, tracker)
    token = p.activate(handle)
    try:  # what HTTPX2ClientInstrumentor does inside the send
        http = tracer_provider.get_tracer("opentelemetry.instrumentation.httpx")
        with http.start_as_current_span("POST", kind=SpanKind.CLIENT):
            pass
    finally:
        p.deactivate(token)
    assert not trace.get_current_span().is_recording()
    clock.advance(0.5)
    tracker.ended = True
    p.stream_finished(Ended(make_report(start, t_end_ns=clock())), handle)
    assert p.flush(5.0)
    (http_span,) = spans(span_exporter, "POST")
    (stream_span,) = spans(span_exporter, "chat gpt-test")
    assert http_span.parent is not None
    assert http_span.parent.span_id == stream_span.context.span_id


def test_parent_is_callers_current_span(
    make_pipeline: Any, clock: Clock, tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> None:
    p = make_pipeline()
    app = tracer_provider.get_tracer("app")
    with app.start_as_current_span("handler") as outer:
        _handle, _, _ = run_stream(p, clock)
    assert p.flush(5.0)
    (span,) = spans(span_exporter, "chat gpt-test")
    assert span.kind is SpanKind.CLIENT  # an app's INTERNAL span is a parent, not a GenAI peer
    assert span.parent is not None and span.parent.span_id == outer.get_span_context().span_id


@pytest.mark.parametrize(
    ("scope", "attrs"),
    [
        ("com.anthropic.sdk.python", {}),
        ("opentelemetry.instrumentation.genai.anthropic", {}),
        ("some.unnamed.peer", {names.ATTR_OPERATION_NAME: "chat"}),
    ],
)
def test_internal_child_under_genai_peer_span(
    make_pipeline: Any,
    clock: Clock,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    scope: str,
    attrs: dict[str, str],
) -> None:
    p = make_pipeline()
    sdk = tracer_provider.get_tracer(scope)
    with sdk.start_as_current_span("anthropic.messages.create", kind=SpanKind.CLIENT, attributes=attrs) as sdk_span:
        _handle, _, _ = run_stream(p, clock, provider=names.PROVIDER_ANTHROPIC, surface=names.MESSAGES)
    assert p.flush(5.0)
    (span,) = spans(span_exporter, names.SPAN_STREAM_INTERNAL)
    assert span.kind is SpanKind.INTERNAL
    assert span.parent is not None and span.parent.span_id == sdk_span.get_span_context().span_id
    a = span.attributes or {}
    assert not [k for k in a if k.startswith("gen_ai.usage.")]
    assert names.ATTR_RESPONSE_TTFC not in a
    # the one TTFD a trace query can rely on whichever span is the CLIENT one, and TTFO (no semconv twin)
    assert a[names.ATTR_TIME_TO_FIRST_DELTA] == 0.2 and a[names.ATTR_TIME_TO_FIRST_OUTPUT] == 0.3
    assert a[names.ATTR_OUTCOME] == "completed" and a[names.ATTR_DELTAS] == 5
    # exactly one CLIENT span per call
    assert [s.kind for s in spans(span_exporter)].count(SpanKind.CLIENT) == 1


def test_websocket_connection_span(make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter) -> None:
    p = make_pipeline()
    conn = p.connection_opened("api.example", 443)
    p.connection_event(conn, names.SPAN_EVENT_RECONNECT, {"attempt": 1})
    for sid in ("a", "b"):
        start = make_start(surface=names.RESPONSES_WEBSOCKET, stream_id=sid, t_request_ns=clock())
        tracker = FakeTracker(start, clock)
        h = p.stream_started(start, tracker, conn)
        clock.advance(0.3)
        tracker.ended = True
        p.stream_finished(Ended(make_report(start, t_end_ns=clock())), h)
    p.connection_closed(conn, None)
    p.connection_closed(conn, None)  # idempotent
    assert p.flush(5.0)
    (ws,) = spans(span_exporter, names.SPAN_WEBSOCKET)
    # a connection is not a call: span metrics and service graphs count only its responses (CLIENT)
    assert ws.kind is SpanKind.INTERNAL
    assert [e.name for e in ws.events] == [names.SPAN_EVENT_RECONNECT]
    children = spans(span_exporter, "chat gpt-test")
    assert len(children) == 2
    for c in children:
        assert c.parent is not None and c.parent.span_id == ws.context.span_id
    assert sorted((c.attributes or {})[names.ATTR_STREAM_ID] for c in children) == ["a", "b"]


def test_start_time_from_monotonic_anchor(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    """The request was sent 2 s (monotonic) before stream_started: the span starts 2 s before 'now'."""
    import time

    p = make_pipeline()
    start = make_start(t_request_ns=T0)
    clock.now = T0 + 2_000_000_000
    tracker = FakeTracker(start, clock)
    before = time.time_ns()
    h = p.stream_started(start, tracker)
    clock.advance(1.0)
    tracker.ended = True
    p.stream_finished(Ended(make_report(start, t_end_ns=clock())), h)
    assert p.flush(5.0)
    (span,) = spans(span_exporter)
    assert span.start_time is not None and span.end_time is not None
    assert abs((before - span.start_time) - 2_000_000_000) < 50_000_000
    assert span.end_time - span.start_time == 3_000_000_000


def test_http_error_span(make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter) -> None:
    p = make_pipeline()
    run_stream(
        p, clock,
        {"outcome": names.HTTP_ERROR, "error_type": "rate_limit_exceeded", "events": 0, "deltas": 0,
         "time_to_first_event_ns": None, "time_to_first_delta_ns": None, "time_to_first_output_ns": None,
         "usage": make_report().usage.__class__()},
    )  # fmt: skip
    assert p.flush(5.0)
    (span,) = spans(span_exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "rate_limit_exceeded"
    a = span.attributes or {}
    assert a[names.ATTR_ERROR_TYPE] == "rate_limit_exceeded"
    assert a[names.ATTR_FAILURE_PHASE] == names.PHASE_BEFORE_OUTPUT and names.ATTR_TIME_TO_FIRST_OUTPUT not in a
    assert span.events == ()


def test_a_sampler_sees_the_creation_attributes_and_the_span_ends_with_all(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    """At the start only what the semantic conventions ask for at span creation (and the application's own): the
    OTel SDK cleans each attribute given to start_span on the caller's thread. The rest is set at the end."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler, SamplingResult

    seen: list[dict[str, Any]] = []

    class Recording(Sampler):
        def should_sample(self, parent_context: Any, trace_id: int, name: str, kind: Any = None,
                          attributes: Any = None, *rest: Any) -> SamplingResult:  # fmt: skip
            seen.append(dict(attributes or {}))
            return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, *rest)

        def get_description(self) -> str:
            return "recording"

    tp = TracerProvider(sampler=Recording())
    tp.add_span_processor(SimpleSpanProcessor(span_exporter))
    try:
        p = make_pipeline(tracer_provider=tp)
        run_stream(p, clock, attributes={"tenant.id": "acme"}, request_max_tokens=64)
        assert p.flush(5.0)
    finally:
        tp.shutdown()
    assert seen == [{
        names.ATTR_OPERATION_NAME: "chat",
        names.ATTR_PROVIDER_NAME: "openai",
        names.ATTR_REQUEST_MODEL: "gpt-test",
        names.ATTR_SERVER_ADDRESS: "127.0.0.1",
        names.ATTR_SERVER_PORT: 8080,
        "tenant.id": "acme",
    }]  # fmt: skip
    (span,) = spans(span_exporter)
    a = dict(span.attributes or {})
    assert a[names.ATTR_SURFACE] == "responses" and a[names.ATTR_REQUEST_STREAM] is True
    assert a[names.ATTR_REQUEST_MAX_TOKENS] == 64 and a["tenant.id"] == "acme" and a[names.ATTR_OUTCOME] == "completed"


def test_a_sampler_that_reads_no_attribute_gets_none_and_the_span_ends_with_all(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter
) -> None:
    """The SDK's own samplers (here the default, parent-based always-on) decide without attributes: the span starts
    with none (each costs the caller the SDK's cleaning) and ends with the creation attributes among the rest."""
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    at_start: list[dict[str, Any]] = []

    class AtStart(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            at_start.append(dict(span.attributes or {}))

    tp = TracerProvider()
    tp.add_span_processor(AtStart())
    tp.add_span_processor(SimpleSpanProcessor(span_exporter))
    try:
        p = make_pipeline(tracer_provider=tp)
        run_stream(p, clock, attributes={"tenant.id": "acme"})
        assert p.flush(5.0)
    finally:
        tp.shutdown()
    assert at_start == [{}]
    (span,) = spans(span_exporter)
    a = dict(span.attributes or {})
    assert {k: a.get(k) for k in (names.ATTR_OPERATION_NAME, names.ATTR_PROVIDER_NAME, names.ATTR_REQUEST_MODEL,
                                  names.ATTR_SERVER_ADDRESS, names.ATTR_SERVER_PORT, "tenant.id")} == {
        names.ATTR_OPERATION_NAME: "chat", names.ATTR_PROVIDER_NAME: "openai", names.ATTR_REQUEST_MODEL: "gpt-test",
        names.ATTR_SERVER_ADDRESS: "127.0.0.1", names.ATTR_SERVER_PORT: 8080, "tenant.id": "acme",
    }  # fmt: skip
    assert a[names.ATTR_OUTCOME] == "completed" and span.name == "chat gpt-test"


def test_which_samplers_read_no_attribute() -> None:
    from opentelemetry.sdk.trace import sampling

    from otelstream.export.span_attributes import attribute_blind

    class Own(sampling.Sampler):
        def should_sample(self, *args: Any, **kwargs: Any) -> sampling.SamplingResult:
            return sampling.ALWAYS_ON.should_sample(*args, **kwargs)

        def get_description(self) -> str:
            return "own"

    blind = [TracerProvider().sampler, sampling.ALWAYS_ON, sampling.ALWAYS_OFF, sampling.TraceIdRatioBased(0.5),
             sampling.ParentBasedTraceIdRatio(0.1), sampling.ParentBased(sampling.TraceIdRatioBased(0.3))]  # fmt: skip
    reading = [Own(), sampling.ParentBased(Own()), sampling.ParentBased(sampling.ALWAYS_ON, local_parent_sampled=Own()),
               None, object()]  # fmt: skip
    assert [attribute_blind(s) for s in blind] == [True] * len(blind)
    assert [attribute_blind(s) for s in reading] == [False] * len(reading)


def test_span_names_kept_per_surface_and_model_read_as_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    from otelstream.core.report import StreamStart
    from otelstream.export import spans

    sink = spans.SpanSink(TracerProvider())
    monkeypatch.setattr(spans, "_MAX_NAMES", 3)
    starts = [
        StreamStart(surface=names.CHAT_COMPLETIONS, request_model="gpt-x"),
        StreamStart(surface=names.COMPLETIONS, request_model="gpt-x"),
        StreamStart(surface=names.MESSAGES, request_model=None),
        StreamStart(surface=names.CHAT_COMPLETIONS, request_model="bad\nmodel" + "m" * 300),
        StreamStart(surface=names.CHAT_COMPLETIONS, request_model="gpt-x"),
    ]
    for start in starts * 2:
        name = f"{start.operation} {start.request_model}" if start.request_model else start.operation
        assert sink._span_name(start) == spans.clean_text(name, names.MAX_SPAN_NAME_LENGTH)
    assert len(sink._names) == 3  # bounded
