"""The runtime self-check: after ``instrument()``, the doctor's smaller matrix runs once per process, in
a background daemon thread, through each SDK the application has imported (an SDK imported later is checked when
its import completes; one never imported costs nothing).

- Off the caller's thread, and its streams reach only the doctor's private listener (``routing.routed``): never a
  span, a live gauge or a series of the application's.
- Bounded: one surface per SDK (their streams share the SDK's ``Stream`` classes and the HTTP library, which is
  where releases drift), the faults that decide the headline outcomes (completed, cut, reset, break+close, cancel),
  no cyclic collection; ``bench/self_check.py`` measures its CPU. A run that outlasts ``_MAX_RUN_S`` is abandoned.
- No thread left behind: the thread is a daemon that ends when the run does; ``stop()`` (``uninstrument()``) ends a
  run between cells and joins it. An interrupted run proves nothing: it is not reported, and runs again at the next
  ``instrument()``.
- Fork-safe: a child forked during a run does not inherit it half done: the parent's routing is undone in the child
  and the child runs the check afresh; a finished check's result is the child's too (same libraries).

A mismatch logs one WARNING naming the cells and the versions; ``on_result`` receives the number of checks that
differed (0 when all held), which ``instrument()`` publishes as ``otelstream_self_check_failures``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from otelstream import _guard, names
from otelstream.doctor.routing import DoctorListener

if TYPE_CHECKING:
    from otelstream.doctor.runner import Result

logger = logging.getLogger("otelstream")

SURFACE_BY_SDK: Final = {"openai": names.CHAT_COMPLETIONS, "anthropic": names.MESSAGES,
                          "google.genai": names.GENERATE_CONTENT, "botocore": names.CONVERSE}  # fmt: skip
_MAX_RUN_S: Final = 10.0  # a machine so loaded that the check takes longer would only add to its load
_SHOWN_CELLS: Final = 8  # the WARNING names at most this many cells (and says how many more)


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.armed = False  # between start() and stop()
        self.on_result: Callable[[int], object] | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.done: set[str] = set()  # SDKs checked in this process (or queued, or being checked)
        self.pending: list[str] = []
        self.running: tuple[str, ...] = ()
        self.hooked: set[str] = set()
        self.failures = 0  # over this process's runs
        self.cpu_s = 0.0  # this thread's CPU over this process's runs (bench/self_check.py reads it)


STATE = _State()


def start(on_result: Callable[[int], object]) -> None:
    """Check each installed SDK once, in the background: now for those imported, at their import for the others."""
    import wrapt

    with STATE.lock:
        STATE.armed = True
        STATE.on_result = on_result
        STATE.stop = threading.Event()
    for sdk in SURFACE_BY_SDK:
        if not _installed(sdk):
            continue
        if sdk in sys.modules:
            _queue(sdk)
        if sdk not in STATE.hooked:
            STATE.hooked.add(sdk)
            wrapt.register_post_import_hook(_imported, sdk)  # runs at once when already imported: _queue is idempotent


def _installed(sdk: str) -> bool:
    try:
        return importlib.util.find_spec(sdk) is not None
    except ImportError:  # google.genai without the google namespace package
        return False


def stop(timeout: float = 2.0) -> None:
    """End a run in progress (between two cells) and wait for its thread, at most ``timeout`` seconds."""
    with STATE.lock:
        STATE.armed = False
        STATE.stop.set()
        thread = STATE.thread
    if thread is not None and thread is not threading.current_thread():
        thread.join(timeout)


def _imported(module: object) -> None:
    with _guard.guard("self_check.imported"):
        _queue(getattr(module, "__name__", ""))


def _queue(sdk: str) -> None:
    with STATE.lock:
        if not STATE.armed or sdk in STATE.done or sdk not in SURFACE_BY_SDK:
            return
        STATE.done.add(sdk)
        STATE.pending.append(sdk)
        if STATE.thread is None:
            STATE.thread = threading.Thread(target=_main, name="otelstream-self-check", daemon=True)
            STATE.thread.start()


def _main() -> None:
    while True:
        with STATE.lock:
            sdks = tuple(STATE.pending)
            STATE.pending.clear()
            STATE.running = sdks
            stop = STATE.stop
            if not sdks or not STATE.armed:
                STATE.done.difference_update(sdks)
                STATE.running = ()
                STATE.thread = None
                return
        with _guard.guard("self_check.run"):
            _check(sdks, stop)
        with STATE.lock:
            STATE.running = ()


def _check(sdks: tuple[str, ...], stop: threading.Event) -> None:
    cpu = time.thread_time()
    try:
        from otelstream.doctor import runner, verdicts  # here, not at instrument(): they load off its thread

        result = runner.run([SURFACE_BY_SDK[sdk] for sdk in sdks], small=True, stop=stop,
                            deadline=time.monotonic() + _MAX_RUN_S)  # fmt: skip
    finally:
        STATE.cpu_s += time.thread_time() - cpu
    if result.interrupted:
        with STATE.lock:
            STATE.done.difference_update(sdks)  # proves nothing: the next instrument() runs it again
        logger.debug("otelstream: self-check interrupted (instrumentation changed, or it ran too long)")
        return
    failures = len(result.failed) + len(result.missing)
    with STATE.lock:
        STATE.failures += failures
        total = STATE.failures
        on_result = STATE.on_result
    if failures:
        logger.warning("%s%s", warning_text(result), verdicts.publish(result.failed))
    if on_result is not None:
        on_result(total)


def warning_text(result: Result) -> str:
    """The one WARNING: which cells differed and how, which patch points are missing, on which versions."""
    from otelstream.doctor.versions import one_line

    parts = []
    for row in result.failed[:_SHOWN_CELLS]:
        if row.problem is not None:
            parts.append(f"{row.cell.key} ({row.problem})")
            continue
        assert row.observed is not None
        diffs = "; ".join(f"{m}: want {row.expected[m]}, got {row.observed.get(m)}" for m in row.mismatches)
        parts.append(f"{row.cell.key} ({diffs})")
    more = len(result.failed) - _SHOWN_CELLS
    if more > 0:
        parts.append(f"and {more} more")
    text = (
        f"otelstream: the self-check found {len(result.failed)} of {len(result.rows)} cells differing from what "
        f"otelstream must report on this stack ({one_line(result.versions)})"
    )
    if parts:
        text += ": " + ", ".join(parts)
    if result.missing:
        text += "; patch points missing: " + ", ".join(p.point for p in result.missing)
    return text + (
        ". otelstream's numbers for these streams are not to be trusted here; run `otelstream doctor` for the whole "
        "matrix and report its output (it carries no content)."
    )


def _forked() -> None:
    """In a child forked during a run: the parent's thread is gone and its routing half set up. Undo the routing,
    and check afresh here (a finished check's result is already the child's: the same libraries)."""
    STATE.lock = threading.Lock()  # the parent's thread may have held it at the fork
    calls = sys.modules.get("otelstream.adapters.calls")
    listener = None if calls is None else calls.RUNTIME.listener
    if isinstance(listener, DoctorListener):
        calls.RUNTIME.listener = listener.app  # type: ignore[union-attr]
    in_flight = STATE.running + tuple(STATE.pending)
    STATE.thread = None
    STATE.running = ()
    STATE.pending = []
    STATE.done.difference_update(in_flight)
    STATE.stop = threading.Event()
    for sdk in in_flight:
        _queue(sdk)


os.register_at_fork(after_in_child=_forked)
