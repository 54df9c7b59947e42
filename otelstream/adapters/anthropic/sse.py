"""anthropic 1.x and 2.x Messages streams: ``messages.create(stream=True)``, ``messages.stream()`` (``text_stream``,
``until_done``, ``get_final_message``), the beta twins, Bedrock and Vertex clients, raw/streaming responses.

Patch points (file:line refs are anthropic 2.14, ``site-packages/anthropic``):

- ``SyncAPIClient._request`` / ``AsyncAPIClient._request`` (``_base_client.py:1256``, async twin): the call. It runs
  *inside* the SDK's own call span (``request()`` makes it current at ``:1250``), so the span we start there nests
  under it (the SDK keeps the one CLIENT span, ours is an INTERNAL child). anthropic 1.x has no call span
  and no ``_request``: its ``request()`` (the retry loop itself) is patched instead. Bedrock rewrites the URL later,
  in ``_attempt_request`` → ``_prepare_options``, so the surface is still ``/v1/messages`` here.
- ``_attempt_request`` (``_base_client.py:1418``, async ``:2208``): one HTTP attempt; retries, and ``t_request``,
  stamped again when httpx2 sends (``request.http_send``): the attempt first runs ``_prepare_request`` (``:1440``),
  where Vertex refreshes its token and Bedrock signs, which is not the provider's time.
- ``Stream.__init__`` / ``AsyncStream.__init__`` (``_streaming.py:33``, ``:154``), post-hook: the SDK iterates a
  *copy* of the Stream (``_iterator`` is ``copy(self).__stream__()``, ``:47-51``), so the call is put in the
  instance here (the shallow copy carries it) and the watch goes on this, the caller's object.
- ``Stream.__stream__`` / ``AsyncStream.__stream__`` (``:82``, ``:211``): every event, once, on the copy; runs only
  when first iterated (a stream closed unread is ended by the body-close hook or the watch on the caller's object).
  Its generator runs unchanged, wrapped by ``observing.observe_sync`` / ``observe_async``.
- ``Stream._iter_events`` / ``AsyncStream._iter_events`` (``:70``): the raw SSE tapped around the SDK's generator:
  each frame's decoding is stamped (the end of the wait, before the SDK parses its JSON and builds the model), and
  the ``event: ping`` keepalives that the SDK skips (``:93-94``) are counted.
"""

from __future__ import annotations

import copy
from typing import Any

from otelstream import _guard, names
from otelstream.adapters import _patch
from otelstream.adapters._patch import LIFECYCLE_MEASURES, REQUEST_MEASURES, SEND_MEASURES, Patch
from otelstream.adapters.calls import CURRENT, KEY, RUNTIME, Call, begin_call, call_on
from otelstream.adapters.exceptions import sdk_classifier
from otelstream.adapters.observing import observe_async, observe_sync
from otelstream.adapters.request import path_of, request_of, request_params, server_of_client
from otelstream.adapters.stream_objects import bind_stream, stream_patches, stream_request_wrappers
from otelstream.core.report import StreamStart


def _provider(client: Any, host: str | None) -> str:
    name = type(client).__name__
    if "Bedrock" in name or (host is not None and "bedrock" in host):
        return names.PROVIDER_BEDROCK
    if "Vertex" in name or (host is not None and host.endswith("aiplatform.googleapis.com")):
        return names.PROVIDER_VERTEX
    return names.PROVIDER_ANTHROPIC


def _start(client: Any, options: Any) -> StreamStart | None:
    # /v1/messages (beta: /v1/messages?beta=true); legacy /v1/complete is out of scope
    if not path_of(getattr(options, "url", None)).endswith("/v1/messages"):
        return None
    body = getattr(options, "json_data", None)
    model = body.get("model") if isinstance(body, dict) else None
    host, port = server_of_client(getattr(client, "base_url", None))
    return StreamStart(
        surface=names.MESSAGES,
        provider=_provider(client, host),
        request_model=model[:256] if isinstance(model, str) else None,
        server_address=host,
        server_port=port,
        t_request_ns=RUNTIME.clock(),
        **request_params(body),
    )


def _begin(client: Any, options: Any, scopes: tuple[str, ...]) -> Call | None:
    start = _start(client, options)
    return None if start is None else begin_call(start, scopes=scopes)


def _body_error_type(exc: BaseException) -> str | None:
    body = getattr(exc, "body", None)
    err = body.get("error") if isinstance(body, dict) else None
    value = err.get("type") if isinstance(err, dict) else None
    return value[:64] if isinstance(value, str) and value else None


# an in-band ``event: error`` reaches the caller as ``APIStatusError`` with status 200 (``_streaming.py:99-112``) →
# error, of the type its body names; APIConnectionError → transport_error; raw httpx2 transport errors, which
# anthropic does not wrap mid-stream, → transport_error (``classify_common``)
classify = sdk_classifier("anthropic", "AnthropicError", _body_error_type)


