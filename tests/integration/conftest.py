"""Fixtures for the integration tests: the adapters with a recording listener, the project's fake provider and a
tiny scripted SSE server on 127.0.0.1 (for what the fake provider cannot serve)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from otelstream import adapters
from otelstream.demo.pacing import Pacing
from otelstream.demo.provider import FakeProvider, serve
from tests.adapters.recording import RecordingListener
from tests.integration.scripted import ScriptedServer


@pytest.fixture
def rec() -> Iterator[RecordingListener]:
    listener = RecordingListener()
    adapters.install(listener)
    try:
        yield listener
    finally:
        adapters.uninstall()


@pytest.fixture(scope="session")
def provider() -> Iterator[FakeProvider]:
    # fast pacing (the matrix is hundreds of streams); slow_first / stall pause 0.2 s, no_headers holds 2 s at most
    with serve(record=True, seed=7, pacing=Pacing(ttfd_s=0.004, gap_s=0.0005, pause_s=0.2, no_headers_s=2.0)) as p:
        yield p


@pytest.fixture(scope="session")
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.close()
