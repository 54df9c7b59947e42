"""openai 2.31+ and 3.x SSE surfaces: Responses (create, retrieve/resume, helpers, beta), Chat Completions, Completions.

Patch points (file:line refs are openai 3.57, ``site-packages/openai``):

- ``SyncAPIClient.request`` / ``AsyncAPIClient.request`` (``_base_client.py:1135``, ``:1753``): the call, with its
  ``FinalRequestOptions`` (url, body, query) and ``stream`` flag — classify the surface, start the span. The SDK's
  retry loop (``:1158-1259``) runs inside it, before any Stream exists.
- ``_send_request`` on the base clients (``_base_client.py:1097``, ``:1715``) *and* on ``OpenAI`` / ``AsyncOpenAI``
  (``_client.py:202``, ``:729``), which override it for the auth retry: one attempt per outermost entry, and
  ``t_request`` is the innermost (last) send. Covers legacy ``httpx`` clients too.
- ``Stream.__stream__`` / ``AsyncStream.__stream__`` (``_streaming.py:63``, ``:179``): the one choke point every
  wire event passes once, whatever the consumption style (``for``, ``next()``, helpers, ``until_done()``). It is
  called eagerly from ``Stream.__init__`` (``:46``, ``:161``) on the caller's own Stream; its generator runs
  unchanged, wrapped by ``observing.observe_sync`` / ``observe_async``.
- ``Stream._iter_events`` / ``AsyncStream._iter_events`` (``_streaming.py:55``, ``:170``): the raw SSE tapped
  around the SDK's generator: each frame's decoding is stamped (the end of the wait, before the SDK parses its JSON
  and builds the model), ``data: [DONE]`` (consumed at ``:72-73``) is seen, and the ``event:`` name (which
  classifies lifecycle events a gateway sent without ``type``) is kept for the item the SDK builds from it.
- ``ResponseStream.__init__`` / ``AsyncResponseStream.__init__`` (``lib/streaming/responses/_responses.py:39``,
  ``:141``): the ``.stream(response_id=…, starting_after=N)`` helper retrieves from 0 and filters on the client
  (``:67``, ``:166``); the tracker learns N so the first delta counts only after it.
"""

from __future__ import annotations

from typing import Any

from otelstream import _guard, names
from otelstream.adapters import _patch, inventory
from otelstream.adapters._patch import REQUEST_MEASURES, SEND_MEASURES, Patch
from otelstream.adapters.calls import CURRENT, KEY, RUNTIME, Call, begin_call, call_on
from otelstream.adapters.exceptions import sdk_classifier
from otelstream.adapters.observing import observe_async, observe_sync
from otelstream.adapters.request import path_of, request_params, server_of_client, tracker_hints
from otelstream.adapters.stream_objects import bind_stream, stream_patches, stream_request_wrappers
from otelstream.core.report import StreamStart

_API_TYPE = {
    names.RESPONSES: "responses",
    names.CHAT_COMPLETIONS: "chat_completions",
    names.COMPLETIONS: "completions",
}


# --- classification --------------------------------------------------------------------------------------
def _surface(options: Any) -> tuple[str, bool] | None:
    """(surface, is_retrieve) from the request options; None for endpoints we do not observe (images, audio,
    assistants runs, agents), whose streams pass through untouched."""
    path = path_of(getattr(options, "url", None))
    if path.endswith("/chat/completions"):
        return names.CHAT_COMPLETIONS, False
    if path.endswith("/completions"):
        return names.COMPLETIONS, False
    if path.endswith("/responses"):
        return names.RESPONSES, False
    method = getattr(options, "method", "")
    if "/responses/" in path and isinstance(method, str) and method.lower() == "get":
        return names.RESPONSES, True
    return None


def _provider(client: Any, host: str | None) -> str:
    if "Azure" in type(client).__name__ or (host is not None and host.endswith(".azure.com")):
        return names.PROVIDER_AZURE
    return names.PROVIDER_OPENAI


