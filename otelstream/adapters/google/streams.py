"""google-genai's public stream methods and the generators they hand the caller.

Patch points (google-genai 3.6.1; the same public names since the releases ``[google]`` allows):

- ``Models.generate_content_stream`` (a generator function) and ``AsyncModels.generate_content_stream`` (a
  coroutine returning an async generator);
- ``Chat.send_message_stream`` / ``AsyncChat.send_message_stream``, the same shapes: a chat's stream runs the
  models' method inside its pulls (once, or once per function-calling turn), so that inner call, made while the
  chat's call is current (``calls.CURRENT``), is left alone: one report per stream the caller holds.

What the caller receives is our generator around the SDK's (a generator for a generator, an async generator for an
async generator), which pulls the SDK's unchanged and hands each item on as it came. Each item is one event, fed to
the tracker as the ``GenerateContentResponse`` the caller receives (its fields read from the model's ``__dict__``, no
dump): that is what the caller sees, after the SDK's automatic continuation cleared an intermediate ``CONTINUATION``
finish reason and summed the usage of its hops, which the raw JSON of one hop does not say.

The call begins at the first pull, where google-genai sends the request (a generator never pulled sends nothing and
is not a stream). While a pull runs the call is current and ``sending`` (``wire``: the transport's send stamps
``t_request``, the answer's acceptance makes the stream exist). How it ends, from what our generator sees:
exhausted → ``eof`` (the protocol decides completed, incomplete, or cut without a finish reason); an exception →
``wire.classify``; ``GeneratorExit`` → the caller's close (``close_ownership.generator_closed``); its collection →
``gc`` (the watch on our generator, which fires before the generator's finalizer).

Releases: verified live on google-genai 1.10.0, 1.50.0 and 3.6.1. Before 1.50 google-genai drops an in-band
``{"error": …}`` object (the caller gets an empty chunk and the stream ends): such a stream reads as ``cut``, the
error's type unknown. Before 1.10 it streams over ``requests``: no send is seen, so the times from the send are
unknown (``wire.SEND_SEEN``).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

from otelstream import _guard
from otelstream.adapters import _patch
from otelstream.adapters._patch import LIFECYCLE_MEASURES, Patch
from otelstream.adapters.calls import CURRENT, RUNTIME, Call, begin_call, finish, watch
from otelstream.adapters.close_ownership import generator_closed
from otelstream.adapters.google import wire
from otelstream.names import CallState, EndReason

_PULLING, _BETWEEN, _FINISHED = CallState.PULLING, CallState.BETWEEN, CallState.FINISHED


class _Origin:
    """What the call needs at its first pull: the client, the model and config of the call, and a weak reference to
    the generator the caller holds (ours: it is watched for its collection)."""

    __slots__ = ("api", "config", "model", "owner", "scope")

    def __init__(self, api: Any, model: object, config: object, scope: str) -> None:
        self.api = api
        self.model = model
        self.config = config
        self.scope = scope
        self.owner: weakref.ref[Any] | None = None


def _begin(origin: _Origin) -> Call | None:
    call = None
    try:
        call = begin_call(wire.start_of(origin.api, origin.model, origin.config), scopes=(origin.scope,))
        if call is not None:
            call.sending = 1  # the transport's send stamps t_request until the first answer is accepted
            call.observed = True
            owner = origin.owner() if origin.owner is not None else None
            if owner is not None:
                watch(call, owner)
            tracker = call.tracker
            tracker.first_pull(tracker.clock())
    except Exception as exc:
        _guard.report("google.begin", exc)
    origin.api = origin.config = None  # nothing of the caller's request is kept for the stream's life
    return call


def _activate(call: Call) -> object:
    try:
        return call.listener.activate(call.tracker.handle)
    except Exception as exc:  # the listener's failure never reaches the caller (re-raised in strict mode)
        _guard.report("google.activate", exc)
        return None


def _deactivate(call: Call, active: object) -> None:
    try:
        call.listener.deactivate(active)
    except Exception as exc:
        _guard.report("google.activate", exc)


def _ended(call: Call, exc: BaseException | None) -> None:
    try:
        if call.tracker.ended:
            return
        if exc is None:
            finish(call, EndReason.EOF)
        elif isinstance(exc, GeneratorExit):
            generator_closed(call)
        else:
            how, error_type = wire.classify(exc, call.bound)
            finish(call, how, error_type, exc)
    except Exception as err:
        _guard.report("google.end", err)


def observe_sync(gen: Generator[Any, None, None], origin: _Origin) -> Iterator[Any]:
    """The generator the caller holds: the SDK's, pulled with the call current, each item an event."""
    call = _begin(origin)
    if call is None:
        yield from gen
        return
    tracker = call.tracker
    clock = tracker.clock
    call.state = _PULLING
    try:
        while True:
            unbound = not call.bound  # until the answer: our span is current at the send (the HTTP span nests)
            active = _activate(call) if unbound else None
            token = CURRENT.set(call)
            try:
                item = next(gen)
            except StopIteration:
                break
            finally:
                CURRENT.reset(token)
                if unbound:
                    _deactivate(call, active)
            call.state = _BETWEEN
            call.bound = True  # an item: the answer was accepted, whether or not the answer hook saw it
            try:
                tracker.event(item)
            except Exception as exc:  # our bug: never changes what the caller gets (re-raised in strict mode)
                _guard.report("google.event", exc)
            yield item
            call.state = _PULLING
            tracker.t_pull = clock()
    except GeneratorExit as exc:
        call.state = _FINISHED
        _ended(call, exc)
        gen.close()  # as ``yield from`` would: the SDK's generator is closed with ours, at once
        raise
    except BaseException as exc:
        call.state = _FINISHED
        _ended(call, exc)
        raise
    call.state = _FINISHED
    _ended(call, None)


