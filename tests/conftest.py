"""Suite-wide policy (otelstream's own errors surface in tests instead of being swallowed) and the fixtures more
than one test folder uses."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

# Set before any otelstream hook runs: guarded code re-raises internal errors under tests (otelstream/_guard.py).
os.environ["OTELSTREAM_RAISE_INTERNAL_ERRORS"] = "1"
# The runtime self-check (a background matrix after each instrument()) is off unless a test turns it on: tests
# instrument hundreds of times, and its own tests (tests/doctor/test_self_check.py) switch it on by argument.
os.environ.setdefault("OTELSTREAM_SELF_CHECK", "false")

from otelstream import _guard, adapters, config
from otelstream.export import Pipeline, build_pipeline
from tests.support.paths import CAPTURES
from tests.support.recording import RecordingListener
from tests.support.scripted_server import ScriptedServer

# Test modules that drive an optional cloud SDK (the [google] and [bedrock] extras; the test extra installs them):
# where one is absent (the older-SDK rows of .ci/sdk-matrix.sh install only openai and anthropic) they are not
# collected, and the header of the run says which and why.
_NEEDS: dict[str, tuple[str, ...]] = {
    "google.genai": ("integration/test_gemini_live.py", "integration/test_gemini_server_smoke.py"),
    "boto3": ("adapters/test_bedrock_live.py", "integration/test_bedrock_server_smoke.py"),
    "botocore": ("offline/test_cloud_captures_data.py", "adapters/test_without_httpx2.py"),
    "aiobotocore": ("adapters/test_bedrock_install.py", "integration/test_bedrock_server_smoke.py"),
}
_ABSENT = sorted(m for m in _NEEDS if importlib.util.find_spec(m.partition(".")[0]) is None
                 or importlib.util.find_spec(m) is None)  # fmt: skip
collect_ignore = sorted({f for m in _ABSENT for f in _NEEDS[m]})


def pytest_report_header() -> str | None:
    if not collect_ignore:
        return None
    return f"not collected, {', '.join(_ABSENT)} absent: {', '.join(collect_ignore)}"


@pytest.fixture(autouse=True)
def _no_internal_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test during which otelstream recorded an internal error, on any thread (e.g. the exporter's)."""
    _guard.errors.clear()
    yield
    if request.node.get_closest_marker("allow_internal_errors"):
        _guard.errors.clear()
        return
    found = list(_guard.errors)
    _guard.errors.clear()
    if found:
        where, exc = found[0]
        pytest.fail(f"otelstream internal error in {where}: {exc!r} ({len(found)} in total)")


@pytest.fixture
def captures_dir() -> Path:
    if not CAPTURES.is_dir():
        pytest.skip(f"real captures not available at {CAPTURES} (they live beside the repo in ../shared/captures)")
    return CAPTURES


@pytest.fixture
def rec() -> Iterator[RecordingListener]:
    """The adapters installed with a listener that records what they hand over."""
    listener = RecordingListener()
    adapters.install(listener)
    try:
        yield listener
    finally:
        adapters.uninstall()


@pytest.fixture(scope="session")
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.close()


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
    """Real pipelines (dispatcher thread, sinks, watchdog) on private providers, shut down after the test.
    The watchdog ticks hourly unless a test asks otherwise: tests drive ``watchdog.tick()`` themselves."""
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
