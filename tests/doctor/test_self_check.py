"""The runtime self-check: after ``instrument()`` the doctor's small matrix runs once in a background
thread through the SDKs the process imported. On a healthy stack the gauge reads 0 and nothing is logged; its streams
never reach the application's spans or series; it leaves no thread; ``OTELSTREAM_SELF_CHECK=false`` turns it off
(the argument wins over the environment); a forked child does not inherit a run half done.

(A renamed patch point, the gauge above 0 and its one WARNING: tests/reliability/test_sdk_renames.py.)
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import anthropic  # noqa: F401  (imported: the self-check covers the SDKs the process has imported)
import openai  # noqa: F401
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otelstream import names
from otelstream.adapters.calls import RUNTIME
from otelstream.doctor import callers, runtime_check
from otelstream.doctor.routing import DoctorListener
from otelstream.export import self_check_gauge as gauge
from tests.support.clients import openai_client
from tests.support.instrumented import instrumented
from tests.support.self_check import fresh_self_check, self_check_threads, self_check_warnings, wait_for_self_check

GAUGE = names.PROM_SELF_CHECK_FAILURES


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    with fresh_self_check():
        yield


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="otelstream")
    return caplog


def test_healthy_stack_gauge_zero_no_warning(warnings: pytest.LogCaptureFixture) -> None:
    with instrumented(self_check=True) as inst:
        assert inst.sample(GAUGE) == 0 and GAUGE not in _families(inst)  # absent until the check ran
        wait_for_self_check()
        assert GAUGE in _families(inst) and inst.sample(GAUGE) == 0
        # its streams reached neither the application's series nor its spans
        assert inst.streams_total() == 0
        assert inst.finished() == []
    assert self_check_warnings(warnings) == []
    # botocore and google-genai are checked when the process has imported them (their tests do)
    assert runtime_check.STATE.done == {"openai", "anthropic"} | ({"botocore", "google.genai"} & set(sys.modules))
    assert runtime_check.STATE.cpu_s > 0


def test_otel_metrics_path_reads_the_gauge() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        with instrumented(self_check=True, meter_provider=provider, prometheus_metrics=False):
            wait_for_self_check()
            values = [
                point.value
                for rm in reader.get_metrics_data().resource_metrics
                for sm in rm.scope_metrics
                for metric in sm.metrics
                if metric.name == names.OTEL_SELF_CHECK_FAILURES
                for point in metric.data.data_points
            ]
        assert values == [0]
    finally:
        provider.shutdown()


def test_app_streams_during_the_check_reach_the_application(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the doctor's listener routes, a stream the application opens on its own thread goes to its pipeline."""
    held = threading.Event()
    release = threading.Event()
    real = callers.run_sync

    def paused(*args: Any, **kwargs: Any) -> None:
        held.set()
        release.wait(10)
        real(*args, **kwargs)

    monkeypatch.setattr(callers, "run_sync", paused)
    with instrumented(self_check=True) as inst:
        assert held.wait(10)
        assert isinstance(RUNTIME.listener, DoctorListener)
        stream = openai_client().chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "x"}], stream=True
        )
        assert len(list(stream)) == 5
        release.set()
        wait_for_self_check()
        assert not isinstance(RUNTIME.listener, DoctorListener)  # the application's listener is back
        assert inst.streams_total() == 1 == inst.streams_total(outcome=names.COMPLETED)
        assert len(inst.finished()) == 1
        assert inst.sample(GAUGE) == 0


def test_no_thread_left_behind() -> None:
    with instrumented(self_check=True):
        assert self_check_threads()  # running now, off the caller's thread
        wait_for_self_check()
        assert self_check_threads() == []
    assert self_check_threads() == []


def test_uninstrument_ends_a_run_in_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run stopped between two cells proves nothing: no result, no WARNING; the next instrument() runs it."""
    held = threading.Event()
    real = callers.run_sync

    def slow(*args: Any, **kwargs: Any) -> None:
        held.set()
        real(*args, **kwargs)

    monkeypatch.setattr(callers, "run_sync", slow)
    with instrumented(self_check=True) as inst:
        assert held.wait(10)
    # uninstrument() stopped it between two cells (it waits 2 s; a cell on a loaded machine may outlast that): the
    # thread ends, and what it ran is not published
    for thread in self_check_threads():
        thread.join(30)
    assert self_check_threads() == []
    assert gauge.value() is None and inst.sample(GAUGE) == 0 and GAUGE not in _families(inst)
    assert runtime_check.STATE.done == set()
    with instrumented(self_check=True) as inst:
        wait_for_self_check()
        assert GAUGE in _families(inst) and inst.sample(GAUGE) == 0


def test_switched_off_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTELSTREAM_SELF_CHECK", "false")
    with instrumented() as inst:
        assert self_check_threads() == []
        assert runtime_check.STATE.done == set() and not runtime_check.STATE.armed
        assert GAUGE not in _families(inst)


def test_argument_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTELSTREAM_SELF_CHECK", "false")
    with instrumented(self_check=True):
        wait_for_self_check()
        assert gauge.value() == 0
    monkeypatch.setenv("OTELSTREAM_SELF_CHECK", "true")
    runtime_check.STATE = runtime_check._State()
    with instrumented(self_check=False):
        assert self_check_threads() == [] and runtime_check.STATE.done == set()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_does_not_inherit_a_half_run_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forked while the parent's run is held mid-matrix: the child finds the application's listener in place (not
    the doctor's), runs its own check to the end, and reports a gauge of 0; the parent finishes its own run."""
    held = threading.Event()
    release = threading.Event()
    parent = os.getpid()
    real = callers.run_sync

    def held_in_parent(*args: Any, **kwargs: Any) -> None:
        if os.getpid() == parent:
            held.set()
            release.wait(10)
        real(*args, **kwargs)

    monkeypatch.setattr(callers, "run_sync", held_in_parent)
    with instrumented(self_check=True) as inst:
        assert held.wait(10)
        parents = RUNTIME.listener
        assert isinstance(parents, DoctorListener)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(r)
                # the child's own run may have put its own doctor listener in front already: never the parent's
                inherited = parents in _chain(RUNTIME.listener)
                wait_for_self_check()
                out = {"inherited": inherited, "gauge": inst.sample(GAUGE), "streams": inst.streams_total(),
                       "routed_after": isinstance(RUNTIME.listener, DoctorListener)}  # fmt: skip
                os.write(w, json.dumps(out).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r, "rb") as reader:
            raw = reader.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0 and raw, "the child failed"
        child = json.loads(raw)
        assert child == {"inherited": False, "gauge": 0, "streams": 0, "routed_after": False}
        release.set()
        wait_for_self_check()
        assert inst.sample(GAUGE) == 0 and inst.streams_total() == 0


def _chain(listener: Any) -> list[Any]:
    """A listener and those it passes the application's streams to."""
    found = []
    while listener is not None:
        found.append(listener)
        listener = listener.app if isinstance(listener, DoctorListener) else None
    return found


def _families(inst: Any) -> set[str]:
    return {metric.name for metric in inst.registry.collect()}
