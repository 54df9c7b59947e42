"""The observing generators (the hot path): around the SDK's own ``__stream__`` generator, each pull is timed, each
item the SDK yields is handed to the tracker, and how the SDK's generator ends is how the stream ended
(``stream_ended``). The SDK's generator runs unchanged; ``stream_wrapper`` puts it inside ``observe_sync`` /
``observe_async``. Each pull's beginning, each item out of it and the generator's end are recorded in ``Call.state``
(one store each), for ``close_ownership``.

Around the SDK's SSE decoder (``_iter_events``, both SDKs) ``tap_sync`` / ``tap_async`` stamp each frame as it is
decoded (the latest stamp ends the wait of the item built next, however many frames the SDK read for it) and keep
the latest frame. A ping (anthropic skips them) is counted in the tap, per frame; ``data: [DONE]``, where openai stops
reading, is looked for in the last frame the SDK read, once, when its generator ends (``last_frame``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from otelstream import _guard, accelerator
from otelstream.adapters._patch import Wrapper
from otelstream.adapters.calls import Call, finish
from otelstream.adapters.close_ownership import failed_pull
from otelstream.core.chunk_time import CHUNK_BOUNDS_NS
from otelstream.names import CallState, EndReason

Classifier = Callable[[BaseException], "tuple[str, str | None]"]

_PULLING, _BETWEEN, _FINISHED = CallState.PULLING, CallState.BETWEEN, CallState.FINISHED


def observe_sync_py(gen: Iterator[Any], call: Call, classify: Classifier) -> Iterator[Any]:
    """The pure-Python reference of ``observe_sync`` (the compiled accelerator's ``Observe`` does the same, step by
    step). Around the SDK's ``__stream__``: each pull begins a wait (``t_pull``), each item the SDK yields is one event
    (timed at its frame's decoding when the adapter's tap saw it), and how the SDK's generator ends is how the stream
    ended (``stream_ended``)."""
    tracker = call.tracker
    clock = tracker.clock
    try:
        call.state = _PULLING
        tracker.first_pull(clock())
        for item in gen:
            call.state = _BETWEEN
            try:
                tracker.event(item, None, call.sse)
            except Exception as exc:  # our bug: never changes what the caller gets (re-raised in strict mode)
                _guard.report("adapters.event", exc)
            yield item
            call.state = _PULLING
            tracker.t_pull = clock()
    except BaseException as exc:
        call.state = _FINISHED
        stream_ended(call, exc, classify)
        raise
    call.state = _FINISHED
    stream_ended(call, None, classify)


async def observe_async(agen: AsyncIterator[Any], call: Call, classify: Classifier) -> AsyncIterator[Any]:
    """``observe_sync`` for async streams."""
    tracker = call.tracker
    clock = tracker.clock
    try:
        call.state = _PULLING
        tracker.first_pull(clock())
        async for item in agen:
            call.state = _BETWEEN
            try:
                tracker.event(item, None, call.sse)
            except Exception as exc:
                _guard.report("adapters.event", exc)
            yield item
            call.state = _PULLING
            tracker.t_pull = clock()
    except BaseException as exc:
        call.state = _FINISHED
        stream_ended(call, exc, classify)
        raise
    call.state = _FINISHED
    stream_ended(call, None, classify)


def tap_sync(gen: Iterator[Any], call: Call, pings: bool) -> Iterator[Any]:
    """Each SSE frame as the SDK's decoder yields it: stamped (the end of the wait, before the SDK parses its JSON and
    builds the model) and kept; passed on unchanged. ``pings``: the SDK drops ``event: ping`` frames, counted here."""
    tracker = call.tracker
    clock = tracker.clock
    for sse in gen:
        tracker.t_frame = clock()
        call.sse = sse
        if pings:
            try:  # inline: a call per frame would cost more than the check
                if sse.event == "ping":
                    _ping(call)
            except Exception as exc:  # our bug, or a frame of another shape: never reaches the caller
                _guard.report("adapters.frame", exc)
        yield sse


async def tap_async(agen: AsyncIterator[Any], call: Call, pings: bool) -> AsyncIterator[Any]:
    tracker = call.tracker
    clock = tracker.clock
    async for sse in agen:
        tracker.t_frame = clock()
        call.sse = sse
        if pings:
            try:  # inline: a call per frame would cost more than the check
                if sse.event == "ping":
                    _ping(call)
            except Exception as exc:  # our bug, or a frame of another shape: never reaches the caller
                _guard.report("adapters.frame", exc)
        yield sse


def _ping(call: Call) -> None:
    """A ping the SDK skips: counted at its frame's stamp, which then ends no item's wait."""
    tracker = call.tracker
    tracker.keepalive(1, tracker.t_frame)
    tracker.t_frame = 0


def last_frame(call: Call) -> None:
    """The SDK's generator ended: a ``data: [DONE]`` it read last (openai stops reading there) is recorded."""
    sse = call.sse
    if sse is None:
        return
    try:
        if str(getattr(sse, "data", "")).startswith("[DONE]"):
            tracker = call.tracker
            tracker.done_sentinel(tracker.t_frame or tracker.clock())
            tracker.t_frame = 0
    except Exception as exc:  # our bug: never reaches the caller (re-raised in strict mode)
        _guard.report("adapters.frame", exc)


def stream_ended(call: Call, exc: BaseException | None, classify: Classifier) -> None:
    """How an observing generator's body ended is how the stream ended. ``GeneratorExit``: the generator was closed
    (the caller's stream was collected; a close the caller asked for already ended the tracker), so ``gc``; any other
    exception, classified (``end_with``); running out, ``eof``. The caller re-raises: nothing is ever swallowed. A
    plain ``try`` rather than a context manager: its object and bound ``__exit__`` would be held for the stream's
    whole life."""
    if call.tracker.ended:
        return
    last_frame(call)
    if exc is None:
        finish(call, EndReason.EOF)
    elif isinstance(exc, GeneratorExit):
        finish(call, EndReason.GC)
    else:
        end_with(call, exc, classify)


def end_with(call: Call, exc: BaseException, classify: Classifier) -> None:
    how: str = EndReason.TRANSPORT_ERROR
    error_type: str | None = None
    try:
        how, error_type = classify(exc)
        how = failed_pull(call, how)
    except Exception as err:
        _guard.report("adapters.classify", err)
    finish(call, how, error_type, exc)


def configure_native(native: Any) -> None:
    """Hand the compiled module what its observer calls and stores (idempotent)."""
    native.configure(
        _guard.report, "adapters.event", stream_ended, _PULLING, _BETWEEN, _FINISHED, time.monotonic_ns,
        CHUNK_BOUNDS_NS,
    )  # fmt: skip


# the sync observer that runs: the compiled one where it was built (``accelerator``), else the reference
observe_sync: Callable[[Iterator[Any], Call, Classifier], Iterator[Any]] = observe_sync_py
if accelerator.native is not None:
    configure_native(accelerator.native)
    observe_sync = accelerator.native.Observe


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
        call.observed = True
        gen = wrapped(*args, **kwargs)
        return observe_async(gen, call, classify) if hasattr(gen, "__anext__") else observe_sync(gen, call, classify)

    return wrapper
