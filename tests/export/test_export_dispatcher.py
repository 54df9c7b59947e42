"""The dispatcher: never blocks the submitter, drops and reports when full, flushes, drains, survives fork."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from otelstream.export.dispatcher import Dispatcher


def test_items_handled_in_order_and_flush_waits() -> None:
    seen: list[int] = []

    def slow(item: Any) -> None:
        time.sleep(0.01)
        seen.append(item)

    d = Dispatcher(slow, 100)
    for i in range(20):
        assert d.submit(i)
    assert d.flush(5.0)
    assert seen == list(range(20))  # flush returned only after everything submitted before it
    d.shutdown()


def test_full_queue_drops_without_blocking_and_flush_times_out() -> None:
    release = threading.Event()
    d = Dispatcher(lambda item: release.wait(), 2)
    results = []
    t0 = time.perf_counter()
    for i in range(10):
        results.append(d.submit(i))
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5  # a blocked sink never makes submit wait
    assert results.count(False) >= 7  # one in the worker's hands, two queued, the rest dropped
    assert not d.flush(0.05)
    release.set()
    assert d.flush(5.0)
    d.shutdown()


def test_flush_timeout_bounds_the_whole_wait() -> None:
    """With the queue full, flush first waits for room for its marker, then for the marker: both within `timeout`."""
    taken = threading.Event()

    def slow(item: Any) -> None:
        taken.set()
        time.sleep(1.0)

    d = Dispatcher(slow, 1)
    assert d.submit(1) and taken.wait(5.0)
    assert d.submit(2)  # one in the worker's hands, one queued: full
    t0 = time.perf_counter()
    flushed = d.flush(1.2)  # room at ~1 s; the marker would be handled at ~2 s
    elapsed = time.perf_counter() - t0
    assert not flushed and elapsed < 1.8
    d.shutdown()


def test_shutdown_drains_then_rejects() -> None:
    seen: list[int] = []
    d = Dispatcher(seen.append, 100)
    for i in range(5):
        d.submit(i)
    assert d.shutdown(5.0)
    assert seen == [0, 1, 2, 3, 4]
    assert not d.submit(99)


def _eventually(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Whether ``condition`` holds within ``timeout``, checked as often as the scheduler lets another thread run."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _stuck(maxsize: int) -> tuple[Dispatcher, threading.Event, threading.Event]:
    """A dispatcher whose handler never returns until released, with its queue full behind it."""
    release, taken = threading.Event(), threading.Event()

    def handler(item: Any) -> None:
        taken.set()
        release.wait(30)

    d = Dispatcher(handler, maxsize)
    assert d.submit(0) and taken.wait(5.0)
    for i in range(maxsize):
        assert d.submit(i + 1)
    return d, release, taken


def test_shutdown_is_bounded_by_one_deadline_and_a_stuck_worker_ends_once_released() -> None:
    """The drain, the stop marker and the join share one deadline; a worker whose stop marker found no room still
    ends after its handler comes back (a hung exporter must not leave a thread behind for good)."""
    d, release, _ = _stuck(2)
    t0 = time.perf_counter()
    assert not d.shutdown(0.5)
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5 + 0.3, f"shutdown(0.5) took {elapsed:.2f} s"
    thread = d._thread
    assert thread is not None and thread.is_alive()
    release.set()
    thread.join(5.0)
    assert not thread.is_alive()
    assert not d.submit(99)


def test_flush_covers_the_downstream_dispatcher_within_one_deadline() -> None:
    down, release, _ = _stuck(1)
    seen: list[int] = []

    def forward(item: int) -> None:
        seen.append(item)
        down.submit(item)

    up = Dispatcher(forward, 10, downstream=down)
    up.submit(7)
    t0 = time.perf_counter()
    assert not up.flush(0.5)  # up drains at once; down is stuck
    assert time.perf_counter() - t0 < 0.5 + 0.3
    assert seen == [7] and up.flush_until(time.monotonic() + 5.0, downstream=False)
    release.set()
    assert up.flush(5.0)
    assert up.shutdown(5.0) and not down.submit(1)  # shutting the upstream one down closes the downstream too


def test_on_flush_runs_on_the_worker_within_the_callers_deadline() -> None:
    """A hook that blocks (a tracer provider's force_flush on a hung exporter) holds up its worker, never flush."""
    release = threading.Event()
    ran_on: list[threading.Thread] = []

    def on_flush(deadline: float) -> bool:
        ran_on.append(threading.current_thread())
        return release.wait(30)

    d = Dispatcher(lambda item: None, 10, on_flush=on_flush)
    d.submit(1)
    t0 = time.perf_counter()
    assert not d.flush(0.3)
    assert time.perf_counter() - t0 < 0.3 + 0.3
    assert ran_on == [d._thread]
    release.set()
    assert d.flush(5.0) and len(ran_on) == 2
    d.shutdown()


def test_handler_error_is_recorded_and_worker_survives(monkeypatch: pytest.MonkeyPatch) -> None:
    from otelstream import _guard

    seen: list[int] = []

    def handler(item: int) -> None:
        if item == 1:
            raise RuntimeError("sink bug")
        seen.append(item)

    d = Dispatcher(handler, 10)
    for i in range(3):
        d.submit(i)
    assert d.flush(5.0)
    assert seen == [0, 2]
    assert [w for w, _ in _guard.errors] == ["export.dispatch"]
    _guard.errors.clear()
    d.shutdown()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_thread_restarts_in_forked_child() -> None:
    seen: list[tuple[int, Any]] = []
    d = Dispatcher(lambda item: seen.append((os.getpid(), item)), 10)
    d.submit("parent")
    assert d.flush(5.0)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the parent's worker thread does not exist here
        try:
            ok = d.submit("child") and d.flush(5.0)
            os.write(w, b"ok" if ok and seen[-1] == (os.getpid(), "child") else b"no")
        finally:
            os._exit(0)
    os.close(w)
    answer = os.read(r, 10)
    os.close(r)
    os.waitpid(pid, 0)
    assert answer == b"ok"
    d.submit("parent-again")  # the parent's thread still runs
    assert d.flush(5.0)
    assert seen[-1][1] == "parent-again"
    d.shutdown()


EXIT_ORDER = """
import atexit, time
from otelstream.export.dispatcher import Dispatcher

seen = []
d = Dispatcher(lambda item: (time.sleep(0.2), seen.append(item)), 10)
atexit.register(lambda: print("provider shutdown, after", seen, flush=True))  # registered later: runs first (LIFO)
d.submit("last report")
"""


CHAINED_EXIT = """
import atexit, time
from otelstream.export.dispatcher import Dispatcher

seen = []
down = Dispatcher(lambda item: (time.sleep(0.2), seen.append(item)), 10, name="down")
up = Dispatcher(lambda item: (time.sleep(0.2), down.submit(item + " (handed on)")), 10, downstream=down)
atexit.register(lambda: print("provider shutdown, after", seen, flush=True))
up.submit("last report")
"""


def test_exit_drains_a_downstream_dispatcher_after_its_upstream() -> None:
    out = subprocess.run([sys.executable, "-c", CHAINED_EXIT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "provider shutdown, after ['last report (handed on)']"


def test_queue_drained_at_exit_before_providers_registered_later_shut_down() -> None:
    """A tracer provider built after instrument() shuts down from an atexit hook registered after the dispatcher's:
    the queue is drained before every atexit hook, so the last reports still meet a working exporter."""
    out = subprocess.run([sys.executable, "-c", EXIT_ORDER], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "provider shutdown, after ['last report']"


def test_bound_is_a_size_check_and_markers_are_never_refused() -> None:
    """Up to ``maxsize`` items wait behind a busy worker, the next is dropped; a flush still queues its marker
    behind a full queue and succeeds once the worker has caught up."""
    d, release, _ = _stuck(3)
    assert d.pending == 3
    assert not d.submit(99)
    assert d.pending == 3
    done: list[bool] = []
    flusher = threading.Thread(target=lambda: done.append(d.flush(5.0)))
    flusher.start()
    # the marker joins the items behind them: waited for on the queue itself, not for a guessed time
    assert _eventually(lambda: d.pending == 4), f"the flush marker never queued: {d.pending} pending"
    assert flusher.is_alive() and done == []  # and the flush still waits for the worker
    release.set()
    flusher.join(5.0)
    assert done == [True]
    assert d.shutdown(5.0)


def test_flush_without_a_worker_sees_what_is_left() -> None:
    """No worker serves the queue (it stopped): a flush says whether anything but markers is left, and leaves it."""
    seen: list[int] = []
    d = Dispatcher(seen.append, 10)
    assert d.submit(1) and d.flush(5.0)
    thread = d._thread
    assert d.shutdown(5.0) and thread is not None and not thread.is_alive()
    d._queue.put(2)  # as if queued while the worker stopped
    assert not d.flush(0.1)
    assert d.pending == 1
    d._queue.get_nowait()
    assert d.flush(0.1)
    assert seen == [1]
