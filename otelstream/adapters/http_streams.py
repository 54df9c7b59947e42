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

The wrapped byte stream hands the caller every chunk exactly as the transport produced it; each chunk is decoded by
``core.sse.SSEByteDecoder`` and its events fed to the tracker before the chunk is passed on. Ends: EOF (judged by
the protocol), an exception during a pull (``transport_error``, a cancellation ``abandoned``/cancel), the response
closed before the end (``abandoned``/close: the caller's ``close()``, a context exit, a ``break`` out of httpx2's
iterators), the response collected unclosed (``abandoned``/gc), the idle fallback.
"""

from __future__ import annotations

import contextvars
import json
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from otelstream import _guard, names
from otelstream.adapters import _patch
from otelstream.adapters._patch import (
    LIFECYCLE_MEASURES,
    SEND_SCOPES_ASYNC,
    SEND_SCOPES_SYNC,
    T_REQUEST_MEASURES,
    Patch,
)
from otelstream.adapters.calls import CURRENT, KEY, OBSERVED, RUNTIME, Call, begin_call, finish, watch
from otelstream.adapters.ending import is_cancel
from otelstream.adapters.request import header, http_send, server_of
from otelstream.core.report import StreamStart
from otelstream.core.sse import SSEByteDecoder

MAX_BODY = 512 * 1024  # request bodies parsed for the model and flags; a larger body is not read (model unknown)


class _State:
    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = True  # OTELSTREAM_HTTP_STREAMS (set by adapters.install)


STATE = _State()

# the observed call whose send is running on this thread / task (for the per-hop patch)
_SENDING: contextvars.ContextVar[_Observed | None] = contextvars.ContextVar("otelstream_http_send", default=None)

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


def _provider(surface: str, host: str | None, headers: Any) -> str:
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


class _Observed:
    """One stream seen at the HTTP client: its call (tracker, listener) and the decoding state of its body."""

    __slots__ = ("call", "chat", "comments", "decoder", "inflate", "messages", "stopped", "stopped_flagged",
                 "tracker", "wrapped")  # fmt: skip

    def __init__(self, call: Call) -> None:
        self.call = call
        self.tracker = call.tracker
        surface = call.tracker.surface
        self.messages = surface == names.MESSAGES
        self.chat = surface == names.CHAT_COMPLETIONS
        self.decoder = SSEByteDecoder()
        self.comments = 0
        self.stopped = False  # after `[DONE]` an OpenAI client stops reading: later events are not the answer
        self.stopped_flagged = False
        self.wrapped = False
        # the body's content coding undone before decoding (the caller's bytes stay as they are): None for identity
        self.inflate: Any = None

    # --- the hot path: one chunk the caller pulled ------------------------------------------------------------
    def chunk(self, data: bytes) -> None:
        if self.inflate is not None:
            data = self.inflate(data)
        decoder = self.decoder
        for name, payload in decoder.feed(data):
            self.event(name, payload)
        if decoder.comments != self.comments:
            self.tracker.keepalive(decoder.comments - self.comments)
            self.comments = decoder.comments

    def event(self, name: str | None, data: bytes | str | None) -> None:
        tracker = self.tracker
        if type(data) is bytes:
            # The plain text delta, recognised on the bytes (compact JSON, as the providers send it) and fed as the
            # one event the tracker's flat path reads: json.loads would cost three to five times the whole budget.
            # Keys and punctuation outside JSON strings are never escaped, so these byte patterns cannot come from
            # text inside a string. Anything else is parsed below.
            if self.messages:
                if name == "content_block_delta" and data.startswith(_MSG_HEAD) and data[-1] == 125:  # }
                    i = data.find(_MSG_TEXT, _MSG_HEAD_LEN) + _MSG_TEXT_LEN
                    if i > _MSG_TEXT_LEN and len(data) > i and data[i] != 34:  # a non-empty string
                        tracker.event(_MESSAGES_DELTA, name)
                        return
            elif self.chat and tracker._fast and tracker.last_choice == 0 and not self.stopped:
                # the tracker is steady (its flat path runs): one choice, index 0, non-empty content, no finish
                # reason, no usage object, no error
                i = data.find(_CHAT_TEXT) + _CHAT_TEXT_LEN
                if (
                    i > _CHAT_TEXT_LEN
                    and len(data) > i
                    and data[i] != 34  # a non-empty string
                    and data[0] == 123  # {
                    and data[-1] == 125  # }
                    and data.find(b'"finish_reason":"', i) < 0
                    and data.find(b'"usage":{') < 0
                    and data.find(b'"error"') < 0
                    and data.find(b'"index":', i) < 0  # one choice (the first index was before i)
                ):
                    tracker.event(_CHAT_DELTA, name)
                    return
        self._general(name, data)

    def _general(self, name: str | None, data: bytes | str | None) -> None:
        """Any other event, as ``otelstream check`` feeds a recording (the rules the SDKs apply to the wire)."""
        tracker = self.tracker
        if tracker.ended:
            return
        if self.stopped:
            if not self.stopped_flagged:
                self.stopped_flagged = True
                tracker.anomaly(names.ANOM_EVENT_AFTER_TERMINAL, "data after [DONE]")
            return
        if data is None:
            tracker.anomaly(names.ANOM_UNDECODABLE, "event larger than the decoder's limit (cut)")
            return
        if data[:6] in (b"[DONE]", "[DONE]"):
            tracker.done_sentinel()
            if not self.messages:
                self.stopped = True
            return
        if self.messages:
            if name == "ping":
                tracker.keepalive()
                return
            if name is None:
                tracker.anomaly(names.ANOM_UNKNOWN_EVENT, "event without an event: name (clients skip it)")
                return
            if not data and name != "error":
                return
        try:
            value = json.loads(data)
        except (ValueError, RecursionError):
            tracker.anomaly(names.ANOM_UNDECODABLE, "data is not JSON" + (f" (event {name!r})" if name else ""))
            return
        tracker.event(value, name)

    def eof(self) -> None:
        decoder = self.decoder
        for name, payload in decoder.finish():
            self.event(name, payload)
        if decoder.comments != self.comments:
            self.tracker.keepalive(decoder.comments - self.comments)
            self.comments = decoder.comments
        if decoder.unterminated:
            self.tracker.anomaly(names.ANOM_UNTERMINATED_EVENT, "the body ended inside an event (no blank line)")
        finish(self.call, "eof")


# the byte patterns of a plain text delta, and the events the flat path reads in their place (never mutated)
_MSG_HEAD = b'{"type":"content_block_delta","index"'
_MSG_HEAD_LEN = len(_MSG_HEAD)
_MSG_TEXT = b'"delta":{"type":"text_delta","text":"'
_MSG_TEXT_LEN = len(_MSG_TEXT)
_CHAT_TEXT = b'"choices":[{"index":0,"delta":{"content":"'
_CHAT_TEXT_LEN = len(_CHAT_TEXT)
# the events the flat path reads in place of the plain deltas recognised on the bytes (never mutated)
_MESSAGES_DELTA: dict[str, Any] = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "-"}}
_CHAT_DELTA: dict[str, Any] = {"choices": [{"index": 0, "delta": {"content": "-"}}]}


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
    if headers is not None and headers.get(names.SDK_REQUEST_HEADER) is not None:
        return None  # an SDK's request whose adapter could not take it (a missing patch point, already warned)
    return surface, _body_facts(request)


def _begin(request: Any, surface: str, body: dict[str, Any], scope: str) -> _Observed | None:
    """Start the call (the span, on the caller's thread); None when instrumentation is off."""
    model = body.get("model")
    kwargs: dict[str, Any] = {}
    if surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS):
        n = body.get("n")
        if type(n) is int and n > 0:
            kwargs["expected_choices"] = n
        options = body.get("stream_options")
        kwargs["usage_requested"] = bool(isinstance(options, dict) and options.get("include_usage"))
    url = request.url
    host, port = server_of(url)
    start = StreamStart(
        surface=surface,
        provider=_provider(surface, host, getattr(request, "headers", None)),
        request_model=model[:256] if isinstance(model, str) else None,
        server_address=host,
        server_port=port,
        api_type=_API_TYPE.get(surface),
        t_request_ns=RUNTIME.clock(),
    )
    call = begin_call(start, scopes=(scope,), **kwargs)
    if call is None:
        return None
    call.observed = OBSERVED
    return _Observed(call)


