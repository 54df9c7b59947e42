"""Fixtures for the core tests."""

from __future__ import annotations

import pytest

from tests.core.harness import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
