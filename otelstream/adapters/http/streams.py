"""Streams no SDK adapter sees: the HTTP-level observer on ``httpx`` and ``httpx2`` clients, sync and async.

litellm's own providers (it speaks Anthropic's protocol over its own ``httpx`` client and parses the SSE itself) and
plain ``httpx`` users run no SDK function, so the SDK adapters never see their streams. This observer does, at the
client, for a request whose path is an LLM streaming endpoint (``names.HTTP_STREAM_PATHS``, after any prefix a
gateway adds) and whose JSON body asks for a stream, or whose answer is ``text/event-stream``. Exactly one report
per stream: a request sent while an SDK adapter's call runs (``calls.CURRENT``), or that carries one
(``request.extensions[calls.KEY]``), is the SDK adapter's.

Patch points (the same in ``httpx`` 0.18+ and ``httpx2``):

- ``Client.send`` / ``AsyncClient.send``: the call. The request body, when it is in memory, is read once (at most
  ``MAX_BODY`` bytes parsed as JSON: model, ``stream``, ``n``, ``stream_options.include_usage``; nothing else is
  kept, never the prompt); the span starts here, on the caller's thread, and is current during the send (the HTTP
  client span of ``HTTPX2ClientInstrumentor`` nests under it). A non-2xx answer, or an exception before the headers,
  ends the call as ``http_error``.
- ``Client._send_single_request`` / ``AsyncClient._send_single_request`` (one hop: redirects and auth retries run
  it again): ``t_request`` is stamped at each hop (the last wins), and a 2xx answer's byte stream is wrapped before
  ``send`` reads it (``send(stream=False)`` reads the whole body inside ``send``). Without this patch point (another
  client release) the body is wrapped when ``send`` returns, or, when ``send`` read it already, fed at once.

The answer's body is observed by ``body`` (the wrapper of its byte stream, how the stream ends) and
``decoding`` (its bytes to events).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Callable, Iterator
from typing import Any

from otelstream import _guard, names
from otelstream.adapters import _patch
from otelstream.adapters._patch import (
    LIFECYCLE_MEASURES,
    SEND_SCOPES_ASYNC,
    SEND_SCOPES_SYNC,
    T_REQUEST_MEASURES,
    Patch,
    Wrapper,
)
from otelstream.adapters.calls import CURRENT, KEY, RUNTIME, begin_call, finish
from otelstream.adapters.exceptions import is_cancel
from otelstream.adapters.http import bedrock_bodies
from otelstream.adapters.http.body import attach, is_sse, read_already, status_ok
from otelstream.adapters.http.decoding import Observed
from otelstream.adapters.request import header, http_send, ratelimits_of, server_of, tracker_hints
from otelstream.core.report import StreamStart

MAX_BODY = 512 * 1024  # request bodies parsed for the model and flags; a larger body is not read (model unknown)


class _State:
    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = True  # OTELSTREAM_HTTP_STREAMS (set by adapters.install)


STATE = _State()

# the observed call whose send is running on this thread / task (for the per-hop patch)
_SENDING: contextvars.ContextVar[Observed | None] = contextvars.ContextVar("otelstream_http_send", default=None)

_API_TYPE = {names.RESPONSES: "responses", names.CHAT_COMPLETIONS: "chat_completions",
             names.COMPLETIONS: "completions"}  # fmt: skip


# --- classification (once per request) -----------------------------------------------------------------------
def surface_of(path: str) -> str | None:
    """The surface of a request path ('/v1/chat/completions', '/openai/deployments/x/chat/completions', ...)."""
    path = path.rstrip("/")
    for suffix, surface in names.HTTP_STREAM_PATHS:
        if path.endswith(suffix):
            return surface
    return None


def _body_facts(request: Any) -> dict[str, Any] | None:
    """The request's JSON body when it is in memory and at most MAX_BODY bytes, else None (never read a stream)."""
    try:
        content = request.content  # raises when the body is a stream not read yet
    except Exception:
        return None
    if type(content) is not bytes or not content or len(content) > MAX_BODY or content[:1] != b"{":
        return None
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):
        return None
    return body if type(body) is dict else None


def _gemini_model(path: str) -> str | None:
    """The model a Gemini request names in its path (``…/models/{model}:streamGenerateContent``)."""
    head = path.rpartition(":")[0]
    i = head.rfind("/models/")
    return (head[i + 8 :] or None) if i >= 0 else None


