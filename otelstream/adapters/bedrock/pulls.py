"""The caller's pulls of a Bedrock stream (the hot path): botocore's ``EventStream.__iter__`` and aiobotocore's
``AioEventStream.__anext__`` (the async generator its ``__aiter__`` returns) are each wrapped by an observing
generator: every pull is timed, every event the caller receives goes to the tracker at the moment it is handed over
(TTFD is when the caller received the first delta, whatever botocore read before), and how botocore's generator ends
is how the stream ended.

botocore makes a new generator at each ``iter()`` of the same ``EventStream`` (they share one reader of the body), so
a caller's ``break`` closes only that generator (at once when sync, later when async): it is no end of the stream.
The stream is then between pulls: the caller may iterate again (observed too), call ``close()`` (``close``), or drop
it (its collection: ``gc``).

Each event as the tracker reads it: a ConverseStream event as botocore yields it (``{type: payload}``); an invoke
chunk of an Anthropic model as the Messages event its bytes hold; another family's chunk as is (an unsupported
payload: counted, not read).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from otelstream import _guard, names
from otelstream.adapters.bedrock.failures import classify
from otelstream.adapters.calls import Call, call_on
from otelstream.adapters.close_ownership import stream_close_wrapper
from otelstream.adapters.observing import stream_ended
from otelstream.names import CallState

_UNPULLED, _PULLING, _BETWEEN, _FINISHED = CallState.UNPULLED, CallState.PULLING, CallState.BETWEEN, CallState.FINISHED
_CHUNK = "chunk"


def _feed(call: Call, item: Any) -> None:
    """One event reached the caller."""
    tracker = call.tracker
    try:
        if tracker.surface == names.MESSAGES:  # an Anthropic model's invoke stream: the chunk's bytes
            chunk = item.get(_CHUNK) if type(item) is dict else None
            raw = chunk.get("bytes") if type(chunk) is dict else None
            if type(raw) is not bytes:
                tracker.event(item)  # not a chunk: the Messages reader flags what it cannot read
                return
            try:
                ev = json.loads(raw)
            except (ValueError, RecursionError):
                tracker.anomaly(names.ANOM_UNDECODABLE, "invoke chunk bytes are not JSON")
                return
            tracker.event(ev)
        else:
            tracker.event(item)
    except Exception as exc:  # our bug: never changes what the caller gets (re-raised in strict mode)
        _guard.report("bedrock.event", exc)


def _begin_pull(call: Call) -> None:
    tracker = call.tracker
    now = tracker.clock()
    if call.state is _UNPULLED:
        tracker.first_pull(now)
    else:
        tracker.t_pull = now
    call.state = _PULLING


def observe_sync(gen: Iterator[Any], call: Call, owner: object) -> Iterator[Any]:
    """``owner``, the caller's ``EventStream``, is held until the end is recorded: botocore's generators end with the
    body and with them its last reference when the caller iterates ``response["stream"]`` without keeping it, and its
    collection must not read as the caller's ``gc`` before the end is seen here."""
    tracker = call.tracker
    try:
        _begin_pull(call)
        for item in gen:
            call.state = _BETWEEN
            _feed(call, item)
            yield item
            call.state = _PULLING
            tracker.t_pull = tracker.clock()
    except GeneratorExit:
        # the caller left its loop (it was between pulls): no end; a later iter() is observed again
        raise
    except BaseException as exc:
        call.state = _FINISHED
        stream_ended(call, exc, classify)
        raise
    call.state = _FINISHED
    stream_ended(call, None, classify)
    del owner


async def observe_async(agen: AsyncIterator[Any], call: Call, owner: object) -> AsyncIterator[Any]:
    tracker = call.tracker
    try:
        _begin_pull(call)
        async for item in agen:
            call.state = _BETWEEN
            _feed(call, item)
            yield item
            call.state = _PULLING
            tracker.t_pull = tracker.clock()
    except GeneratorExit:  # an async loop left: its generator is closed later, maybe while another one pulls
        raise
    except BaseException as exc:
        call.state = _FINISHED
        stream_ended(call, exc, classify)
        raise
    call.state = _FINISHED
    stream_ended(call, None, classify)
    del owner


def _take(instance: Any) -> Call | None:
    """The stream's call while it has not ended. Every generator of it is observed: they share one reader of the
    body, so each event reaches the caller through exactly one of them."""
    call = call_on(instance)
    if call is None or call.tracker.ended:
        return None
    call.observed = True
    return call


def iter_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    gen = wrapped(*args, **kwargs)
    call = None
    try:
        call = _take(instance)
    except Exception as exc:
        _guard.report("bedrock.iter", exc)
    return gen if call is None else observe_sync(gen, call, instance)


def iter_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    agen = wrapped(*args, **kwargs)
    call = None
    try:
        call = _take(instance)
    except Exception as exc:
        _guard.report("bedrock.iter", exc)
    return agen if call is None else observe_async(agen, call, instance)


close = stream_close_wrapper("bedrock.close")