def _start(client: Any, options: Any) -> tuple[StreamStart, dict[str, Any]] | None:
    found = _surface(options)
    if found is None:
        return None
    surface, retrieve = found
    body = getattr(options, "json_data", None)
    body = body if isinstance(body, dict) else {}
    params = getattr(options, "params", None)
    params = params if isinstance(params, dict) else {}
    model = body.get("model")
    host, port = server_of_client(getattr(client, "base_url", None))
    kwargs = tracker_hints(surface, body)
    after = params.get("starting_after")
    if retrieve and type(after) is int:
        kwargs["starting_after"] = after
    start = StreamStart(
        surface=surface,
        provider=_provider(client, host),
        request_model=model[:256] if isinstance(model, str) else None,
        server_address=host,
        server_port=port,
        api_type=_API_TYPE[surface],
        t_request_ns=RUNTIME.clock(),
        resumed=retrieve,
        **request_params(body),
    )
    return start, kwargs


def _scopes(start: StreamStart, scopes: tuple[str, ...]) -> tuple[str, ...]:
    return (*scopes, _patch.OPENAI_RESUME) if start.resumed else scopes


def _begin(client: Any, options: Any, scopes: tuple[str, ...]) -> Call | None:
    found = _start(client, options)
    if found is None:
        return None
    start, tracker_kwargs = found
    call = begin_call(start, scopes=_scopes(start, scopes), **tracker_kwargs)
    if call is not None and start.resumed:
        _known_response_id(call, options)
    return call


def _known_response_id(call: Call, options: Any) -> None:
    """A retrieve names its response in the URL (``/responses/{id}``): a resumed stream cut before any event that
    carries the response object still reports which response it was (the events overwrite it when they do)."""
    path = path_of(getattr(options, "url", None))
    rid = path.rpartition("/responses/")[2]
    if rid and "/" not in rid:
        call.tracker.response_id = rid[:128]


# APIConnectionError/APITimeoutError → transport_error; any other OpenAIError (in-band ``{"error": …}`` raised as
# APIError, ``_streaming.py:95-108``) → error; the rest per ``classify_common``
classify = sdk_classifier("openai", "OpenAIError")


# --- the call: request() and the per-attempt send ---------------------------------------------------------
def _late_bind(call: Call, stream: Any) -> None:
    """``uninstrument()`` removed the patches between this call's request and the building of its Stream: observe the
    Stream's generator here, so a stream whose request was sent instrumented is still reported, exactly once.
    ``[DONE]`` is then invisible (``_iter_events`` unseen). (An SDK without the ``__stream__`` patch point starts no
    call at all: ``begin_call``.)"""
    it = getattr(stream, "__dict__", {}).get("_iterator")
    if it is None:
        _patch.PATCHER.lacks(inventory.OPENAI_STREAM_ITERATOR)
        return
    if getattr(stream, "response", None) is None or _bind(stream, call) is None:
        return
    call.tracker.done_observable = False
    call.observed = True
    stream._iterator = observe_async(it, call, classify) if hasattr(it, "__anext__") else observe_sync(
        it, call, classify
    )


# ``with_raw_response`` / ``with_streaming_response`` return the response wrapper; the Stream is built later by
# ``.parse()`` (``_legacy_response.py:229``, ``_response.py:160``)
_request_sync, _request_async = stream_request_wrappers(
    _begin, _late_bind, "openai", (_patch.OPENAI, _patch.OPENAI_ASYNC)
)


