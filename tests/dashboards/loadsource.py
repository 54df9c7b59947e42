"""Where the end-to-end test's metrics come from: otelstream's instrumented path, or (on request) the stand-in."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.dashboards.designload import DesignLoad

ALL_ALERTS = frozenset(
    {
        "OtelstreamBadOutcomeRatioHigh",
        "OtelstreamRateLimited",
        "OtelstreamProviderOutage",
        "OtelstreamCutStreams",
        "OtelstreamIncompleteRatioHigh",
        "OtelstreamAbandonedRatioHigh",
        "OtelstreamTimeToFirstDeltaSLO",
        "OtelstreamStreamsStalled",
        "OtelstreamSequenceAnomalies",
        "OtelstreamReportsDropped",
    }
)
# Set to 1 to run the end-to-end queries against the stand-in instead of otelstream itself (for working
# on the dashboards without the SDKs); the test that insists on the instrumented path then xfails.
STAND_IN_ENV = "OTELSTREAM_E2E_STAND_IN"


@dataclass
class LoadSource:
    target: str  # host:port of a /metrics endpoint
    real: bool  # otelstream's instrumented path (not the stand-in)
    why: str  # when not real: why
    expected_alerts: frozenset[str]
    stop: Callable[[], None]
    check: Callable[[], None] = field(default=lambda: None)  # raises when the load died
    stop_traffic: Callable[[], None] | None = None  # ends the streams, the endpoint stays up


def start_load(workdir: Path, kind: str = "worker") -> LoadSource | None:
    """``worker`` (the fault mix), ``demo`` or ``healthy``; None for ``healthy`` under the stand-in (it has none)."""
    if os.environ.get(STAND_IN_ENV) == "1":
        if kind == "healthy":
            return None
        load = DesignLoad()
        port = load.serve()
        return LoadSource(f"127.0.0.1:{port}", False, f"{STAND_IN_ENV}=1", ALL_ALERTS, load.stop)
    missing = [m for m in ("openai", "anthropic") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the instrumented load needs {' and '.join(missing)} (pip install -e '.[test]')")
    from tests.dashboards.instrumentedload import start_demo_load, start_instrumented_load

    if kind == "demo":
        return start_demo_load(workdir)
    return start_instrumented_load(workdir, "healthy" if kind == "healthy" else "faults")
