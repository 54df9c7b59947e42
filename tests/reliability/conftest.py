"""Fixtures for the reliability suite: private registries and span exporters, pipelines torn down after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from relhelpers import FIGURES, SCALE

from otelstream import config
from otelstream.export import Pipeline, build_pipeline


@pytest.fixture
def span_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(span_exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(span_exporter))
    yield tp
    tp.shutdown()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def make_pipeline(tracer_provider: TracerProvider, registry: CollectorRegistry) -> Iterator[Callable[..., Pipeline]]:
    """Real pipelines (dispatcher thread, sinks, watchdog) on private providers, shut down after the test."""
    made: list[Pipeline] = []

    def make(**kw: Any) -> Pipeline:
        providers = {k: kw.pop(k) for k in ("tracer_provider", "meter_provider", "registry") if k in kw}
        providers.setdefault("tracer_provider", tracer_provider)
        providers.setdefault("registry", registry)
        kw.setdefault("watchdog_interval_s", 3600.0)
        p = build_pipeline(config.load(kw, environ={}), **providers)
        made.append(p)
        return p

    yield make
    for p in made:
        p.shutdown(timeout=5.0)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section(f"otelstream reliability figures (scale {SCALE:g})")
    for key in sorted(FIGURES):
        value = FIGURES[key]
        terminalreporter.write_line(
            f"{key}: {value:,.1f}" if isinstance(value, float) and not value.is_integer() else f"{key}: {int(value):,}"
        )
