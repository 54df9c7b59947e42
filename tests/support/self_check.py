"""The runtime self-check for the tests that switch it on: a fresh per-process state around each, a wait for its
run, and its WARNINGs."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest

from otelstream.adapters import doubted
from otelstream.doctor import runtime_check
from otelstream.export import self_check_gauge as gauge


@contextlib.contextmanager
def fresh_self_check() -> Iterator[None]:
    """As in a new process: no SDK checked yet, no result published, no measure doubted (the check runs once per
    process)."""
    _ended()
    runtime_check.STATE = runtime_check._State()
    gauge.reset()
    doubted.reset()
    try:
        yield
    finally:
        _ended()
        runtime_check.STATE = runtime_check._State()
        gauge.reset()
        doubted.reset()


def _ended(timeout: float = 30.0) -> None:
    """Stopped, and its thread gone: ``stop()`` waits 2 s, and a cell mid-way through a first import of an SDK on a
    loaded machine outlives that; the next test must not count that thread as its own."""
    runtime_check.stop()
    for thread in self_check_threads():
        thread.join(timeout)
        assert not thread.is_alive(), f"the self-check did not end within {timeout:g} s of its stop"


def wait_for_self_check(timeout: float = 30.0) -> None:
    """Until the run the last ``instrument()`` started has finished (its thread ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with runtime_check.STATE.lock:
            thread = runtime_check.STATE.thread
        if thread is None:
            return
        thread.join(max(0.0, deadline - time.monotonic()))
    pytest.fail(f"the self-check did not finish within {timeout:g} s")


def self_check_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "otelstream-self-check"]


def self_check_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "self-check" in r.getMessage()]