# --- the call ---------------------------------------------------------------------------------------------
def _late_bind(call: Call, stream: Any) -> None:
    """``uninstrument()`` removed the patches between this call's request and the building of its Stream: set the
    Stream's lazy iterator (``_streaming.py:47-51``) to an observed one now, so the stream is still reported once."""
    if not hasattr(stream, "__stream__") or getattr(stream, "response", None) is None:
        return
    state = getattr(stream, "__dict__", None)
    if type(state) is not dict or "_iterator" in state or KEY in state:
        return  # already iterating, or already bound by the patches
    _bind(stream, call)
    taken = _take(stream)
    if taken is None:
        return
    taken.observed = True
    inner = copy.copy(stream).__stream__()  # what the cached property would build
    state["_iterator"] = observe_async(inner, taken, classify) if hasattr(inner, "__anext__") else observe_sync(
        inner, taken, classify
    )


_request_sync, _request_async = stream_request_wrappers(
    _begin, _late_bind, "anthropic", (_patch.ANTHROPIC, _patch.ANTHROPIC_ASYNC)
)


def _attempt_enter(call: Call) -> object:
    tracker = call.tracker
    now = RUNTIME.clock()
    tracker.t_request = now
    tracker.t_last_ns = now
    call.attempts += 1
    tracker.retries = call.attempts - 1
    return call.listener.activate(tracker.handle)


def _attempt_exit(call: Call, token: object, result: Any) -> None:
    try:
        call.listener.deactivate(token)
        response = result[0] if isinstance(result, tuple) and result else None
        ext = getattr(request_of(response), "extensions", None) if response is not None else None
        if type(ext) is dict:
            ext[KEY] = call  # so a Stream built later by .parse() finds its call
    except Exception as exc:
        _guard.report("anthropic.attempt", exc)


def _attempt_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = CURRENT.get()
    if call is None or call.bound:
        return wrapped(*args, **kwargs)
    token: object = None
    try:
        token = _attempt_enter(call)
    except Exception as exc:
        _guard.report("anthropic.attempt", exc)
    result: Any = None
    call.sending += 1  # the request leaves at httpx2's send, after the SDK prepared (maybe signed) it
    try:
        result = wrapped(*args, **kwargs)
        return result
    finally:
        call.sending -= 1
        _attempt_exit(call, token, result)


async def _attempt_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = CURRENT.get()
    if call is None or call.bound:
        return await wrapped(*args, **kwargs)
    token: object = None
    try:
        token = _attempt_enter(call)
    except Exception as exc:
        _guard.report("anthropic.attempt", exc)
    result: Any = None
    call.sending += 1  # the request leaves at httpx2's send, after the SDK prepared (maybe signed) it
    try:
        result = await wrapped(*args, **kwargs)
        return result
    finally:
        call.sending -= 1
        _attempt_exit(call, token, result)


# --- the Stream -----------------------------------------------------------------------------------------
def _stream_init(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = wrapped(*args, **kwargs)
    try:
        _bind(instance)
    except Exception as exc:
        _guard.report("anthropic.stream_init", exc)
    return result


def _bind(stream: Any, known: Call | None = None) -> None:
    if call_on(stream) is None:
        bind_stream(stream, known, _begin, (_patch.ANTHROPIC, _patch.ANTHROPIC_ASYNC))


def _take(instance: Any) -> Call | None:
    """The call of the copy being iterated, once: a second ``__stream__`` on the same call is not observed. A release
    that makes its generator inside ``Stream.__init__`` (1.x: ``self._iterator = self.__stream__()``) calls this
    before the ``__init__`` post-hook has bound the stream: bind it here then, from the attributes already set."""
    call = call_on(instance)
    if call is None and getattr(instance, "response", None) is not None:
        _bind(instance)
        call = call_on(instance)
    return call if call is not None and not call.observed else None


_SYNC, _ASYNC = (_patch.ANTHROPIC,), (_patch.ANTHROPIC_ASYNC,)

PATCHES = (
    # anthropic 1.x has no call span, so no _request below request(): its request() is the same choke point
    Patch("anthropic._base_client", "SyncAPIClient._request", _request_sync, measures=REQUEST_MEASURES, scopes=_SYNC,
          fallback="SyncAPIClient.request"),
    Patch("anthropic._base_client", "AsyncAPIClient._request", _request_async, measures=REQUEST_MEASURES,
          scopes=_ASYNC, fallback="AsyncAPIClient.request"),
    Patch("anthropic._base_client", "SyncAPIClient._attempt_request", _attempt_sync, measures=SEND_MEASURES,
          scopes=_SYNC),
    Patch("anthropic._base_client", "AsyncAPIClient._attempt_request", _attempt_async, measures=SEND_MEASURES,
          scopes=_ASYNC),
    Patch("anthropic._streaming", "Stream.__init__", _stream_init, measures=LIFECYCLE_MEASURES, scopes=_SYNC),
    Patch("anthropic._streaming", "AsyncStream.__init__", _stream_init, measures=LIFECYCLE_MEASURES, scopes=_ASYNC),
    # the pings the SDK skips: without the _iter_events tap they cannot be counted
    *stream_patches("anthropic", _take, classify, True, (names.MEASURE_KEEPALIVES,), (_SYNC, _ASYNC), helpers=(
        ("anthropic.lib.streaming._messages", "MessageStream", "AsyncMessageStream"),
        ("anthropic.lib.streaming._beta_messages", "BetaMessageStream", "BetaAsyncMessageStream"),
    )),
)
