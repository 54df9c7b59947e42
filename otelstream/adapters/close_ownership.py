"""Whose close it was: decided from the order of the facts otelstream's own wrappers see, and nothing else.

The facts, each a flag set where a wrapper of ours already runs:

- the caller's pulls (``Call.state``, set by the observing generator): a pull begins, an item comes out of it, the
  SDK's generator finishes;
- the body's reads and closes (``Call.body``, set by our body wrapper): a read reached the end, a read raised, the
  body was closed;
- a call of the SDK stream object's own ``close()`` (``stream_close_wrapper``): the caller asked for the close.

Never from which thread or task performs a close, nor from what is on the stack, nor from how many frames make one
item: those move between minor releases. The two fields have one writer side each (the pulling code, the body's
reader and closers), so no update of one is lost to the other without a lock.

The rules, as tables below:

- a body that reached its end, or raised, before it was closed was not abandoned by that close;
- a close of the body while a pull runs is the pull's business: how the pull ends decides (the SDK's own
  ``finally: response.close()``, from whatever thread or task a release runs it, and a cancelled read);
- a close of the body while no pull runs is the caller's (``close``), whoever performs it;
- a close the caller asked for through the SDK stream's ``close()`` is ``close``, at once, whatever the SDK does
  inside it (closes its generator, or no longer closes the response); asked while a pull runs, it waits for that
  pull, like a close of the body;
- a pull that fails with a transport error after a read raised on a body closed under it ended by that close;
- a call no generator of ours observes (its body parsed by the caller) ends at the body's close, as ``close``.
- where the caller holds a plain generator of ours (google-genai hands out generators, not stream objects), a
  ``GeneratorExit`` thrown into it while the stream is open is the caller's ``close()`` / ``aclose()``: its collection
  is seen first, by the watch on it (a weak reference's callback runs before a generator's finalizer throws it).
"""

from __future__ import annotations

import enum
from typing import Any

from otelstream import _guard, names
from otelstream.adapters._patch import Patch
from otelstream.adapters.calls import Call, call_on, finish
from otelstream.names import BodyState, CallState, EndReason


class Verdict(enum.Enum):
    IGNORE = "ignore"  # this close abandons nothing: the body had ended, or the stream is over
    DEFER = "defer"  # a pull runs: how it ends decides
    CALLER = "caller"  # the caller's close: reported now


_OPEN, _ENDED, _FAILED, _CLOSED, _CLOSED_FAILED = (
    BodyState.OPEN, BodyState.ENDED, BodyState.FAILED, BodyState.CLOSED, BodyState.CLOSED_THEN_FAILED,
)  # fmt: skip
_UNPULLED, _PULLING, _BETWEEN, _FINISHED = CallState.UNPULLED, CallState.PULLING, CallState.BETWEEN, CallState.FINISHED

# a close of the body: (body, caller's side) -> (body after it, verdict)
ON_BODY_CLOSE: dict[tuple[BodyState, CallState], tuple[BodyState, Verdict]] = {
    (_OPEN, _UNPULLED): (_CLOSED, Verdict.CALLER),
    (_OPEN, _BETWEEN): (_CLOSED, Verdict.CALLER),
    (_OPEN, _PULLING): (_CLOSED, Verdict.DEFER),
    (_OPEN, _FINISHED): (_CLOSED, Verdict.IGNORE),
    **{(body, side): (body, Verdict.IGNORE)
       for body in (_ENDED, _FAILED, _CLOSED, _CLOSED_FAILED) for side in CallState},
}  # fmt: skip

# a read of the body reached its end / raised: body -> body after it
ON_BODY_END: dict[BodyState, BodyState] = {_OPEN: _ENDED, _ENDED: _ENDED, _FAILED: _FAILED, _CLOSED: _CLOSED,
                                           _CLOSED_FAILED: _CLOSED_FAILED}  # fmt: skip
