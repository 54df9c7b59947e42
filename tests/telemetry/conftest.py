"""Fixtures for the telemetry tests: one fake provider per session, a fresh pipeline (span exporter + registry) per
test, instrumented through the public ``otelstream.instrument()`` and undone with ``uninstrument()``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import otelstream
from otelstream.demo.provider import FakeProvider, serve
from tests.telemetry.harness import PACING, TOKENS, Telemetry, warm_up


@pytest.fixture(scope="session")
def provider() -> Iterator[FakeProvider]:
    with serve(pacing=PACING, tokens=(TOKENS, TOKENS), seed=3) as p:
        warm_up(p)  # first-use model building inside the SDKs would otherwise land in the first test's timings
        yield p


@pytest.fixture
def tel() -> Iterator[Telemetry]:
    otelstream.uninstrument()  # instrument() is idempotent: a pipeline left over would silently be reused
    t = Telemetry.new()
    otelstream.instrument(tracer_provider=t.tracer_provider, registry=t.registry)
    assert otelstream.instrumentation.is_instrumented()
    try:
        yield t
    finally:
        otelstream.uninstrument()
        t.tracer_provider.shutdown()


@pytest.fixture
def instrument() -> Iterator[Callable[..., Telemetry]]:
    """``instrument(**settings)``: a fresh pipeline with these settings (undone at the end)."""
    made: list[Telemetry] = []

    def make(**settings: Any) -> Telemetry:
        otelstream.uninstrument()
        t = Telemetry.new()
        otelstream.instrument(tracer_provider=t.tracer_provider, registry=t.registry, **settings)
        made.append(t)
        return t

    yield make
    otelstream.uninstrument()
    for t in made:
        t.tracer_provider.shutdown()
