"""Report attributes set straight into the SDK span (otelstream/export/span_direct.py) equal what
``span.set_attributes`` stores; every case the SDK would treat differently goes through ``set_attributes``."""

from __future__ import annotations

from typing import Any

import pytest
from exporthelpers import Clock, run_stream
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otelstream import _guard, names
from otelstream.core.report import Anomaly, Usage
from otelstream.export import span_direct
from otelstream.export.selfcheck import SelfCheck

REPORTS: list[dict[str, Any]] = [
    {},
    {"outcome": names.CUT, "error_type": None, "finish_reasons": ()},
    {
        "outcome": names.ERROR,
        "error_type": "overloaded_error",
        "finish_reasons": ("stop", "length"),
        "anomalies": (Anomaly(names.ANOM_MISSING_DONE, 3, "x"),),
    },
    {"usage": Usage(), "time_to_first_delta_ns": None, "resumed": True, "stream_id": "s-1"},
]


def spans_of(make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch, *, fast: bool) -> list[Any]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(span_direct, "usable", lambda: False)
        p = make_pipeline(tracer_provider=tp)
        for kw in REPORTS:
            start_kw = {"resumed": True, "stream_id": "s-1"} if kw.get("resumed") else {}
            run_stream(p, clock, kw, **start_kw)
        assert p.flush(5.0)
    out = [(s.name, list(s.attributes.items()), s.dropped_attributes, s.status.status_code) for s in
           exporter.get_finished_spans()]  # fmt: skip
    tp.shutdown()
    return out


def test_self_check_passes_on_the_installed_sdk() -> None:
    assert span_direct.usable()


def test_same_spans_either_way(make_pipeline: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = spans_of(make_pipeline, clock, monkeypatch, fast=False)
    fast = spans_of(make_pipeline, clock, monkeypatch, fast=True)
    assert fast == slow and len(fast) == len(REPORTS)
    assert dict(fast[2][1])[names.ATTR_RESPONSE_FINISH_REASONS] == ("stop", "length")


def test_direct_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    span: Any = TracerProvider().get_tracer("t").start_span("s", attributes={"a": "x"})
    monkeypatch.setattr(type(span), "set_attributes", lambda *a: pytest.fail("went through the SDK"))
    span_direct.set_attributes(span, {"a": "y", "n": 1})
    assert list(span.attributes.items()) == [("a", "y"), ("n", 1)]


@pytest.mark.parametrize(
    "limits, attrs, expect",
    [
        (SpanLimits(max_span_attribute_length=3), {"long": "abcdef"}, {"a": "x", "long": "abc"}),  # truncated
        (SpanLimits(max_span_attributes=2), {"long": "abcdef", "n": 1}, {"long": "abcdef", "n": 1}),  # oldest dropped
    ],
    ids=["value-length-limit", "attribute-count-limit"],
)
def test_limits_go_through_the_sdk(limits: SpanLimits, attrs: dict[str, Any], expect: dict[str, Any]) -> None:
    span: Any = TracerProvider(span_limits=limits).get_tracer("t").start_span("s", attributes={"a": "x"})
    span_direct.set_attributes(
        span, {"long": "abcdef", "n": 1} if limits.max_span_attributes == 2 else {"long": "abcdef"}
    )
    assert dict(span.attributes) == expect


def test_ended_span_and_foreign_span_go_through_their_own_set_attributes() -> None:
    span: Any = TracerProvider().get_tracer("t").start_span("s", attributes={"a": "x"})
    span.end()
    span_direct.set_attributes(span, {"n": 1})  # the SDK warns and keeps the span as it ended
    assert dict(span.attributes) == {"a": "x"}
    seen: list[Any] = []

    class Foreign(trace.NonRecordingSpan):
        def set_attributes(self, attributes: Any) -> None:
            seen.append(dict(attributes))

    span_direct.set_attributes(Foreign(trace.INVALID_SPAN_CONTEXT), {"n": 1})
    assert seen == [{"n": 1}]


def test_a_failing_direct_path_falls_back_to_set_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(span: Any, attributes: Any) -> bool:
        raise AttributeError("_dict")

    monkeypatch.setattr(span_direct, "_direct", broken)
    monkeypatch.setattr(span_direct, "usable", SelfCheck(lambda: True))
    monkeypatch.delenv("OTELSTREAM_RAISE_INTERNAL_ERRORS", raising=False)
    errors = len(_guard.errors)
    span: Any = TracerProvider().get_tracer("t").start_span("s", attributes={"a": "x"})
    span_direct.set_attributes(span, {"n": 1, "s": ("stop",)})
    assert dict(span.attributes) == {"a": "x", "n": 1, "s": ("stop",)}
    assert [where for where, _ in _guard.errors[errors:]] == ["export.span_direct"]
    del _guard.errors[errors:]
    assert not span_direct.usable()  # set_attributes from now on


def test_self_check_runs_once_and_a_raising_check_means_no() -> None:
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        return True

    ok = SelfCheck(check)
    assert ok() and ok() and calls == [1]
    ok.disable()
    assert not ok() and calls == [1]

    def broken() -> bool:
        raise ImportError("another SDK layout")

    assert SelfCheck(broken)() is False