ON_BODY_RAISE: dict[BodyState, BodyState] = {_OPEN: _FAILED, _ENDED: _ENDED, _FAILED: _FAILED,
                                             _CLOSED: _CLOSED_FAILED, _CLOSED_FAILED: _CLOSED_FAILED}  # fmt: skip

# the SDK stream's own close() was called: caller's side -> verdict (the body is left to its own facts)
ON_STREAM_CLOSE: dict[CallState, Verdict] = {
    _UNPULLED: Verdict.CALLER,
    _BETWEEN: Verdict.CALLER,
    _PULLING: Verdict.DEFER,
    _FINISHED: Verdict.IGNORE,
}


def body_closed(call: Call) -> None:
    """A close of the response body (our body wrapper's ``close`` / ``aclose``), by whatever path and thread. A call
    whose events no generator of ours observes (the caller parses the body itself: ``iter_lines``) ends here, as
    the caller's close, whatever the body had read: nothing else of ours would see its end."""
    if call.tracker.ended:
        return
    if not call.observed:
        call.body = _CLOSED
        finish(call, EndReason.CLOSE)
        return
    body, verdict = ON_BODY_CLOSE[call.body, call.state]
    call.body = body
    if verdict is Verdict.CALLER:
        finish(call, EndReason.CLOSE)


def body_ended(call: Call) -> None:
    call.body = ON_BODY_END[call.body]


def body_raised(call: Call) -> None:
    call.body = ON_BODY_RAISE[call.body]


def stream_closed(call: Call) -> None:
    """The caller called the SDK stream object's ``close()`` (or a helper's, or a context exit that calls it)."""
    if call.tracker.ended:
        return
    verdict = ON_STREAM_CLOSE[call.state]
    if verdict is Verdict.CALLER:
        finish(call, EndReason.CLOSE)
    elif verdict is Verdict.DEFER:
        call.close_asked = True


def generator_closed(call: Call) -> None:
    """``GeneratorExit`` reached the generator the caller holds while the stream was open: the caller closed it (a
    collection would have ended the stream first, through the watch)."""
    if not call.tracker.ended:
        finish(call, EndReason.CLOSE)


def failed_pull(call: Call, how: str) -> str:
    """How a pull that raised ended, given how its exception was classified: a transport error that follows a close
    under the pull (a read raised on the closed body, or the caller asked for the close while the pull ran) is that
    close."""
    if how == EndReason.TRANSPORT_ERROR and (call.body is _CLOSED_FAILED or call.close_asked):
        return EndReason.CLOSE
    return how


def stream_close_wrapper(where: str) -> Any:
    """The wrapper of an SDK stream object's ``close()`` (``Stream`` / ``AsyncStream``, and the helpers' streams that
    hold one as ``_raw_stream``): the fact is recorded before the SDK's own close runs; its result is passed on."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            call = call_on(instance) or call_on(getattr(instance, "_raw_stream", None))
            if call is not None:
                stream_closed(call)
        except Exception as exc:
            _guard.report(where, exc)
        return wrapped(*args, **kwargs)

    return wrapper


def close_patches(
    where: str, classes: tuple[tuple[str, str, str], ...], scopes: tuple[tuple[str, ...], tuple[str, ...]]
) -> tuple[Patch, ...]:
    """The patches of SDK stream classes' ``close()``, one wrapper (``stream_close_wrapper``) for all: ``classes``
    lists (module, sync class, async class), ``scopes`` the sync and the async streams' patch scopes. What they alone
    observe: a close the caller asked for (context exits call it), reported at once whatever the SDK does inside."""
    close = stream_close_wrapper(where)
    return tuple(
        Patch(module, f"{cls}.close", close, measures=(names.MEASURE_CALLER_CLOSE,), scopes=scope)
        for module, sync_class, async_class in classes
        for cls, scope in ((sync_class, scopes[0]), (async_class, scopes[1]))
    )
