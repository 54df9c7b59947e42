"""Fixtures for the export tests: strict internal errors, in-memory span exporter, private registry, pipelines."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from exporthelpers import Clock
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otelstream import _guard, config
from otelstream.export import Pipeline, build_pipeline


@pytest.fixture(autouse=True)
def strict_internal_errors(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OTELSTREAM_RAISE_INTERNAL_ERRORS", "1")
    _guard.errors.clear()
    yield
    errors = list(_guard.errors)
    _guard.errors.clear()
    assert not errors, f"internal errors: {errors}"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def span_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(span_exporter: InMemorySpanExporter) -> TracerProvider:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(span_exporter))
    return tp


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def make_pipeline(tracer_provider: TracerProvider, registry: CollectorRegistry) -> Iterator[Callable[..., Pipeline]]:
    made: list[Pipeline] = []

    def make(**kw: Any) -> Pipeline:
        providers = {k: kw.pop(k) for k in ("tracer_provider", "meter_provider", "registry") if k in kw}
        providers.setdefault("tracer_provider", tracer_provider)
        providers.setdefault("registry", registry)
        kw.setdefault("watchdog_interval_s", 3600.0)  # tests drive watchdog.tick() themselves
        p = build_pipeline(config.load(kw, environ={}), **providers)
        made.append(p)
        return p

    yield make
    for p in made:
        p.shutdown(timeout=2.0)
