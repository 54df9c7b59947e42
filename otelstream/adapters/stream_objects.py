"""The ``Stream`` objects of the SDKs whose ``request()`` returns one over an ``httpx2`` response (openai, anthropic:
one generator made both SDKs, so their ``_base_client`` and ``_streaming`` modules have the same shape): the request
wrappers that begin a stream's call; each Stream bound to its call once, or, until a response wrapper's ``.parse()``
builds it, the raw response named, bound and watched; the patches of the Stream classes' ``__stream__`` (every event,
once), ``_iter_events`` (the raw SSE, tapped around the SDK's generator) and ``close`` (the caller's close)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from otelstream import _guard, names
from otelstream.adapters._patch import LIFECYCLE_MEASURES, Patch, Wrapper
from otelstream.adapters.body_readers import bind_response
from otelstream.adapters.calls import Call, bind_to, current_unbound, observed_call, watch
from otelstream.adapters.close_ownership import close_patches
from otelstream.adapters.observing import Classifier, stream_wrapper, tap_async, tap_sync
from otelstream.adapters.request import After, call_of_response, header, name_on_request, request_wrappers

# begins the call of a stream request: (client, the request's options, scopes) -> the call, or None
BeginWith = Callable[[Any, Any, tuple[str, ...]], "Call | None"]


def stream_request_wrappers(
    begin_with: BeginWith, late_bind: After, sdk: str, scopes: tuple[str, str]
) -> tuple[Wrapper, Wrapper]:
    """The sync and async wrappers (``request_wrappers``) of the SDK's ``request(cast_to, options, *, stream, …)``: a
    call begins, by ``begin_with``, only for a request that asks for a stream; its result goes to ``after_request``.
    ``scopes``: the sync and the async streams' patch scopes."""

    def begin(client: Any, args: tuple[Any, ...], kwargs: dict[str, Any], scopes: tuple[str, ...]) -> Call | None:
        if not kwargs.get("stream"):
            return None
        return begin_with(client, args[1] if len(args) > 1 else kwargs.get("options"), scopes)

    return request_wrappers(begin, after_request(late_bind, f"{sdk}.after_request"), f"{sdk}.request", scopes)


def after_request(late_bind: After, where: str) -> After:
    """What follows a stream request that returned (``request_wrappers``' ``after``): ``with_raw_response`` /
    ``with_streaming_response`` return the response wrapper, whose Stream ``.parse()`` builds later, so the raw
    response is named, bound and watched until then; a Stream whose patches ``uninstrument()`` removed since the
    request went out goes to ``late_bind``, so that it is still reported once."""

    def after(call: Call, result: Any) -> None:
        try:
            if call.bound:
                return
            http = getattr(result, "http_response", None)
            if http is not None:
                name_on_request(call, http)
                bind_response(call, http)
                watch(call, result)
            else:
                late_bind(call, result)
        except Exception as exc:
            _guard.report(where, exc)

    return after


def bind_stream(stream: Any, known: Call | None, begin_with: BeginWith, scopes: tuple[str, str]) -> Call | None:
    """Bind an SDK Stream to its call, once: ``known``, else the call named on its response's request, else the one
    unbound on this thread or task, else one ``begin_with`` begins from the Stream's own client and options (a Stream
    built outside a patched request: by hand, or the request's patch point is missing in this release; ``scopes``:
    sync, async). The call, or None when there is none or it was bound already."""
    response = stream.response
    call = known or call_of_response(response) or current_unbound()
    if call is None:
        options = getattr(stream, "_options", None)
        if options is None:
            return None
        scope = scopes[1] if hasattr(stream, "__anext__") else scopes[0]
        call = begin_with(getattr(stream, "_client", None), options, (scope,))
        if call is None:
            return None
    if call.bound:
        return None
    call.bound = True
    bind_to(stream, call)  # anthropic's iterating copy of the Stream (copy(self)) carries it too
    call.tracker.request_id = header(response, names.REQUEST_ID_HEADERS)
    bind_response(call, response)
    watch(call, stream)
    return call


def stream_patches(
    package: str,
    take: Callable[[Any], Call | None],
    classify: Classifier,
    pings: bool,
    tap_measures: tuple[str, ...],
    scopes: tuple[tuple[str, ...], tuple[str, ...]],
    helpers: tuple[tuple[str, str, str], ...],
) -> tuple[Patch, ...]:
    """The patches of ``Stream`` and ``AsyncStream`` in ``{package}._streaming``: ``__stream__``, observed when
    ``take(stream)`` names a call (``stream_wrapper``); ``_iter_events``, each frame tapped (``tap_sync`` /
    ``tap_async``; ``pings``: the SDK drops ``event: ping`` frames, counted there) while the stream is observed;
    ``close``, and that of the ``helpers`` streams (module, sync class, async class) that hold one, the caller's
    close (``close_patches``). ``tap_measures``: what the tap alone observes (without it a wait also ends when the
    item arrives, not when its frame was decoded: the SDK's own work on the event then counts as wait).
    ``scopes``: sync, async."""
    stream = stream_wrapper(take, classify, f"{package}.stream")

    def events_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        gen = wrapped(*args, **kwargs)
        call = observed_call(instance)
        return gen if call is None else tap_sync(gen, call, pings)

    def events_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        agen = wrapped(*args, **kwargs)
        call = observed_call(instance)
        return agen if call is None else tap_async(agen, call, pings)

    module = f"{package}._streaming"
    sync, async_ = scopes
    return (
        Patch(module, "Stream.__stream__", stream, measures=LIFECYCLE_MEASURES, scopes=sync),
        Patch(module, "AsyncStream.__stream__", stream, measures=LIFECYCLE_MEASURES, scopes=async_),
        Patch(module, "Stream._iter_events", events_sync, measures=tap_measures, scopes=sync),
        Patch(module, "AsyncStream._iter_events", events_async, measures=tap_measures, scopes=async_),
        *close_patches(f"{package}.close", ((module, "Stream", "AsyncStream"), *helpers), scopes),
    )