async def observe_async(agen: AsyncIterator[Any], origin: _Origin) -> AsyncIterator[Any]:
    """``observe_sync`` for the async streams."""
    call = _begin(origin)
    if call is None:
        async for item in agen:
            yield item
        return
    tracker = call.tracker
    clock = tracker.clock
    call.state = _PULLING
    try:
        while True:
            unbound = not call.bound  # until the answer: our span is current at the send (the HTTP span nests)
            active = _activate(call) if unbound else None
            token = CURRENT.set(call)
            try:
                item = await agen.__anext__()
            except StopAsyncIteration:
                break
            finally:
                CURRENT.reset(token)
                if unbound:
                    _deactivate(call, active)
            call.state = _BETWEEN
            call.bound = True
            try:
                tracker.event(item)
            except Exception as exc:
                _guard.report("google.event", exc)
            yield item
            call.state = _PULLING
            tracker.t_pull = clock()
    except GeneratorExit as exc:
        call.state = _FINISHED
        _ended(call, exc)
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            await aclose()
        raise
    except BaseException as exc:
        call.state = _FINISHED
        _ended(call, exc)
        raise
    call.state = _FINISHED
    _ended(call, None)


def _wrap_sync(gen: Generator[Any, None, None], origin: _Origin) -> Iterator[Any]:
    ours = observe_sync(gen, origin)
    origin.owner = weakref.ref(ours)
    return ours


def _wrap_async(agen: AsyncIterator[Any], origin: _Origin) -> AsyncIterator[Any]:
    ours = observe_async(agen, origin)
    origin.owner = weakref.ref(ours)
    return ours


def _take(instance: Any, model: object, config: object, scope: str) -> _Origin | None:
    """The origin of a stream to observe; None inside another observed call (a chat's own models call) or when
    instrumentation is off."""
    if CURRENT.get() is not None or RUNTIME.listener is None:
        return None
    return _Origin(getattr(instance, "_api_client", None), model, config, scope)


def _chat_origin(instance: Any, kwargs: dict[str, Any], args: tuple[Any, ...], scope: str) -> _Origin | None:
    if CURRENT.get() is not None or RUNTIME.listener is None:
        return None
    modules = getattr(instance, "_modules", None)
    config = kwargs.get("config", args[1] if len(args) > 1 else None) or getattr(instance, "_config", None)
    return _Origin(getattr(modules, "_api_client", None), getattr(instance, "_model", None), config, scope)


def _models_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    gen = wrapped(*args, **kwargs)
    origin = None
    with _guard.guard("google.models"):
        origin = _take(instance, kwargs.get("model"), kwargs.get("config"), _patch.GOOGLE)
    return gen if origin is None else _wrap_sync(gen, origin)


async def _models_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    agen = await wrapped(*args, **kwargs)
    origin = None
    with _guard.guard("google.models"):
        origin = _take(instance, kwargs.get("model"), kwargs.get("config"), _patch.GOOGLE_ASYNC)
    return agen if origin is None else _wrap_async(agen, origin)


def _chat_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    gen = wrapped(*args, **kwargs)
    origin = None
    with _guard.guard("google.chat"):
        origin = _chat_origin(instance, kwargs, args, _patch.GOOGLE)
    return gen if origin is None else _wrap_sync(gen, origin)


async def _chat_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    agen = await wrapped(*args, **kwargs)
    origin = None
    with _guard.guard("google.chat"):
        origin = _chat_origin(instance, kwargs, args, _patch.GOOGLE_ASYNC)
    return agen if origin is None else _wrap_async(agen, origin)


_SYNC, _ASYNC = (_patch.GOOGLE,), (_patch.GOOGLE_ASYNC,)
PATCHES = (
    Patch("google.genai.models", "Models.generate_content_stream", _models_sync, measures=LIFECYCLE_MEASURES,
          scopes=_SYNC),
    Patch("google.genai.models", "AsyncModels.generate_content_stream", _models_async,
          measures=LIFECYCLE_MEASURES, scopes=_ASYNC),
    Patch("google.genai.chats", "Chat.send_message_stream", _chat_sync, measures=LIFECYCLE_MEASURES, scopes=_SYNC),
    Patch("google.genai.chats", "AsyncChat.send_message_stream", _chat_async, measures=LIFECYCLE_MEASURES,
          scopes=_ASYNC),
    *wire.PATCHES,
)  # fmt: skip