# --- the body -------------------------------------------------------------------------------------------------
def _status_ok(response: Any) -> bool:
    status = getattr(response, "status_code", 0)
    return type(status) is int and 200 <= status < 300


def _is_sse(response: Any) -> bool:
    value = header(response, ("content-type",)) or ""
    return value.split(";", 1)[0].strip().lower() == names.SSE_CONTENT_TYPE


def _inflater(coding: str) -> Any:
    """A chunk-by-chunk decoder for a ``Content-Encoding`` the client accepted (httpx and httpx2 advertise brotli and
    zstd only when their modules are installed), or None for identity. A coding no decoder here knows raises
    ``LookupError``: the stream is then left unobserved rather than read as events that never came."""
    codings = [part.strip().lower() for part in coding.split(",") if part.strip()]
    steps: list[Any] = []
    for name in reversed(codings):  # listed in the order they were applied
        if name in ("gzip", "x-gzip"):
            steps.append(zlib.decompressobj(zlib.MAX_WBITS | 16).decompress)
        elif name == "deflate":
            steps.append(_Deflate().decompress)
        elif name == "br":
            steps.append(_optional("brotli").Decompressor().process)
        elif name == "zstd":
            steps.append(_optional("zstandard").ZstdDecompressor().decompressobj().decompress)
        elif name != "identity":
            raise LookupError(name)
    if not steps:
        return None
    if len(steps) == 1:
        return steps[0]

    def chained(data: bytes) -> bytes:
        for step in steps:
            data = step(data)
        return data

    return chained


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped, or (wrongly, but commonly) raw."""

    __slots__ = ("inner",)

    def __init__(self) -> None:
        self.inner: Any = None

    def decompress(self, data: bytes) -> bytes:
        if self.inner is None:
            self.inner = zlib.decompressobj()
            try:
                return self.inner.decompress(data)  # type: ignore[no-any-return]
            except zlib.error:
                self.inner = zlib.decompressobj(-zlib.MAX_WBITS)
        return self.inner.decompress(data)  # type: ignore[no-any-return]


def _optional(module: str) -> Any:
    """An optional compression module (``brotli``, ``zstandard``): LookupError when it is not installed."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise LookupError(module) from exc