def _provider(surface: str, host: str | None, headers: Any, path: str = "") -> str:
    if surface == names.GENERATE_CONTENT:
        vertex = ("/projects/" in path and "/locations/" in path) or (host or "").endswith("aiplatform.googleapis.com")
        return names.PROVIDER_VERTEX if vertex else names.PROVIDER_GEMINI
    if surface == names.MESSAGES:
        return names.PROVIDER_ANTHROPIC
    try:
        if headers.get(names.ANTHROPIC_VERSION_HEADER) is not None:
            return names.PROVIDER_ANTHROPIC
    except Exception:
        pass
    if host is not None:
        if host.endswith(".azure.com"):
            return names.PROVIDER_AZURE
        if host.endswith("anthropic.com"):
            return names.PROVIDER_ANTHROPIC
    return names.PROVIDER_OPENAI


def _classify(request: Any) -> tuple[str, dict[str, Any] | None] | None:
    """(surface, JSON body or None when unreadable) for a POST to an LLM streaming endpoint that no SDK adapter
    owns; None for any other request (the common case: a path check)."""
    ext = getattr(request, "extensions", None)
    if type(ext) is dict and ext.get(KEY) is not None:
        return None
    surface = surface_of(request.url.path)
    if surface is None or str(request.method).upper() != "POST":
        return None
    headers = getattr(request, "headers", None)
    if headers is not None and _sdk_request(headers):
        return None  # an SDK's request whose adapter could not take it (a missing patch point, already warned)
    return surface, _body_facts(request)


def _sdk_request(headers: Any) -> bool:
    """Whether an SDK with an adapter of its own sent the request (openai, anthropic, google-genai)."""
    if headers.get(names.SDK_REQUEST_HEADER) is not None:
        return True
    client = headers.get(names.GOOGLE_SDK_HEADER)
    return isinstance(client, str) and names.GOOGLE_SDK_MARK in client


def _streams(surface: str, body: dict[str, Any] | None) -> bool:
    """Whether the request asks for a stream: its body says so, or its path does (Gemini's streaming method)."""
    return surface == names.GENERATE_CONTENT or (body is not None and body.get("stream") is True)


def _begin(request: Any, surface: str, body: dict[str, Any], scope: str) -> Observed | None:
    """Start the call (the span, on the caller's thread); None when instrumentation is off."""
    url = request.url
    model = _gemini_model(url.path) if surface == names.GENERATE_CONTENT else body.get("model")
    host, port = server_of(url)
    start = StreamStart(
        surface=surface,
        provider=_provider(surface, host, getattr(request, "headers", None), url.path),
        request_model=model[:256] if isinstance(model, str) else None,
        server_address=host,
        server_port=port,
        api_type=_API_TYPE.get(surface),
        t_request_ns=RUNTIME.clock(),
    )
    call = begin_call(start, scopes=(scope,), **tracker_hints(surface, body))
    if call is None:
        return None
    call.observed = True
    return Observed(call)


# --- the send -------------------------------------------------------------------------------------------------
def _send_done(obs: Observed, response: Any) -> None:
    with _guard.guard("http_streams.send"):
        obs.tracker.ratelimits = ratelimits_of(response)  # the final answer's (after redirects)
        if obs.wrapped:
            return
        if not status_ok(response):
            obs.tracker.request_id = header(response, names.REQUEST_ID_HEADERS)
            finish(obs.call, "http_error", obs.http_error_type(response))
            return
        attach(obs, response)
        if not obs.wrapped:
            read_already(obs, response)


def _send_failed(obs: Observed, exc: BaseException) -> None:
    with _guard.guard("http_streams.send"):
        if obs.wrapped:
            finish(obs.call, "transport_error")  # send closes the response it could not finish
        elif is_cancel(exc):
            finish(obs.call, "cancel")
        else:
            finish(obs.call, "http_error")


@contextlib.contextmanager
def _sending(obs: Observed) -> Iterator[None]:
    """Around an observed call's send: its span is current, its hops are the ones ``_hop_*`` stamp, and an exception
    out of the send ends the call."""
    listener = obs.call.listener
    active: object = None
    with _guard.guard("http_streams.activate"):
        active = listener.activate(obs.tracker.handle)
    token = _SENDING.set(obs)
    try:
        yield
    except BaseException as exc:
        _send_failed(obs, exc)
        raise
    finally:
        _SENDING.reset(token)
        with _guard.guard("http_streams.activate"):
            listener.deactivate(active)


Sender = Callable[[Observed, Any, tuple[Any, ...], dict[str, Any]], Any]
LateSender = Callable[[Any, str, Any, tuple[Any, ...], dict[str, Any]], Any]


