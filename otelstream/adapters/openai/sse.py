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
from otelstream.adapters._patch import LIFECYCLE_MEASURES, REQUEST_MEASURES, SEND_MEASURES, Patch
from otelstream.adapters.body_readers import bind_response
from otelstream.adapters.calls import (
    CURRENT,
    KEY,
    RUNTIME,
    Call,
    begin_call,
    bind_to,
    call_on,
    current_unbound,
    observed_call,
    watch,
)
from otelstream.adapters.close_ownership import stream_close_wrapper
from otelstream.adapters.exceptions import classify_common, error_type_of
from otelstream.adapters.observing import observe_async, observe_sync, stream_wrapper, tap_async, tap_sync
from otelstream.adapters.request import (
    call_of_response,
    header,
    name_on_request,
    path_of,
    request_params,
    request_wrappers,
    server_of_client,
)
from otelstream.core.report import StreamStart
from otelstream.names import EndReason

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
    kwargs: dict[str, Any] = {}
    if surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS):
        n = body.get("n")
        if type(n) is int and n > 0:
            kwargs["expected_choices"] = n
        stream_options = body.get("stream_options")
        kwargs["usage_requested"] = bool(isinstance(stream_options, dict) and stream_options.get("include_usage"))
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


def _options_arg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[1] if len(args) > 1 else kwargs.get("options")


def _scopes(start: StreamStart, scopes: tuple[str, ...]) -> tuple[str, ...]:
    return (*scopes, _patch.OPENAI_RESUME) if start.resumed else scopes


def _begin(client: Any, args: tuple[Any, ...], kwargs: dict[str, Any], scopes: tuple[str, ...]) -> Call | None:
    if not kwargs.get("stream"):
        return None
    options = _options_arg(args, kwargs)
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


_errors: tuple[type[BaseException], type[BaseException], type[BaseException]] | None = None


def classify(exc: BaseException) -> tuple[EndReason, str | None]:
    """docs/telemetry.md: APIConnectionError/APITimeoutError → transport_error; any other OpenAIError (in-band
    ``{"error": …}`` raised as APIError, ``_streaming.py:95-108``) → error; the rest per ``classify_common``."""
    global _errors
    if _errors is None:
        import openai

        _errors = (openai.APIConnectionError, openai.APIError, openai.OpenAIError)
    conn_error, api_error, base_error = _errors
    if isinstance(exc, conn_error):
        return EndReason.TRANSPORT_ERROR, None
    if isinstance(exc, api_error):
        return EndReason.ERROR, error_type_of(exc)
    common = classify_common(exc)
    if common is not None:
        return common
    if isinstance(exc, base_error):
        return EndReason.ERROR, None
    return EndReason.TRANSPORT_ERROR, None  # not a provider code: the exception's type decides the error class


# --- the call: request() and the per-attempt send ---------------------------------------------------------
def _after_request(call: Call, result: Any) -> None:
    """``with_raw_response`` / ``with_streaming_response`` return the response wrapper; the Stream is built later
    by ``.parse()`` (``_legacy_response.py:229``, ``_response.py:160``). Until then watch the raw response."""
    try:
        if call.bound:
            return
        http = getattr(result, "http_response", None)
        if http is not None:
            name_on_request(call, http)
            bind_response(call, http)
            watch(call, result)
        else:
            _late_bind(call, result)
    except Exception as exc:
        _guard.report("openai.after_request", exc)


_request_sync, _request_async = request_wrappers(
    _begin, _after_request, "openai.request", (_patch.OPENAI, _patch.OPENAI_ASYNC)
)


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
    response = stream.response
    call = known or call_of_response(response) or current_unbound()
    if call is None:
        # built outside a patched request (by hand, or the request patch is missing in this SDK version)
        options = getattr(stream, "_options", None)
        found = _start(getattr(stream, "_client", None), options) if options is not None else None
        if found is None:
            return None
        scope = _patch.OPENAI_ASYNC if hasattr(stream, "__anext__") else _patch.OPENAI
        call = begin_call(found[0], scopes=_scopes(found[0], (scope,)), **found[1])
        if call is None:
            return None
        if found[0].resumed:
            _known_response_id(call, options)
    if call.bound:
        return None
    call.bound = True
    bind_to(stream, call)
    call.tracker.request_id = header(response, names.REQUEST_ID_HEADERS)
    bind_response(call, response)
    watch(call, stream)
    return call