def _send_enter(call: Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Stamp the send; returns True for the outermost entry (one attempt)."""
    tracker = call.tracker
    now = RUNTIME.clock()
    tracker.t_request = now  # the innermost entry is the real send: it overwrites
    tracker.t_last_ns = now
    request = args[0] if args else kwargs.get("request")
    ext = getattr(request, "extensions", None)
    if type(ext) is dict:
        ext[KEY] = call
    if call.sending:
        return False
    call.attempts += 1
    tracker.retries = call.attempts - 1
    return True


def _send_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = CURRENT.get()
    if call is None or call.bound:
        return wrapped(*args, **kwargs)
    outer = False
    token = None
    try:
        outer = _send_enter(call, args, kwargs)
        if outer:
            token = call.listener.activate(call.tracker.handle)
    except Exception as exc:
        _guard.report("openai.send", exc)
    call.sending += 1
    try:
        return wrapped(*args, **kwargs)
    finally:
        call.sending -= 1
        if token is not None:
            try:
                call.listener.deactivate(token)
            except Exception as exc:
                _guard.report("openai.send", exc)


async def _send_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = CURRENT.get()
    if call is None or call.bound:
        return await wrapped(*args, **kwargs)
    token = None
    try:
        if _send_enter(call, args, kwargs):
            token = call.listener.activate(call.tracker.handle)
    except Exception as exc:
        _guard.report("openai.send", exc)
    call.sending += 1
    try:
        return await wrapped(*args, **kwargs)
    finally:
        call.sending -= 1
        if token is not None:
            try:
                call.listener.deactivate(token)
            except Exception as exc:
                _guard.report("openai.send", exc)


# --- the Stream -----------------------------------------------------------------------------------------
def _bind(stream: Any, known: Call | None = None) -> Call | None:
    return bind_stream(stream, known, _begin, (_patch.OPENAI, _patch.OPENAI_ASYNC))


def _response_stream_init(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = wrapped(*args, **kwargs)
    try:
        after = kwargs.get("starting_after")
        raw = kwargs.get("raw_stream")
        call = call_on(raw) if raw is not None else None
        if type(after) is int and call is not None:
            call.tracker.client_filter_after = after
    except Exception as exc:
        _guard.report("openai.response_stream", exc)
    return result


# what the _iter_events tap alone observes besides the frames' timing
_RAW_SSE = (names.MEASURE_DONE_SENTINEL, names.MEASURE_EVENT_NAMES)
_SYNC, _ASYNC = (_patch.OPENAI,), (_patch.OPENAI_ASYNC,)

PATCHES = (
    Patch("openai._base_client", "SyncAPIClient.request", _request_sync, measures=REQUEST_MEASURES, scopes=_SYNC),
    Patch("openai._base_client", "AsyncAPIClient.request", _request_async, measures=REQUEST_MEASURES, scopes=_ASYNC),
    Patch("openai._base_client", "SyncAPIClient._send_request", _send_sync, measures=SEND_MEASURES, scopes=_SYNC),
    Patch("openai._base_client", "AsyncAPIClient._send_request", _send_async, measures=SEND_MEASURES, scopes=_ASYNC),
    Patch("openai._client", "OpenAI._send_request", _send_sync, measures=SEND_MEASURES, scopes=_SYNC),
    Patch("openai._client", "AsyncOpenAI._send_request", _send_async, measures=SEND_MEASURES, scopes=_ASYNC),
    *stream_patches("openai", _bind, classify, False, _RAW_SSE, (_SYNC, _ASYNC), helpers=(
        ("openai.lib.streaming.chat._completions", "ChatCompletionStream", "AsyncChatCompletionStream"),
        ("openai.lib.streaming.responses._responses", "ResponseStream", "AsyncResponseStream"),
    )),
    # the helper's client-side filter (starting_after): without it the first delta could be a replayed one
    Patch("openai.lib.streaming.responses._responses", "ResponseStream.__init__", _response_stream_init,
          measures=(names.MEASURE_TIME_TO_FIRST_DELTA,), scopes=(_patch.OPENAI_RESUME,)),
    Patch("openai.lib.streaming.responses._responses", "AsyncResponseStream.__init__", _response_stream_init,
          measures=(names.MEASURE_TIME_TO_FIRST_DELTA,), scopes=(_patch.OPENAI_RESUME,)),
)