def _send_wrapper(scope: str, observed: Sender, late: LateSender) -> Wrapper:
    """The wrapper of ``Client.send`` or ``AsyncClient.send``: a streamed request's call (and span) starts here, on
    the caller's thread where the caller calls ``send``, and ``observed`` sends it (the async one returns the
    coroutine that does it when awaited); ``late`` sends a request whose body did not say whether it streams."""

    def send(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if CURRENT.get() is not None:
            return http_send(wrapped, instance, args, kwargs)  # an SDK adapter's call: it owns the stream
        if not STATE.enabled:
            return wrapped(*args, **kwargs)
        request = args[0] if args else kwargs.get("request")
        found = obs = None
        with _guard.guard("http_streams.begin"):
            found = _classify(request)
            if found is not None and _streams(*found):
                obs = _begin(request, found[0], found[1] or {}, scope)
            elif found is None:  # a Bedrock stream is named by its path, not by its body
                obs = bedrock_bodies.begin(request, scope)
        if obs is not None:
            return observed(obs, wrapped, args, kwargs)
        if found is None or found[1] is not None:
            return wrapped(*args, **kwargs)
        return late(request, found[0], wrapped, args, kwargs)

    return send


def _send_observed_sync(obs: Observed, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    with _sending(obs):
        response = wrapped(*args, **kwargs)
    _send_done(obs, response)
    return response


async def _send_observed_async(obs: Observed, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    with _sending(obs):
        response = await wrapped(*args, **kwargs)
    _send_done(obs, response)
    return response


def _send_late_sync(request: Any, surface: str, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    t_send = RUNTIME.clock()
    response = wrapped(*args, **kwargs)
    _late(request, surface, response, t_send, _patch.HTTP)
    return response


async def _send_late_async(request: Any, surface: str, wrapped: Any, args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> Any:  # fmt: skip
    t_send = RUNTIME.clock()
    response = await wrapped(*args, **kwargs)
    _late(request, surface, response, t_send, _patch.HTTP_ASYNC)
    return response


_send_sync = _send_wrapper(_patch.HTTP, _send_observed_sync, _send_late_sync)
_send_async = _send_wrapper(_patch.HTTP_ASYNC, _send_observed_async, _send_late_async)


def _late(request: Any, surface: str, response: Any, t_send: int, scope: str) -> None:
    """A stream whose request body did not say so (not in memory, too large, not JSON): observed from its
    ``text/event-stream`` answer on (the span starts now; the times still count from the send). A body the caller
    already read (``send(stream=False)``) is fed at once."""
    with _guard.guard("http_streams.late"):
        if not (status_ok(response) and is_sse(response)):
            return
        obs = _begin(request, surface, {}, scope)
        if obs is None:
            return
        tracker = obs.tracker
        tracker.t_request = tracker.t_last_ns = t_send
        tracker.ratelimits = ratelimits_of(response)
        attach(obs, response)
        if not obs.wrapped:
            read_already(obs, response)


def _hop_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    obs = _SENDING.get()
    if obs is None:
        return wrapped(*args, **kwargs)
    tracker = obs.tracker
    tracker.t_request = tracker.t_last_ns = RUNTIME.clock()  # this hop is the request sent last so far
    response = wrapped(*args, **kwargs)
    with _guard.guard("http_streams.hop"):
        attach(obs, response)
    return response


async def _hop_async_run(obs: Observed, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    tracker = obs.tracker
    tracker.t_request = tracker.t_last_ns = RUNTIME.clock()
    response = await wrapped(*args, **kwargs)
    with _guard.guard("http_streams.hop"):
        attach(obs, response)
    return response


def _hop_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    obs = _SENDING.get()
    if obs is None:
        return wrapped(*args, **kwargs)
    return _hop_async_run(obs, wrapped, args, kwargs)


# Without the per-hop patch point a body that ``send`` reads itself (``send(stream=False)``) is fed at once when
# ``send`` returns: its times to the first event and delta are then unknown.
_HOP_MEASURES = (names.MEASURE_TIME_TO_FIRST_EVENT, names.MEASURE_TIME_TO_FIRST_DELTA)


def _patches(module: str) -> tuple[Patch, ...]:
    # httpx2 is the SDKs' client: its send also stamps their calls' t_request (request.http_send); a missing send
    # leaves the HTTP-level streams unobserved (nothing begins them)
    sdk = module == "httpx2"
    return (
        Patch(module, "Client.send", _send_sync, measures=T_REQUEST_MEASURES if sdk else LIFECYCLE_MEASURES,
              scopes=(*SEND_SCOPES_SYNC, _patch.HTTP) if sdk else (_patch.HTTP,)),
        Patch(module, "AsyncClient.send", _send_async,
              measures=T_REQUEST_MEASURES if sdk else LIFECYCLE_MEASURES,
              scopes=(*SEND_SCOPES_ASYNC, _patch.HTTP_ASYNC) if sdk else (_patch.HTTP_ASYNC,)),
        Patch(module, "Client._send_single_request", _hop_sync, measures=_HOP_MEASURES, scopes=(_patch.HTTP,)),
        Patch(module, "AsyncClient._send_single_request", _hop_async, measures=_HOP_MEASURES,
              scopes=(_patch.HTTP_ASYNC,)),
    )  # fmt: skip


PATCHES = (*_patches("httpx2"), *_patches("httpx"))
