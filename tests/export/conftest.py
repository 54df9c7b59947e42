"""Fixtures for the export tests (the span exporter, registry and pipelines come from tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.export.harness import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()
