"""The observing generators (the hot path): around the SDK's own ``__stream__`` generator, each pull is timed, each
item the SDK yields is handed to the tracker, and how the SDK's generator ends is how the stream ended
(``stream_ended``). The SDK's generator runs unchanged; ``stream_wrapper`` puts it inside ``observe_sync`` /
``observe_async``.

Around the SDK's SSE decoder (``_iter_events``, both SDKs) ``tap_sync`` / ``tap_async`` stamp each frame as it is
decoded and keep it: nothing of the frame is read per event. A frame the SDK built no item from (its stamp still
pending when the next frame comes, or at the end) is read once, in ``frame_dropped``: ``data: [DONE]`` (openai stops
there), a ping (anthropic skips them) or an event the SDK does not know. Its ``event:`` name is read by the tracker
only for an event off its flat path (an untyped lifecycle event a gateway sent is classified by it)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from otelstream import _guard
from otelstream.adapters._patch import Wrapper
from otelstream.adapters.calls import OBSERVED, Call, finish

Classifier = Callable[[BaseException], "tuple[str, str | None]"]


def observe_sync(gen: Iterator[Any], call: Call, classify: Classifier) -> Iterator[Any]:
    """Around the SDK's ``__stream__``: each pull begins a wait (``t_pull``), each item the SDK yields is one event
    (timed at its frame's decoding when the adapter's tap saw it), and how the SDK's generator ends is how the stream
    ended (``stream_ended``). While a pull runs, this generator is on the stack of the thread running it: a close of
    the body made by that pull is the stream's own (``ending.inside_pull``)."""
    tracker = call.tracker
    clock = tracker.clock
    try:
        tracker.first_pull(clock())
        for item in gen:
            try:
                tracker.event(item, call.frame)
            except Exception as exc:  # our bug: never changes what the caller gets (re-raised in strict mode)
                _guard.report("adapters.event", exc)
            yield item
            tracker.t_pull = clock()
    except BaseException as exc:
        stream_ended(call, exc, classify)
        raise
    stream_ended(call, None, classify)


async def observe_async(agen: AsyncIterator[Any], call: Call, classify: Classifier) -> AsyncIterator[Any]:
    """``observe_sync`` for async streams. While a pull runs, ``call.pulling`` names the task running it: an exception
    thrown into the pull (a cancellation) runs the ``finally`` clauses below it without this generator's frame on the
    stack, so the task is what tells that close from another task's (``ending.inside_pull``)."""
    tracker = call.tracker
    clock = tracker.clock
    whoami = task_identity()
    try:
        call.pulling = whoami()
        tracker.first_pull(clock())
        async for item in agen:
            call.pulling = None
            try:
                tracker.event(item, call.frame)
            except Exception as exc:
                _guard.report("adapters.event", exc)
            yield item
            call.pulling = whoami()
            tracker.t_pull = clock()
    except BaseException as exc:
        stream_ended(call, exc, classify)
        raise
    stream_ended(call, None, classify)


def current_task() -> object:
    """The task running here: asyncio's, else trio's (anyio on trio; trio is not a dependency), else one token for
    every unknown runner (``NO_TASK``), where a close is told from its pull by the stack alone."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no asyncio loop running here
        task = None
    if task is not None:
        return task
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            return trio.lowlevel.current_task()
        except RuntimeError:
            pass
    return NO_TASK


NO_TASK = object()


def task_identity() -> Callable[[], object]:
    """What names the task pulling an async stream, resolved once per stream: ``asyncio.current_task`` itself (a C
    call per pull) when asyncio runs it, else ``current_task``."""
    try:
        if asyncio.current_task() is not None:
            return asyncio.current_task
    except RuntimeError:
        pass
    return current_task


def tap_sync(gen: Iterator[Any], call: Call) -> Iterator[Any]:
    """Each SSE frame as the SDK's decoder yields it: stamped (the end of the wait, before the SDK parses its JSON and
    builds the model) and kept for the item the SDK builds from it; passed on unchanged."""
    tracker = call.tracker
    clock = tracker.clock
    for sse in gen:
        if tracker.t_frame:
            frame_dropped(call)
        tracker.t_frame = clock()
        call.frame = sse
        yield sse


async def tap_async(agen: AsyncIterator[Any], call: Call) -> AsyncIterator[Any]:
    tracker = call.tracker
    clock = tracker.clock
    async for sse in agen:
        if tracker.t_frame:
            frame_dropped(call)
        tracker.t_frame = clock()
        call.frame = sse
        yield sse


def frame_dropped(call: Call) -> None:
    """The SDK built no item from the last frame (its stamp is pending): ``[DONE]``, a ping, or an event it skips."""
    tracker = call.tracker
    at = tracker.t_frame
    tracker.t_frame = 0  # the next event's wait ends at its own frame
    try:
        frame = call.frame
        if str(getattr(frame, "data", "")).startswith("[DONE]"):
            tracker.done_sentinel(at)
        elif getattr(frame, "event", None) == "ping":
            tracker.keepalive(1, at)
    except Exception as exc:  # our bug: never reaches the caller (re-raised in strict mode)
        _guard.report("adapters.frame", exc)


def stream_ended(call: Call, exc: BaseException | None, classify: Classifier) -> None:
    """How an observing generator's body ended is how the stream ended. ``GeneratorExit``: the generator was closed,
    which happens only when the caller's stream is collected (``Stream.close()`` closes the body, not the generator:
    research §1.4 #2; a recorded close already ended the tracker), so ``gc``; any other exception, classified
    (``end_with``); running out, ``eof``. The caller re-raises: nothing is ever swallowed. A plain ``try`` rather
    than a context manager: its object and bound ``__exit__`` would be held for the stream's whole life."""
    if call.tracker.t_frame:  # the last frame made no item: openai's loop stops at `[DONE]`
        frame_dropped(call)
    if exc is None:
        finish(call, "eof")
    elif isinstance(exc, GeneratorExit):
        finish(call, "gc")
    else:
        end_with(call, exc, classify)


def end_with(call: Call, exc: BaseException, classify: Classifier) -> None:
    how: str = "transport_error"
    error_type: str | None = None
    try:
        how, error_type = classify(exc)
    except Exception as err:
        _guard.report("adapters.classify", err)
    finish(call, how, error_type, exc)


def stream_wrapper(take: Callable[[Any], Call | None], classify: Classifier, where: str) -> Wrapper:
    """The wrapper of ``Stream.__stream__`` / ``AsyncStream.__stream__`` (the one choke point every SSE surface and
    helper iterates): when ``take(stream)`` names a call, the SDK's generator wrapped by ``observe_sync`` /
    ``observe_async``."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = None
        try:
            call = take(instance)
        except Exception as exc:
            _guard.report(where, exc)
        if call is None:
            return wrapped(*args, **kwargs)
        call.observed = OBSERVED
        gen = wrapped(*args, **kwargs)
        return observe_async(gen, call, classify) if hasattr(gen, "__anext__") else observe_sync(gen, call, classify)

    return wrapper