def _attach(obs: _Observed, response: Any) -> None:
    """Wrap a 2xx answer's byte stream (once); a non-2xx answer is left to the end of the send."""
    if obs.wrapped or not _status_ok(response):
        return
    coding = header(response, ("content-encoding",))
    if coding:
        try:
            obs.inflate = _inflater(coding)
        except LookupError:
            return  # a coding the client did not advertise: it cannot decode the body either
    body = response.stream
    classes = _body_classes(type(response).__module__.partition(".")[0])
    if classes is None:
        return
    sync_cls, async_cls, sync_base, async_base = classes
    if isinstance(body, sync_base):
        response.stream = sync_cls(body, obs)
    elif isinstance(body, async_base):
        response.stream = async_cls(body, obs)
    else:
        return
    obs.wrapped = True
    call = obs.call
    call.bound = True
    call.tracker.request_id = header(response, names.REQUEST_ID_HEADERS)
    watch(call, response)


def _iter_sync(body: Any, obs: _Observed) -> Iterator[bytes]:
    tracker = obs.tracker
    clock = tracker.clock
    try:
        tracker.t_pull = clock()
        for chunk in body:
            try:
                obs.chunk(chunk)
            except Exception as exc:  # our bug: never changes what the caller gets (re-raised in strict mode)
                _guard.report("http_streams.chunk", exc)
            yield chunk
            if not tracker.t_pull:
                tracker.t_pull = clock()
    except GeneratorExit:
        raise  # the caller dropped the iterator: its close, or the response's collection, ends the stream
    except BaseException as exc:
        _ended_by(obs, exc)
        raise
    with _guard.guard("http_streams.eof"):
        obs.eof()


async def _iter_async(body: Any, obs: _Observed) -> AsyncIterator[bytes]:
    tracker = obs.tracker
    clock = tracker.clock
    try:
        tracker.t_pull = clock()
        async for chunk in body:
            try:
                obs.chunk(chunk)
            except Exception as exc:
                _guard.report("http_streams.chunk", exc)
            yield chunk
            if not tracker.t_pull:
                tracker.t_pull = clock()
    except GeneratorExit:
        raise
    except BaseException as exc:
        _ended_by(obs, exc)
        raise
    with _guard.guard("http_streams.eof"):
        obs.eof()


