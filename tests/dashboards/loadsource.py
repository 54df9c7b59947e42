"""Where the end-to-end test's metrics come from: the instrumented demo when available, else the stand-in."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from designload import DesignLoad

ALL_ALERTS = frozenset(
    {
        "OtelstreamBadOutcomeRatioHigh",
        "OtelstreamCutStreams",
        "OtelstreamIncompleteRatioHigh",
        "OtelstreamTimeToFirstDeltaSLO",
        "OtelstreamStreamsStalled",
        "OtelstreamSequenceAnomalies",
        "OtelstreamReportsDropped",
    }
)


@dataclass
class LoadSource:
    target: str  # host:port of a /metrics endpoint
    real: bool  # otelstream's instrumented path (not the stand-in)
    why: str  # when not real: why
    expected_alerts: frozenset[str]
    stop: Callable[[], None]
    check: Callable[[], None] = field(default=lambda: None)  # raises when the load died


def start_load(workdir: Path) -> LoadSource:
    missing = [m for m in ("otelstream.instrument",) if importlib.util.find_spec(m) is None]
    if not missing:
        from instrumentedload import start_instrumented_load

        return start_instrumented_load(workdir)
    load = DesignLoad()
    port = load.serve()
    return LoadSource(
        target=f"127.0.0.1:{port}",
        real=False,
        why=f"{', '.join(missing)} not importable yet",
        expected_alerts=ALL_ALERTS,
        stop=load.stop,
    )
