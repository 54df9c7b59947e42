"""Hostile strings in every text field a stream start and a report carry never reach a label, a span name, an
attribute, a span event or a status unclean (issue 21, defect 1): the scrape and the OTLP encoding keep working."""

from __future__ import annotations

import unicodedata
from typing import Any

from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, Counter, generate_latest

from otelstream import names
from otelstream.core.report import Anomaly
from tests.export.harness import Clock, Ended, FakeTracker, make_report, make_start

EVIL = "\udce9\n\x00\u202e\x1b[2J\u2028\x85"  # lone surrogate, newline, NUL, bidi override, escape, separators
CLEANED = "\ufffd" * 5 + "[2J" + "\ufffd" * 2


def strings_of(span: ReadableSpan) -> list[str]:
    """Every string of a finished span: name, status description, attribute and event values and names."""
    out = [span.name, span.status.description or ""]
    groups = [span.attributes or {}, *((e.attributes or {}) for e in span.events)]
    out.extend(e.name for e in span.events)
    for attrs in groups:
        for value in attrs.values():
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, tuple):
                out.extend(v for v in value if isinstance(v, str))
    return out


def assert_clean(text: str, limit: int = names.MAX_TEXT_LENGTH) -> None:
    text.encode("utf-8")
    assert len(text) <= limit, len(text)
    assert all(unicodedata.category(ch)[0] != "C" and ch not in "\u2028\u2029" for ch in text), ascii(text)


def test_hostile_start_and_report_strings_are_cleaned(
    make_pipeline: Any, clock: Clock, span_exporter: InMemorySpanExporter, registry: CollectorRegistry
) -> None:
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    app = Counter("app_requests", "the application's own metric", registry=registry)
    app.inc()
    try:
        p = make_pipeline(meter_provider=mp)
        model = ("gpt-4o" + EVIL) * 40  # longer than every limit
        start = make_start(request_model=model, server_address="host" + EVIL, stream_id="lane" + EVIL,
                           t_request_ns=clock())  # fmt: skip
        handle = p.stream_started(start, FakeTracker(start, clock))
        clock.advance(1.0)
        report = make_report(
            start, outcome=names.ERROR, t_end_ns=clock(), error_type="server_error" + EVIL,
            response_model="m" + EVIL, response_id="resp" + EVIL, request_id="req" + EVIL,
            finish_reasons=("stop" + EVIL, "length"),
            anomalies=(Anomaly(names.ANOM_UNKNOWN_EVENT, 3, "event type " + EVIL * 100),),
        )  # fmt: skip
        p.stream_finished(Ended(report), handle)
        conn = p.connection_opened("ws" + EVIL, 443)
        p.connection_event(conn, names.SPAN_EVENT_RECONNECT, {"close_code": 1006, "reason": "bye" + EVIL})
        p.connection_closed(conn, "websocket_close" + EVIL)
        assert p.flush(5.0)

        spans = span_exporter.get_finished_spans()
        assert len(spans) == 2
        encode_spans(spans).SerializeToString()  # what an OTLP exporter sends: raises on a lone surrogate
        stream = next(s for s in spans if s.name != names.SPAN_WEBSOCKET)
        assert_clean(stream.name, names.MAX_SPAN_NAME_LENGTH)
        assert stream.name == ("chat " + ("gpt-4o" + CLEANED) * 40)[: names.MAX_SPAN_NAME_LENGTH]
        for span in spans:
            for text in strings_of(span):
                assert_clean(text)
        attrs = stream.attributes or {}
        assert attrs[names.ATTR_RESPONSE_ID] == "resp" + CLEANED
        assert attrs[names.ATTR_RESPONSE_FINISH_REASONS] == ("stop" + CLEANED, "length")
        assert stream.status.description == "server_error" + CLEANED

        # native Prometheus: the scrape works (the application's metric included), the label is the cleaned model
        text = generate_latest(registry).decode("utf-8")
        assert "app_requests_total 1.0" in text
        label = (("gpt-4o" + CLEANED) * 40)[:64]  # model_label_max_length
        assert f'{names.LABEL_MODEL}="{label}"' in text
        # OTel metrics: the OTLP encoding works and carries the same label
        data = reader.get_metrics_data()
        assert data is not None
        encode_metrics(data).SerializeToString()
        models = {
            dict(point.attributes or {}).get(names.ATTR_REQUEST_MODEL)
            for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            for point in m.data.data_points  # type: ignore[union-attr]
        }  # fmt: skip
        assert models - {None} == {label}
    finally:
        mp.shutdown()


def test_allowlisted_model_with_a_surrogate_is_cleaned(
    make_pipeline: Any, clock: Clock, registry: CollectorRegistry
) -> None:
    # an allow-list read from a surrogate-escaped environment variable
    p = make_pipeline(model_allowlist=("m\udce9",))
    start = make_start(request_model="m\udce9", t_request_ns=clock())
    handle = p.stream_started(start, FakeTracker(start, clock))
    p.stream_finished(Ended(make_report(start, t_end_ns=clock())), handle)
    assert p.flush(5.0)
    assert f'{names.LABEL_MODEL}="m\ufffd"' in generate_latest(registry).decode("utf-8")