def _ended_by(obs: _Observed, exc: BaseException) -> None:
    with _guard.guard("http_streams.end"):
        if is_cancel(exc):
            finish(obs.call, "cancel")
        else:
            finish(obs.call, "transport_error")


def _closed(obs: _Observed) -> None:
    """The response's byte stream is being closed: after the end (EOF, an error) nothing happens; before it, the
    caller stopped reading (httpx's own iteration closes only after our generator saw the end).

    One such close is not an abandoned answer: on Messages, after the ``message_delta`` that carries the final
    ``stop_reason``, nothing of the answer is left but the empty ``message_stop``, and clients that parse the SSE
    themselves stop there (litellm's sync streams do): the answer is judged by that stop reason."""
    with _guard.guard("http_streams.close"):
        tracker = obs.tracker
        if tracker.ended:
            return
        if obs.messages and tracker.finish_reasons and not tracker.saw_error():
            tracker.outcome_seen(names.COMPLETED, terminal=True)  # max_tokens & co. already ranked it incomplete
        finish(obs.call, "close")


class _Forward:
    """Forwards everything else to the wrapped body (httpx2 reads ``elapsed`` from it)."""

    _otelstream_body: Any = None
    _otelstream_obs: Any = None

    def __init__(self, body: Any, obs: _Observed) -> None:
        self._otelstream_body = body
        self._otelstream_obs = obs

    def __getattr__(self, name: str) -> Any:
        body = self._otelstream_body
        if body is None:
            raise AttributeError(name)
        return getattr(body, name)


class _SyncBody(_Forward):
    def __iter__(self) -> Iterator[bytes]:
        return _iter_sync(self._otelstream_body, self._otelstream_obs)

    def close(self) -> None:
        _closed(self._otelstream_obs)
        self._otelstream_body.close()


class _AsyncBody(_Forward):
    def __aiter__(self) -> AsyncIterator[bytes]:
        return _iter_async(self._otelstream_body, self._otelstream_obs)

    async def aclose(self) -> None:
        _closed(self._otelstream_obs)
        await self._otelstream_body.aclose()


_CLASSES: dict[str, tuple[type, type, type, type] | None] = {}


def _body_classes(module_name: str) -> tuple[type, type, type, type] | None:
    """Our body wrappers as real subclasses of this client library's byte-stream kinds (its ``isinstance`` checks
    decide how a response is read and closed), made once per library."""
    try:
        return _CLASSES[module_name]
    except KeyError:
        pass
    found: tuple[type, type, type, type] | None = None
    import sys

    module = sys.modules.get(module_name)
    sync_base = getattr(module, "SyncByteStream", None)
    async_base = getattr(module, "AsyncByteStream", None)
    if isinstance(sync_base, type) and isinstance(async_base, type):
        sync_cls = type("ObservedSyncBody", (_SyncBody, sync_base), {"__module__": __name__})
        async_cls = type("ObservedAsyncBody", (_AsyncBody, async_base), {"__module__": __name__})
        found = (sync_cls, async_cls, sync_base, async_base)
    _CLASSES[module_name] = found
    return found


def _read_already(obs: _Observed, response: Any) -> None:
    """The per-hop patch point is missing and ``send`` read the body itself: feed it at once."""
    content = getattr(response, "_content", None)
    if type(content) is not bytes:
        return
    obs.call.bound = True
    obs.tracker.request_id = header(response, names.REQUEST_ID_HEADERS)
    obs.inflate = None  # the client decoded what it read
    obs.chunk(content)
    obs.eof()


# --- the send -------------------------------------------------------------------------------------------------
def _send_done(obs: _Observed, response: Any) -> None:
    with _guard.guard("http_streams.send"):
        if obs.wrapped:
            return
        if not _status_ok(response):
            obs.tracker.request_id = header(response, names.REQUEST_ID_HEADERS)
            finish(obs.call, "http_error", str(getattr(response, "status_code", "")) or None)
            return
        _attach(obs, response)
        if not obs.wrapped:
            _read_already(obs, response)


def _send_failed(obs: _Observed, exc: BaseException) -> None:
    with _guard.guard("http_streams.send"):
        if obs.wrapped:
            finish(obs.call, "transport_error")  # send closes the response it could not finish
        elif is_cancel(exc):
            finish(obs.call, "cancel")
        else:
            finish(obs.call, "http_error")


