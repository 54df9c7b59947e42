"""Fixtures for the integration tests: the project's fake provider (the recording listener and the scripted
server, for what the fake provider cannot serve, come from tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from otelstream.demo.pacing import Pacing
from otelstream.demo.provider import FakeProvider, serve


@pytest.fixture(scope="session")
def provider() -> Iterator[FakeProvider]:
    # fast pacing (the matrix is hundreds of streams); slow_first / stall pause 0.2 s, no_headers holds 2 s at most
    with serve(record=True, seed=7, pacing=Pacing(ttfd_s=0.004, gap_s=0.0005, pause_s=0.2, no_headers_s=2.0)) as p:
        yield p