_stream = stream_wrapper(_bind, classify, "openai.stream")


def _iter_events_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    gen = wrapped(*args, **kwargs)
    call = observed_call(instance)
    return gen if call is None else tap_sync(gen, call, False)


def _iter_events_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    agen = wrapped(*args, **kwargs)
    call = observed_call(instance)
    return agen if call is None else tap_async(agen, call, False)


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


# What the _iter_events tap alone observes (without it a wait also ends when the item arrives, not when its frame
# was decoded: the SDK's own work on the event then counts as wait)
_RAW_SSE = (names.MEASURE_DONE_SENTINEL, names.MEASURE_EVENT_NAMES)
_SYNC, _ASYNC = (_patch.OPENAI,), (_patch.OPENAI_ASYNC,)
_CLOSE = (names.MEASURE_CALLER_CLOSE,)
_close = stream_close_wrapper("openai.close")

PATCHES = (
    Patch("openai._base_client", "SyncAPIClient.request", _request_sync, measures=REQUEST_MEASURES, scopes=_SYNC),
    Patch("openai._base_client", "AsyncAPIClient.request", _request_async, measures=REQUEST_MEASURES, scopes=_ASYNC),
    Patch("openai._base_client", "SyncAPIClient._send_request", _send_sync, measures=SEND_MEASURES, scopes=_SYNC),
    Patch("openai._base_client", "AsyncAPIClient._send_request", _send_async, measures=SEND_MEASURES, scopes=_ASYNC),
    Patch("openai._client", "OpenAI._send_request", _send_sync, measures=SEND_MEASURES, scopes=_SYNC),
    Patch("openai._client", "AsyncOpenAI._send_request", _send_async, measures=SEND_MEASURES, scopes=_ASYNC),
    Patch("openai._streaming", "Stream.__stream__", _stream, measures=LIFECYCLE_MEASURES, scopes=_SYNC),
    Patch("openai._streaming", "AsyncStream.__stream__", _stream, measures=LIFECYCLE_MEASURES, scopes=_ASYNC),
    Patch("openai._streaming", "Stream._iter_events", _iter_events_sync, measures=_RAW_SSE, scopes=_SYNC),
    Patch("openai._streaming", "AsyncStream._iter_events", _iter_events_async, measures=_RAW_SSE, scopes=_ASYNC),
    # a close the caller asked for (context exits call it): reported at once, whatever the SDK does inside it
    Patch("openai._streaming", "Stream.close", _close, measures=_CLOSE, scopes=_SYNC),
    Patch("openai._streaming", "AsyncStream.close", _close, measures=_CLOSE, scopes=_ASYNC),
    Patch("openai.lib.streaming.chat._completions", "ChatCompletionStream.close", _close, measures=_CLOSE,
          scopes=_SYNC),
    Patch("openai.lib.streaming.chat._completions", "AsyncChatCompletionStream.close", _close, measures=_CLOSE,
          scopes=_ASYNC),
    Patch("openai.lib.streaming.responses._responses", "ResponseStream.close", _close, measures=_CLOSE, scopes=_SYNC),
    Patch("openai.lib.streaming.responses._responses", "AsyncResponseStream.close", _close, measures=_CLOSE,
          scopes=_ASYNC),
    # the helper's client-side filter (starting_after): without it the first delta could be a replayed one
    Patch("openai.lib.streaming.responses._responses", "ResponseStream.__init__", _response_stream_init,
          measures=(names.MEASURE_TIME_TO_FIRST_DELTA,), scopes=(_patch.OPENAI_RESUME,)),
    Patch("openai.lib.streaming.responses._responses", "AsyncResponseStream.__init__", _response_stream_init,
          measures=(names.MEASURE_TIME_TO_FIRST_DELTA,), scopes=(_patch.OPENAI_RESUME,)),
)
