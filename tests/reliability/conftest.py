"""The reliability suite's run figures (its pipeline fixtures come from tests/conftest.py)."""

from __future__ import annotations

from typing import Any

from tests.reliability.harness import FIGURES, SCALE


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section(f"otelstream reliability figures (scale {SCALE:g})")
    for key in sorted(FIGURES):
        value = FIGURES[key]
        terminalreporter.write_line(
            f"{key}: {value:,.1f}" if isinstance(value, float) and not value.is_integer() else f"{key}: {int(value):,}"
        )
