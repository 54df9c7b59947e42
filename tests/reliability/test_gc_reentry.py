"""The end of a stream the application dropped is found by the cyclic collector (openai's and anthropic's streams
sit in reference cycles), and the collector runs inside whatever allocation started it: on any thread, while that
thread holds any lock. Every lock a stream's end takes is re-entrant, so such an end never waits for its own thread.

The hang this guards against (issue 35, item 5): a thread making one stream's side object under the module lock
allocated, the collection it ran ended a dropped stream, that end asked for the same lock, and waited forever;
every other stream then waited at its own end. Here the lock is held by the test's thread around ``gc.collect()``,
as an allocation inside it would: each case must return and report the dropped stream as abandoned (gc).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

import pytest

from otelstream import _guard, names
from otelstream.core import state, stream_end
from otelstream.doctor.routing import CELL, DoctorListener, routed
from tests.reliability.test_toggle_drill import _anthropic, _openai
from tests.support.instrumented import instrumented

# the locks an application stream's end takes (the side object, first call wins, an internal error's record)
LOCKS: dict[str, Callable[[], Any]] = {
    "side object": lambda: state._RARE_LOCK,
    "end": lambda: stream_end._END_LOCK,
    "internal error record": lambda: _guard._lock,
}


def _collect_holding(held: Any) -> None:
    def collect() -> None:
        with held:
            gc.collect()

    # a thread of its own, joined with a bound: a regression fails here instead of hanging the suite
    worker = threading.Thread(target=collect, daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "the collection waited for a lock its own thread holds"


def _drop(sdk: str) -> None:
    if sdk == "openai":
        stream: Any = _openai().chat.completions.create(model="m", messages=[], stream=True)
    else:
        stream = _anthropic().messages.create(model="m", max_tokens=8, messages=[], stream=True)
    next(iter(stream))  # mid-answer, then dropped unclosed


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_a_collection_under_a_held_lock_ends_the_dropped_stream(lock: str, sdk: str) -> None:
    with instrumented() as inst:
        gc.collect()
        _drop(sdk)
        _collect_holding(LOCKS[lock]())
        spans = inst.finished()
    assert [(s.attributes or {}).get(names.ATTR_OUTCOME) for s in spans] == [names.ABANDONED]
    assert (spans[0].attributes or {}).get(names.ATTR_ABANDONED_REASON) == names.ABANDON_GC


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lock", ["report assembly", "doctor's listener"])
def test_a_doctor_stream_dropped_under_a_held_lock_is_recorded(lock: str) -> None:
    """The doctor's listener assembles its streams' reports at their end, on the ending thread: a collection during
    another assembly, or while the listener records one, ends and records the dropped stream too."""
    listener = DoctorListener()
    held = stream_end._REPORT_LOCK if lock == "report assembly" else listener._lock
    gc.collect()
    with routed(listener):
        token = CELL.set("dropped")
        try:
            _drop("openai")
        finally:
            CELL.reset(token)
        _collect_holding(held)
    reports = listener.reports_of("dropped")
    assert [(r.outcome, r.abandoned_reason) for r in reports] == [(names.ABANDONED, names.ABANDON_GC)]
