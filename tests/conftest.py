"""Suite-wide policy: otelstream's own errors surface in tests instead of being swallowed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Set before any otelstream hook runs: guarded code re-raises internal errors under tests (otelstream/_guard.py).
os.environ["OTELSTREAM_RAISE_INTERNAL_ERRORS"] = "1"

from otelstream import _guard

CAPTURES = Path(__file__).resolve().parents[2] / "shared" / "captures"


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
