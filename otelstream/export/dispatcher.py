"""The export path: a bounded queue drained by one background thread that runs the sinks.

Why a thread and not the caller: a sink may block (a span exporter on a slow collector, a Prometheus scrape that
holds a lock, an OTel reader mid-collection). The caller's stream must never wait for any of that, so the caller
only checks the queue's size and puts; when the queue is full the item is dropped and counted, never waited for.

Why a ``queue.SimpleQueue`` and not a bounded ``queue.Queue``: its put is one C call (≈0.8 k instructions against
≈9 k for ``Queue.put_nowait``'s Python-level locking and condition), paid once per stream on the caller's thread and
again for each span hand-off. The bound is a size check before the put: threads submitting at the same moment may
overshoot it by one item each, which bounds memory just the same. Markers (flush, stop) are never refused.

A dispatcher may name a ``downstream`` one that its handler feeds (the pipeline's metrics thread hands span ends to
a span thread of their own, so a hung exporter costs spans only): flushing, shutting down and the exit drain then
cover both, in order, within one deadline.

Invariants:
- ``submit`` never blocks and never raises.
- Items are handled in submission order, one at a time, on one thread (so sinks need no locking of their own).
- ``flush(timeout)`` returns True once everything submitted before the call has been handled (downstream too);
  ``flush`` and ``shutdown`` return within ``timeout`` overall, however many waits they make, even when a handler
  never returns.
- A worker stops once shut down and drained, also when no stop marker was queued (a shutdown from its own
  handler must not leave its thread behind).
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
from typing import Any, Generic, TypeVar

from otelstream import _guard

logger = logging.getLogger("otelstream")

_STOP = object()
_POLL_S = 0.05  # how often a flush waiting on a shut-down dispatcher checks that its worker still runs


class _Flush:
    """A flush marker: the worker runs its ``on_flush`` hook (while the deadline allows) and sets ``done``."""

    __slots__ = ("deadline", "done", "ok")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.done = threading.Event()
        self.ok = True


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


_T = TypeVar("_T")


class Dispatcher(Generic[_T]):
    """Queues items of type ``_T`` for ``handler``, which runs on the dispatcher's thread."""

    def __init__(
        self,
        handler: Callable[[_T], None],
        maxsize: int = 10_000,
        *,
        name: str = "otelstream-export",
        atexit_timeout: float = 5.0,
        on_flush: Callable[[float], bool] | None = None,
        downstream: Dispatcher[Any] | None = None,
    ) -> None:
        """``on_flush(deadline)`` runs on the worker when a flush marker is reached (e.g. a tracer provider's
        ``force_flush``, which may itself block: it must not run on the thread that called ``flush``)."""
        self._handler = handler
        self._on_flush = on_flush
        self._downstream = downstream
        self._upstream = False  # another dispatcher drains this one (flush, shutdown, exit)
        if downstream is not None:
            downstream._upstream = True
        self._maxsize = max(1, maxsize)
        self._name = name
        self._atexit_timeout = atexit_timeout
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        # re-entrant: starting the thread allocates, which may run the cyclic collector, which may end a dropped
        # stream and submit its report here, on this thread (``_starting`` then leaves the start to the outer call)
        self._start_lock = threading.RLock()
        self._starting = False
        # what the queue holds besides items (flush and stop markers), so that the exit can say how many items it
        # left: markers are rare (a flush, a shutdown), so counting them under a lock costs the items nothing
        self._markers = 0
        self._markers_lock = threading.Lock()
        self._busy = 0  # 1 while the worker handles an item (it has left the queue, it is not done)
        self._closed = False
        _LIVE.add(self)  # for the fork and exit hooks, registered once per process (they cannot be unregistered)

    # --- caller side -----------------------------------------------------------------------------------------
    def submit(self, item: _T) -> bool:
        """Queue ``item`` for the sinks; False when it was dropped (queue full or dispatcher shut down)."""
        if self._closed:
            return False
        if self._thread is None:
            self._ensure_started()
        q = self._queue
        if q.qsize() >= self._maxsize:
            return False
        q.put(item)
        return True

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything submitted before this call has been handled, downstream included."""
        return self.flush_until(time.monotonic() + max(0.0, timeout))

    def flush_until(self, deadline: float, *, downstream: bool = True) -> bool:
        """``flush`` against a ``time.monotonic()`` deadline shared by every wait (``downstream=False``: this
        dispatcher's own queue only)."""
        ok = self._flush_own(deadline)
        if downstream and self._downstream is not None:
            ok = self._downstream.flush_until(deadline) and ok
        return ok

    def _flush_own(self, deadline: float) -> bool:
        thread = self._thread
        if thread is None or not thread.is_alive():
            # submit starts the thread before it queues: no thread means nothing queued (or a fork/shutdown left
            # what it had, which no thread of this process will handle)
            return self._drained()
        marker = _Flush(deadline)
        self._put_marker(marker)  # never refused: a full queue only delays the marker's turn
        # Polled, not one wait: a shut-down worker stops once drained, possibly just before this marker arrived
        while not marker.done.wait(min(_POLL_S, _left(deadline))):
            if not thread.is_alive():
                return marker.ok if marker.done.is_set() else self._drained()
            if time.monotonic() >= deadline:
                return False
        return marker.ok

    def _drained(self) -> bool:
        """Nothing but markers left in the queue (those a stopped worker never reached ask for nothing). Only asked
        when no worker serves the queue any more: its items are taken out to look at them and put back in order."""
        q = self._queue
        items: list[Any] = []
        with self._start_lock:  # no worker starts, and no other flush looks, meanwhile
            with contextlib.suppress(queue.Empty):
                while True:
                    items.append(q.get_nowait())
            for item in items:
                q.put(item)
        return all(isinstance(item, _Flush) or item is _STOP for item in items)

    def shutdown(self, timeout: float = 5.0) -> bool:
        """Drain what is queued, then stop the thread; later submissions are dropped."""
        return self.shutdown_until(time.monotonic() + max(0.0, timeout))

    def shutdown_until(self, deadline: float) -> bool:
        """``shutdown`` against one deadline for the drain, the stop and the join (downstream included, after)."""
        flushed = True
        if not self._closed:
            flushed = self._flush_own(deadline)
            self._closed = True
            thread = self._thread
            if thread is not None and thread.is_alive() and thread is not threading.current_thread():
                self._put_marker(_STOP)
                thread.join(_left(deadline))  # a stuck handler: the worker stops once it reaches the marker
        if self._downstream is not None:
            flushed = self._downstream.shutdown_until(deadline) and flushed
        return flushed

    @property
    def pending(self) -> int:
        """What the queue holds, markers included."""
        return self._queue.qsize()

    @property
    def unhandled(self) -> int:
        """Items not handled yet: queued (markers aside) or in the handler now."""
        return max(0, self._queue.qsize() - self._markers) + self._busy

    def _put_marker(self, marker: object) -> None:
        with self._markers_lock:
            self._markers += 1
        self._queue.put(marker)

    def _took_marker(self) -> None:
        with self._markers_lock:
            self._markers -= 1

    # --- worker ----------------------------------------------------------------------------------------------
    def _ensure_started(self) -> None:
        if self._downstream is not None:
            # now, not on the first hand-over: that may come while the interpreter exits, too late for a thread
            self._downstream._ensure_started()
        with self._start_lock:
            if self._thread is not None or self._closed or self._starting:
                return
            if getattr(threading, "_SHUTTING_DOWN", False) or sys.is_finalizing():
                # a stream collected while the interpreter exits: CPython 3.11 does not refuse a new thread then,
                # it hangs the exit; what is queued now cannot be exported anyway
                self._closed = True
                return
            self._starting = True
            try:
                thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                thread.start()
            except RuntimeError:  # interpreter shutting down: nothing can be exported any more
                self._closed = True
                return
            finally:
                self._starting = False
            self._thread = thread

    def _run(self) -> None:
        q = self._queue  # the child replaces self._queue after a fork; this thread only ever serves its own
        while True:
            item = q.get()
            if item is _STOP:
                self._took_marker()
                return
            if isinstance(item, _Flush):
                self._took_marker()
                self._flushed(item)
            else:
                self._busy = 1
                try:
                    self._handler(item)
                except Exception as exc:  # a sink bug must not kill the export thread
                    with contextlib.suppress(Exception):  # strict mode re-raises; it was recorded in _guard.errors
                        _guard.report("export.dispatch", exc)
                self._busy = 0
            if self._closed and q.empty():
                return  # shut down from within a handler: no stop marker was queued

    def _flushed(self, marker: _Flush) -> None:
        if self._on_flush is not None:
            if time.monotonic() >= marker.deadline:
                marker.ok = False  # its caller has given up: no late, pointless provider flush
            else:
                try:
                    marker.ok = bool(self._on_flush(marker.deadline))
                except Exception as exc:
                    marker.ok = False
                    with contextlib.suppress(Exception):
                        _guard.report("export.flush", exc)
        marker.done.set()

    def _after_fork(self) -> None:
        # The parent's thread does not exist in the child and its queue's locks may have been held at fork time.
        self._queue = queue.SimpleQueue()
        self._thread = None
        self._start_lock = threading.RLock()
        self._starting = False
        self._markers = 0
        self._markers_lock = threading.Lock()
        self._busy = 0

    def _started(self) -> bool:
        down = self._downstream
        return self._thread is not None or (down is not None and down._started())

    def _unhandled_all(self) -> int:
        down = self._downstream
        return self.unhandled + (down._unhandled_all() if down is not None else 0)

    def _at_exit(self) -> None:
        if self._upstream or self._closed or not self._started():
            return  # a downstream dispatcher is drained by its upstream one, in order
        # Counted before the drain and again when it gave up: an item a stuck exporter took in is handled (gone from
        # the queue) without being exported, so a count read only after the timeout says too few.
        held = self._unhandled_all()
        if self.flush(self._atexit_timeout):
            return
        held = max(held, self._unhandled_all())
        if held:
            logger.warning(
                "otelstream: %d stream report(s) not exported at exit (the export did not finish within %g s)",
                held, self._atexit_timeout,
            )  # fmt: skip
        else:
            logger.warning(
                "otelstream: the exporters did not finish flushing at exit within %g s: what they still held may "
                "not be exported",
                self._atexit_timeout,
            )


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
_LIVE: weakref.WeakSet[Dispatcher[Any]] = weakref.WeakSet()
os.register_at_fork(after_in_child=lambda: _each("_after_fork"))
_at_exit_before_providers(lambda: _each("_at_exit"))
