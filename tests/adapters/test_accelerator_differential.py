"""The compiled accelerator (``otelstream._speedups.Observe``) against its pure-Python reference
(``observing.observe_sync_py``): the same generated streams, as the SDKs' own models, through both, must give the
caller the same items and the same exception, leave the call in the same state, and give the same report.

Streams on every surface with a flat path (chat, completions, responses, messages), with near-misses the flat path
must refuse, gaps on both sides of every time-per-chunk bound and beyond 64 bits (the tracker's own arithmetic
then), a frame stamp or none per item (the tap), an SDK generator that may raise at a generated item, and a caller
that drains, closes after a generated item, throws into the stream, or drops it. Where the module was not built
(no compiler) these tests are skipped outside CI, and fail in CI (``CI=true``), which builds it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelstream import names
from otelstream.adapters import observing
from otelstream.adapters.calls import Call
from otelstream.core import tracker as tr
from otelstream.core.report import StreamStart
from tests.adapters.test_flat_path import _model, streams
from tests.support.native import speedups
from tests.support.recording import RecordingListener

_speedups = speedups()

observing.configure_native(_speedups)

SETTINGS = settings(
    max_examples=int(os.environ.get("OTELSTREAM_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class Boom(Exception):
    """The SDK's generator fails (a transport error, as far as the observer knows)."""


def _classify(exc: BaseException) -> tuple[str, str | None]:
    return names.EndReason.TRANSPORT_ERROR, type(exc).__name__


class _Frame:
    __slots__ = ("event",)

    def __init__(self, event: str | None) -> None:
        self.event = event


def _run(observer: Any, surface: str, items: list[tuple[int, int, dict[str, Any]]], stamps: list[bool],
         raise_at: int | None, caller: str, stop_at: int, caller_time: bool) -> tuple[Any, ...]:  # fmt: skip
    now = [10**12]
    tracker = tr.StreamTracker(StreamStart(surface=surface, t_request_ns=now[0]), clock=lambda: now[0])
    listener = RecordingListener()
    call = Call(tracker, listener)
    call.observed = True
    models = [_model(surface, d) for _, _, d in items]

    def sdk() -> Iterator[Any]:  # the SDK's generator, with the tap's stamps
        for i, ((wait, _, d), model) in enumerate(zip(items, models, strict=True)):
            now[0] += wait
            if i == raise_at:
                raise Boom("read failed")
            if stamps[i % len(stamps)]:
                tracker.t_frame = now[0]
                call.sse = _Frame(d.get("type"))
                now[0] += 7  # the SDK's own work on the frame
            yield model

    got: list[Any] = []
    raised: BaseException | None = None
    stream = observer(sdk(), call, _classify)
    try:
        for n, item in enumerate(stream):
            got.append(item)
            if caller_time:  # the caller's own time (without it and stamps, a gap is exactly the drawn wait)
                now[0] += items[n][1]
            if n == stop_at:
                if caller == "close":
                    stream.close()
                elif caller == "throw":
                    stream.throw(KeyError("caller"))
                break
    except BaseException as exc:  # what reached the caller
        raised = exc
    if caller == "drop":  # the caller lets go of an open stream: its finalisation ends it
        del stream
    report = tracker.final_report()
    return (
        [id(x) for x in got] == [id(m) for m in models[: len(got)]],
        len(got),
        type(raised).__name__ if raised is not None else None,
        str(raised) if raised is not None else None,
        call.state,
        report,
        len(listener.finished_handles),
    )


@SETTINGS
@given(
    streams(),
    st.lists(st.booleans(), min_size=1, max_size=4),
    st.one_of(st.none(), st.integers(0, 35)),
    st.sampled_from(["drain", "close", "throw", "drop"]),
    st.integers(0, 35),
    st.booleans(),
)
def test_compiled_observer_equals_the_reference(
    stream: tuple[str, list[tuple[int, int, dict[str, Any]]]], stamps: list[bool], raise_at: int | None,
    caller: str, stop_at: int, caller_time: bool,
) -> None:  # fmt: skip
    surface, items = stream
    reference = _run(observing.observe_sync_py, surface, items, stamps, raise_at, caller, stop_at, caller_time)
    compiled = _run(_speedups.Observe, surface, items, stamps, raise_at, caller, stop_at, caller_time)
    assert compiled == reference
    assert reference[0]  # the caller got the SDK's own objects


def _tracker_call() -> tuple[tr.StreamTracker, Call]:
    tracker = tr.StreamTracker(StreamStart(surface=names.CHAT_COMPLETIONS, t_request_ns=1), clock=lambda: 5)
    return tracker, Call(tracker, RecordingListener())


@pytest.mark.parametrize("observer", [observing.observe_sync_py, _speedups.Observe], ids=["pure", "compiled"])
def test_generator_protocol_edges(observer: Any) -> None:
    """What a generator does at its edges, the compiled observer does too: unstarted close and throw run nothing of
    ours, a pull from inside a pull is refused, send(non-None) to an unstarted one is refused, a finished one stops."""
    tracker, call = _tracker_call()
    obs = observer(iter([1, 2]), call, _classify)
    obs.close()
    assert call.state is names.CallState.UNPULLED and not tracker.ended
    with pytest.raises(StopIteration):
        next(obs)

    tracker, call = _tracker_call()
    obs = observer(iter([1]), call, _classify)
    with pytest.raises(KeyError):
        obs.throw(KeyError("x"))
    assert not tracker.ended

    tracker, call = _tracker_call()
    obs = observer(iter([1]), call, _classify)
    with pytest.raises(TypeError):
        obs.send(1)
    assert obs.send(None) == 1
    with pytest.raises(StopIteration):
        obs.send(None)
    assert tracker.ended and call.state is names.CallState.FINISHED

    tracker, call = _tracker_call()
    holder: list[Any] = []

    def inner() -> Iterator[int]:
        yield next(holder[0])  # re-entered from inside its own pull

    obs = observer(inner(), call, _classify)
    holder.append(obs)
    with pytest.raises(ValueError, match="already executing"):
        next(obs)
    assert tracker.ended  # the pull raised: the stream ended with it


@pytest.mark.parametrize("surface", [names.CHAT_COMPLETIONS, names.COMPLETIONS, names.RESPONSES, names.MESSAGES])
def test_every_bucket_bound_both_ways(surface: str) -> None:
    """Gaps at, below and above every time-per-chunk bound, each wait a new longest one (ascending: the tracker's
    ``_long_wait`` runs first) and none (descending), with and without frame stamps: equal reports."""
    from otelstream.core.chunk_time import CHUNK_BOUNDS_NS
    from tests.adapters.test_flat_path import _chat, _messages, _responses, _start

    start = _start(surface)
    waits = sorted({max(0, b + d) for b in CHUNK_BOUNDS_NS for d in (-1, 0, 1)})
    for order in (waits, waits[::-1]):
        body = []
        for n, _ in enumerate(order):
            if surface == names.MESSAGES:
                body.append(_messages("plain", "tok"))
            elif surface == names.RESPONSES:
                body.append(_responses("plain", "tok", len(start) + n))
            else:
                body.append(_chat("plain", "tok", legacy=surface == names.COMPLETIONS))
        items = [(1_000_000, 0, d) for d in start] + [(w, 0, d) for w, d in zip(order, body, strict=True)]
        for stamps in ([False], [True, False]):
            args = (surface, items, stamps, None, "drain", 10**6, False)
            reference = _run(observing.observe_sync_py, *args)
            assert _run(_speedups.Observe, *args) == reference
            assert reference[5].deltas == len(order)