def _send_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if CURRENT.get() is not None:
        return http_send(wrapped, instance, args, kwargs)  # an SDK adapter's call: it owns the stream
    if not STATE.enabled:
        return wrapped(*args, **kwargs)
    request = args[0] if args else kwargs.get("request")
    found = obs = None
    with _guard.guard("http_streams.begin"):
        found = _classify(request)
        if found is not None and found[1] is not None and found[1].get("stream") is True:
            obs = _begin(request, found[0], found[1], _patch.HTTP)
    if obs is not None:
        return _send_observed_sync(obs, wrapped, args, kwargs)
    if found is None or found[1] is not None:
        return wrapped(*args, **kwargs)
    t_send = RUNTIME.clock()  # the body did not say: the answer decides
    response = wrapped(*args, **kwargs)
    with _guard.guard("http_streams.late"):
        _late(request, found[0], response, t_send, _patch.HTTP)
    return response


def _send_observed_sync(obs: _Observed, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    listener = obs.call.listener
    active: object = None
    with _guard.guard("http_streams.activate"):
        active = listener.activate(obs.tracker.handle)
    token = _SENDING.set(obs)
    try:
        response = wrapped(*args, **kwargs)
    except BaseException as exc:
        _send_failed(obs, exc)
        raise
    finally:
        _SENDING.reset(token)
        with _guard.guard("http_streams.activate"):
            listener.deactivate(active)
    _send_done(obs, response)
    return response


def _send_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """As ``_send_sync``; the call (and span) starts here, where the caller calls ``send``, and the coroutine
    returned does the rest when awaited."""
    if CURRENT.get() is not None:
        return http_send(wrapped, instance, args, kwargs)
    if not STATE.enabled:
        return wrapped(*args, **kwargs)
    request = args[0] if args else kwargs.get("request")
    found = obs = None
    with _guard.guard("http_streams.begin"):
        found = _classify(request)
        if found is not None and found[1] is not None and found[1].get("stream") is True:
            obs = _begin(request, found[0], found[1], _patch.HTTP_ASYNC)
    if obs is not None:
        return _send_observed_async(obs, wrapped, args, kwargs)
    if found is None or found[1] is not None:
        return wrapped(*args, **kwargs)
    return _send_late_async(request, found[0], wrapped, args, kwargs)


async def _send_observed_async(obs: _Observed, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    listener = obs.call.listener
    active: object = None
    with _guard.guard("http_streams.activate"):
        active = listener.activate(obs.tracker.handle)
    token = _SENDING.set(obs)
    try:
        response = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _send_failed(obs, exc)
        raise
    finally:
        _SENDING.reset(token)
        with _guard.guard("http_streams.activate"):
            listener.deactivate(active)
    _send_done(obs, response)
    return response


async def _send_late_async(request: Any, surface: str, wrapped: Any, args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> Any:  # fmt: skip
    t_send = RUNTIME.clock()
    response = await wrapped(*args, **kwargs)
    with _guard.guard("http_streams.late"):
        _late(request, surface, response, t_send, _patch.HTTP_ASYNC)
    return response


def _late(request: Any, surface: str, response: Any, t_send: int, scope: str) -> None:
    """A stream whose request body did not say so (not in memory, too large, not JSON): observed from its
    ``text/event-stream`` answer on (the span starts now; the times still count from the send). A body the caller
    already read (``send(stream=False)``) is fed at once."""
    if not (_status_ok(response) and _is_sse(response)):
        return
    obs = _begin(request, surface, {}, scope)
    if obs is None:
        return
    tracker = obs.tracker
    tracker.t_request = tracker.t_last_ns = t_send
    _attach(obs, response)
    if not obs.wrapped:
        _read_already(obs, response)


def _hop_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    obs = _SENDING.get()
    if obs is None:
        return wrapped(*args, **kwargs)
    tracker = obs.tracker
    tracker.t_request = tracker.t_last_ns = RUNTIME.clock()  # this hop is the request sent last so far
    response = wrapped(*args, **kwargs)
    with _guard.guard("http_streams.hop"):
        _attach(obs, response)
    return response


async def _hop_async_run(obs: _Observed, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    tracker = obs.tracker
    tracker.t_request = tracker.t_last_ns = RUNTIME.clock()
    response = await wrapped(*args, **kwargs)
    with _guard.guard("http_streams.hop"):
        _attach(obs, response)
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
