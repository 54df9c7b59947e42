"""The export path: a bounded queue drained by one background thread that runs the sinks.

Why a thread and not the caller: a sink may block (a span exporter on a slow collector, a Prometheus scrape that
holds a lock, an OTel reader mid-collection). The caller's stream must never wait for any of that, so the caller
only does ``put_nowait``; when the queue is full the item is dropped and counted, never waited for.

Invariants:
- ``submit`` never blocks and never raises.
- Items are handled in submission order, one at a time, on one thread (so sinks need no locking of their own).
- ``flush(timeout)`` returns True once everything submitted before the call has been handled.
- After ``os.fork()`` the child gets a fresh queue and starts its own thread on first use; items queued in the
  parent stay the parent's.
- At interpreter exit the queue is drained (bounded by ``atexit_timeout``).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from otelstream import _guard

logger = logging.getLogger("otelstream")

_STOP = object()


class Dispatcher:
    def __init__(
        self,
        handler: Callable[[Any], None],
        maxsize: int = 10_000,
        *,
        name: str = "otelstream-export",
        atexit_timeout: float = 5.0,
    ) -> None:
        self._handler = handler
        self._maxsize = max(1, maxsize)
        self._name = name
        self._atexit_timeout = atexit_timeout
        self._queue: queue.Queue[Any] = queue.Queue(self._maxsize)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._closed = False
        _LIVE.add(self)  # for the fork and exit hooks, registered once per process (they cannot be unregistered)

    # --- caller side -----------------------------------------------------------------------------------------
    def submit(self, item: Any) -> bool:
        """Queue ``item`` for the sinks; False when it was dropped (queue full or dispatcher shut down)."""
        if self._closed:
            return False
        if self._thread is None:
            self._ensure_started()
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            return False
        return True

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything submitted before this call has been handled."""
        if self._closed and (self._thread is None or not self._thread.is_alive()):
            return self._queue.empty()
        if self._thread is None:
            self._ensure_started()
        done = threading.Event()
        deadline = time.monotonic() + max(0.0, timeout)  # one bound for both waits
        try:
            # Blocking put: flush is the one place allowed to wait, and a full queue must drain below the marker.
            self._queue.put(done, timeout=max(0.0, timeout))
        except queue.Full:
            return False
        return done.wait(max(0.0, deadline - time.monotonic()))

    def shutdown(self, timeout: float = 5.0) -> bool:
        """Drain what is queued, then stop the thread; later submissions are dropped."""
        if self._closed:
            return True
        flushed = self.flush(timeout)
        self._closed = True
        thread = self._thread
        if thread is not None and thread.is_alive():
            try:
                self._queue.put(_STOP, timeout=max(0.0, timeout))
            except queue.Full:
                return False
            thread.join(timeout)
        return flushed

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    # --- worker ----------------------------------------------------------------------------------------------
    def _ensure_started(self) -> None:
        with self._start_lock:
            if self._thread is not None or self._closed:
                return
            if getattr(threading, "_SHUTTING_DOWN", False) or sys.is_finalizing():
                # a stream collected while the interpreter exits: CPython 3.11 does not refuse a new thread then,
                # it hangs the exit; what is queued now cannot be exported anyway
                self._closed = True
                return
            thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            try:
                thread.start()
            except RuntimeError:  # interpreter shutting down: nothing can be exported any more
                self._closed = True
                return
            self._thread = thread

    def _run(self) -> None:
        q = self._queue  # the child replaces self._queue after a fork; this thread only ever serves its own
        while True:
            item = q.get()
            if item is _STOP:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                self._handler(item)
            except Exception as exc:  # a sink bug must not kill the export thread
                with contextlib.suppress(Exception):  # strict mode re-raises; it was recorded in _guard.errors
                    _guard.report("export.dispatch", exc)

    def _after_fork(self) -> None:
        # The parent's thread does not exist in the child and its queue's locks may have been held at fork time.
        self._queue = queue.Queue(self._maxsize)
        self._thread = None
        self._start_lock = threading.Lock()

    def _at_exit(self) -> None:
        if self._thread is not None and not self._closed and not self.flush(self._atexit_timeout):
            logger.warning("otelstream: %d stream report(s) not exported at exit", self.pending)


def _at_exit_before_providers(callback: Callable[[], None]) -> None:
    """Run ``callback`` at exit before any ``atexit`` handler: the OTel SDK's providers shut down from ``atexit``,
    and one created after ``instrument()`` would shut down (LIFO) before a drain registered there, so the spans it
    hands over would meet a closed exporter. Python's own exit hooks for threads run first (after the program's
    non-daemon threads have finished; ``concurrent.futures`` uses them the same way)."""
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is not None:
            register(callback)
            return
    except RuntimeError:  # registering while the interpreter is already shutting down
        pass
    atexit.register(callback)


def _each(method: str) -> None:
    for obj in list(_LIVE):
        try:
            getattr(obj, method)()
        except Exception as exc:  # runs inside fork/atexit machinery: never raise there
            logger.debug("otelstream: %s failed: %r", method, exc)


# Held weakly: the interpreter keeps the hooks forever, a dispatcher that is gone must not be (nor one hook per
# dispatcher ever made: instrument()/uninstrument() cycles).
_LIVE: weakref.WeakSet[Dispatcher] = weakref.WeakSet()
os.register_at_fork(after_in_child=lambda: _each("_after_fork"))
_at_exit_before_providers(lambda: _each("_at_exit"))
