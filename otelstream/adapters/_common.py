"""What every SSE adapter shares: the per-call state, the observing generators, the body-close hook, the watch on the
caller's object.

Lifecycle of one streamed call (both SDKs):

1. The SDK's request entry (``request`` / ``_request``) is wrapped: for a ``stream=True`` request to a supported
   surface a ``Call`` is made — tracker created, ``listener.stream_started`` (the span starts on the caller's
   thread, under whatever is current, e.g. Anthropic's own call span) — and kept in a context variable.
2. The per-attempt send (``_send_request`` / ``_attempt_request``) stamps ``t_request`` (the last attempt wins),
   counts attempts, makes our span current around the send, and puts the ``Call`` into
   ``request.extensions[KEY]`` so that a ``Stream`` built later from that response (``with_raw_response…parse()``)
   still finds it.
3. When the SDK builds its ``Stream`` the call is *bound* (the moment the stream is handed to the caller: the gap
   until its first pull is the caller's, consumer time): the response body is wrapped to see every close, a weak
   reference watches the caller's object (``watch``), and the SDK's own generators run, unchanged, observed from
   outside at two points, the same on every SDK release. The adapter's tap on ``_iter_events`` (the SSE decoder's
   iteration) stamps each frame as it is decoded (``tracker.t_frame``: the end of the wait, before the SDK parses
   the JSON and builds its model, which is the SDK's work, not the server's) and sees what the SDK drops (``[DONE]``,
   pings, the ``event:`` name); ``observe_sync`` / ``observe_async`` around ``__stream__`` stamp each pull and hand
   each item the SDK yields to ``tracker.event``, and see how the stream ends.
4. The first end wins (``tracker.end`` returns a report once): EOF, an exception (mapped per DESIGN §2), the
   caller's close (seen at the body, when the caller is *not* inside a pull — a close during a pull is the SDK's own
   ``finally: response.close()``), the collection of the caller's object (``gc``), or ``http_error`` when the request
   raised before a stream existed.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import dataclasses
import logging
import math
import os
import sys
import threading
import time
import types
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType, TracebackType
from typing import Any

import httpx2  # both SDKs depend on it; this module is imported only when one of them is

from otelstream import _guard, _process, attribution, names
from otelstream.adapters import _patch
from otelstream.adapters._patch import Wrapper
from otelstream.core.listener import StreamListener
from otelstream.core.report import Attributes, StreamReport, StreamStart
from otelstream.core.tracker import StreamTracker

logger = logging.getLogger("otelstream")

KEY = "_otelstream_call"  # request.extensions key, and the attribute of the SDK's Stream that names its call

Classifier = Callable[[BaseException], "tuple[str, str | None]"]


class Runtime:
    """Process-wide adapter configuration, set by ``instrument()`` (a listener of None means "off")."""

    __slots__ = ("baggage_keys", "clock", "listener", "lock", "stall_threshold_ns", "starting")

    def __init__(self) -> None:
        self.listener: StreamListener | None = None
        self.clock: Callable[[], int] = time.monotonic_ns
        self.stall_threshold_ns = 30_000_000_000
        self.baggage_keys: tuple[str, ...] = ()  # OTel baggage entries copied as application attributes
        # Streams between "took the listener" and "the listener registered them" (once per stream, never per
        # event): uninstall() waits for these, so a pipeline it retires has seen every stream started on it.
        self.lock = threading.Lock()
        self.starting = 0

    def take_listener(self) -> StreamListener | None:
        with self.lock:
            listener = self.listener
            if listener is not None:
                self.starting += 1
            return listener

    def started(self) -> None:
        with self.lock:
            self.starting -= 1

    def switch_off(self, timeout_s: float = 2.0) -> None:
        """No new stream takes the listener; wait (briefly) until those that took it have registered."""
        with self.lock:
            self.listener = None
        deadline = time.monotonic() + timeout_s
        while self.starting > 0 and time.monotonic() < deadline:
            time.sleep(0.0005)


RUNTIME = Runtime()

# the call being sent on this thread / task, between the request entry and the per-attempt send
CURRENT: contextvars.ContextVar[Call | None] = contextvars.ContextVar("otelstream_call", default=None)


def current_unbound() -> Call | None:
    """The call whose request is running on this thread/task, when its send was not stamped (the send patch was
    absent at that moment: a race with ``uninstrument()`` / ``instrument()``)."""
    call = CURRENT.get()
    return call if call is not None and not call.bound else None


# Call.observed: whether the call's events are being observed (by the generators below and the adapter's tap)
UNOBSERVED, OBSERVED = 0, 1


class Call:
    """One streamed call: its tracker, the listener it reports to, and the bookkeeping around the SDK's objects."""

    __slots__ = (
        "attempts", "bound", "generation", "listener", "observed", "sending", "sse_name", "tracker", "watcher"
    )  # fmt: skip

    def __init__(self, tracker: StreamTracker, listener: StreamListener) -> None:
        self.tracker = tracker
        self.listener = listener
        self.generation = _process.generation  # a forked child leaves the parent's calls to the parent
        self.attempts = 0
        self.sending = 0  # nesting depth of send wrappers (openai's auth retry re-enters _send_request)
        self.bound = False  # a Stream was built for it
        self.observed = UNOBSERVED  # OBSERVED: the SDK's generator is wrapped and its raw SSE tapped at _iter_events
        self.watcher: _Watch | None = None
        self.sse_name: str | None = None  # openai streams: the SSE `event:` of the item being parsed


def bind_to(obj: Any, call: Call) -> None:
    """Name the call on an SDK object. An attribute rather than ``obj.__dict__[KEY]``: in CPython 3.11+ merely reading
    an instance's ``__dict__`` turns its inline attribute values into a dict object (64 B per stream)."""
    setattr(obj, KEY, call)


def call_on(obj: Any) -> Call | None:
    """The call named on an SDK object by ``bind_to`` (carried into anthropic's ``copy(self)``), if any."""
    try:
        call = getattr(obj, KEY, None)
    except Exception:  # a stand-in whose __getattr__ raises something else
        return None
    return call if isinstance(call, Call) else None


def begin_call(
    start: StreamStart,
    *,
    scopes: tuple[str, ...],
    parent: object | None = None,
    listener: StreamListener | None = None,
    attributes: Attributes | None = None,
    **tracker_kwargs: Any,
) -> Call | None:
    """Create the tracker and start the span (caller's thread). None when instrumentation is off, or when a patch
    point these streams need (``scopes``) is missing from the SDK (``names.MEASURE_STREAM``): not observed at all.
    The application's attributes current here (``otelstream.attributes()``, the baggage keys named) are the
    stream's, unless ``attributes`` names them."""
    unobserved = _patch.NOTHING_UNOBSERVED
    for scope in scopes:  # one or two dict lookups per stream (the sets were computed at the SDK's import)
        found = _patch.PATCHER.unobserved(scope)
        if found:
            unobserved = unobserved | found
    if unobserved:
        if names.MEASURE_STREAM in unobserved:
            return None
        tracker_kwargs["unobserved"] = unobserved
    taken = listener is None
    if taken:
        listener = RUNTIME.take_listener()
        if listener is None:
            return None
    assert listener is not None
    try:
        attrs = attribution.capture(RUNTIME.baggage_keys) if attributes is None else attributes
        if attrs:  # only then a second StreamStart: most streams carry none
            start = dataclasses.replace(start, attributes=attrs)
        tracker = StreamTracker(
            start, clock=RUNTIME.clock, stall_threshold_ns=RUNTIME.stall_threshold_ns, **tracker_kwargs
        )
        call = Call(tracker, listener)
        tracker.handle = listener.stream_started(start, tracker, parent)
    finally:
        if taken:
            RUNTIME.started()
    return call


def finish(call: Call, how: str, error_type: str | None = None, exc: BaseException | None = None) -> None:
    """End the call's stream (first end wins) and hand the report to the listener. ``exc``, the exception that ended
    it: its status and type (a timeout, a reset) decide the report's error class. In a forked child a call the
    parent started is the parent's: whatever ends it here, nothing is reported."""
    if call.generation != _process.generation:
        return
    with _guard.guard("adapters.finish"):
        report = call.tracker.end(how, error_type, exc=exc)
        if report is None:
            return
        watcher = call.watcher
        if watcher is not None:
            call.watcher = None
            _WATCHED.pop(watcher, None)
        call.listener.stream_finished(report, call.tracker.handle)


class _Watch(weakref.ref):  # type: ignore[type-arg]
    """A weak reference to the object the caller holds; ``_WATCHED`` maps it to its call.

    A weakref callback fires only while the weakref itself is alive, and a cyclic collection runs the callbacks of
    the references that are *not* garbage before any finalizer: before the SDK's generators are closed and their
    ``finally`` closes the body (which would read as the caller's close). So the references live in ``_WATCHED``,
    outside any stream. Identity hash and equality: the watched object's own ``__hash__`` may be anything."""

    __slots__ = ()
    __hash__ = object.__hash__
    __eq__ = object.__eq__


_WATCHED: dict[_Watch, Call] = {}
_exiting = False


def _collected(watcher: _Watch) -> None:
    # the caller's stream object was collected without a close and before its end: abandoned (gc)
    call = _WATCHED.pop(watcher, None)
    if call is not None and not _exiting:
        finish(call, "gc")


# A forked child's copies of the parent's watches: dropping them here (their calls stay with the objects) means no
# collection in the child reports a parent's stream, nor keeps a reference per inherited stream.
os.register_at_fork(after_in_child=_WATCHED.clear)


@atexit.register
def _at_exit() -> None:
    # at interpreter exit the export pipeline is gone: do not report every open stream as gc
    global _exiting
    _exiting = True


def watch(call: Call, owner: object) -> None:
    """Watch the object the caller holds: its collection ends the stream as abandoned (gc). openai's Stream sits in a
    Stream<->generator cycle, so that happens only at a cyclic collection (research §1.4 #4); the export watchdog's
    idle fallback covers the rest."""
    old = call.watcher
    if old is not None:  # moves from a raw response wrapper to the Stream that .parse() built from it
        _WATCHED.pop(old, None)
    watcher = call.watcher = _Watch(owner, _collected)
    _WATCHED[watcher] = call


def body_closed(call: Call) -> None:
    """The response body is being closed. By the stream's own iteration ending, it is not the caller's: the SDK's
    ``finally: response.close()`` (openai ``_streaming.py:117-119``, anthropic ``_streaming.py:124-130``), or httpx2's
    raw iterator's ``finally`` (EOF, an error, a cancelled pull, the generators closed at shutdown), which run
    *before* the end reaches our generator: leave the end to the generator. Otherwise it is the caller (``close()``,
    a context exit, a helper's ``_response.close()``, also from another thread or task while a pull waits, which then
    fails): abandoned (close), unless a terminal event was already seen."""
    if call.tracker.ended or (call.observed != UNOBSERVED and _iteration_ending()):
        return
    finish(call, "close")


def _iteration_ending() -> bool:
    """Whether the close comes straight from a stream's own iteration (once per stream): an observing generator, the
    SDK's stream loop or httpx2's raw iterator calling the response's close, on this stack. A close from anywhere else
    is the caller's: from another thread or task while a pull waits, or from a signal handler that interrupted the
    pull (its frame sits on top of the iteration's)."""
    frame: types.FrameType | None = sys._getframe(3)  # the caller of our body's close
    while frame is not None and _forwards_close(frame):
        frame = frame.f_back
    return frame is not None and frame.f_code in _ITERATION_CODES


def _forwards_close(frame: types.FrameType) -> bool:
    """The response's close, or another body wrapper's (anthropic's tracing wraps the body too) passing it on."""
    code = frame.f_code
    if code in _RESPONSE_CLOSE_CODES:
        return True
    return code.co_name in ("close", "aclose") and isinstance(frame.f_locals.get("self"), _BYTE_STREAMS)


def bind_response(call: Call, response: Any) -> None:
    """Wrap ``response.stream`` (an ``httpx2`` or ``httpx`` response) to see every close of the body, by any path
    (research §1.4 #3: the openai helpers close ``_response`` directly, so patching ``Stream.close`` would miss
    them)."""
    with _guard.guard("adapters.bind_response"):
        tracker = call.tracker
        if not tracker.t_handed:  # the stream (or the raw response it is parsed from) reaches the caller now
            tracker.t_handed = tracker.clock()
        body = response.stream
        if isinstance(body, _BodyBase):
            return
        lib = type(response).__module__.partition(".")[0]
        kinds = _BODY_KINDS.get(lib) or (_adopt_httpx() if lib == "httpx" else None)
        if kinds is None:
            return  # another client library: no close hook; the watch and the idle fallback cover it
        sync_kind, async_kind, body_sync, body_async, body_both = kinds
        is_sync = isinstance(body, sync_kind)
        is_async = isinstance(body, async_kind)
        # keep the byte-stream kind: httpx2.Response.close/aclose check it (httpx2/_models.py:976, :1080; httpx's
        # the same), and so does anthropic's tracing wrapper (anthropic/_tracing.py:628-636)
        if is_sync and is_async:
            response.stream = body_both(body, call)
        elif is_sync:
            response.stream = body_sync(body, call)
        elif is_async:
            response.stream = body_async(body, call)


class _BodyBase:
    """Forwards everything else to the wrapped body (``elapsed``, anthropic's ``stream_observer``)."""

    # class defaults: __getattr__ reads them without materializing the instance __dict__ (64 B per stream)
    _otelstream_body: Any = None
    _otelstream_call: Any = None
    stream_observer: Any  # set on the instance by the first lookup (no class default: that must reach __getattr__)

    def __init__(self, body: Any, call: Call) -> None:
        self._otelstream_body = body
        self._otelstream_call = call

    def __getattr__(self, name: str) -> Any:
        body = self._otelstream_body
        if body is None:
            raise AttributeError(name)
        if name == "stream_observer":
            # anthropic reads it on every item (_streaming.py:53-56): answer from the instance after the first
            # time, a miss included (anthropic's getattr default is None), instead of raising on every event
            value = getattr(body, name, None)
            self.stream_observer = value
            return value
        return getattr(body, name)


class _SyncBody(_BodyBase):
    def __iter__(self) -> Iterator[bytes]:
        return iter(self._otelstream_body)  # the inner iterator itself: no per-chunk cost

    def close(self) -> None:
        body_closed(self._otelstream_call)
        self._otelstream_body.close()


class _AsyncBody(_BodyBase):
    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._otelstream_body.__aiter__()  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        body_closed(self._otelstream_call)
        await self._otelstream_body.aclose()


class _BothBody(_SyncBody):
    __aiter__ = _AsyncBody.__aiter__
    aclose = _AsyncBody.aclose


BodyKinds = tuple[type, type, type, type, type]  # the library's sync and async kinds, our sync, async and both bodies


def _body_kinds(lib: ModuleType) -> BodyKinds:
    """Our body wrappers as real subclasses of one client library's byte-stream kinds, so that its and anthropic's
    isinstance checks hold."""
    sync_kind, async_kind = lib.SyncByteStream, lib.AsyncByteStream
    name = lib.__name__
    return (
        sync_kind,
        async_kind,
        type(f"{name}Body", (_SyncBody, sync_kind), {"__module__": __name__}),
        type(f"{name}AsyncBody", (_AsyncBody, async_kind), {"__module__": __name__}),
        type(f"{name}BothBody", (_BothBody, sync_kind, async_kind), {"__module__": __name__}),
    )


# per client library (its top-level package name): httpx2, both SDKs' client; httpx, openai 2.x's, adopted when the
# first response of it is bound (it need not be installed)
_BODY_KINDS: dict[str, BodyKinds] = {"httpx2": _body_kinds(httpx2)}
_BYTE_STREAMS: tuple[type, ...] = (httpx2.SyncByteStream, httpx2.AsyncByteStream)
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (httpx2.TransportError, httpx2.StreamError)


def _adopt_httpx() -> BodyKinds | None:
    """The legacy ``httpx`` (openai 2.x reads its streams with it), met in a response or an exception: the same body
    hooks, iteration codes and transport errors for its classes, made once per process."""
    httpx = sys.modules.get("httpx")
    if httpx is None:
        return None
    global _BYTE_STREAMS, _TRANSPORT_ERRORS
    with _ADOPT_LOCK:
        kinds = _BODY_KINDS.get("httpx")
        if kinds is None:
            kinds = _body_kinds(httpx)
            _ITERATION_CODES.update((httpx.Response.iter_raw.__code__, httpx.Response.aiter_raw.__code__))
            _RESPONSE_CLOSE_CODES.update((httpx.Response.close.__code__, httpx.Response.aclose.__code__))
            _BYTE_STREAMS = (*_BYTE_STREAMS, httpx.SyncByteStream, httpx.AsyncByteStream)
            _TRANSPORT_ERRORS = (*_TRANSPORT_ERRORS, httpx.TransportError, httpx.StreamError)
            _BODY_KINDS["httpx"] = kinds
    return kinds


_ADOPT_LOCK = threading.Lock()


# --- exception mapping (DESIGN §2) -------------------------------------------------------------------------
def is_cancel(exc: BaseException) -> bool:
    """The caller's task or program was cancelled or stopped: asyncio's cancellation, trio's (anyio on trio raises
    it too; checked by name, trio is not a dependency), Ctrl-C, ``sys.exit()``."""
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
        return True
    cls = type(exc)
    return cls.__name__ == "Cancelled" and cls.__module__.startswith("trio")


def classify_common(exc: BaseException) -> tuple[str, str | None] | None:
    """The SDK-independent part: cancellation, transport and decode errors. None when undecided."""
    if is_cancel(exc):
        return "cancel", None
    if isinstance(exc, GeneratorExit):
        return "gc", None
    if isinstance(exc, ValueError):  # json.JSONDecodeError and friends: undecodable data (error class protocol)
        return "transport_error", None
    if isinstance(exc, _TRANSPORT_ERRORS):
        return "transport_error", None
    if type(exc).__module__.startswith("httpx.") and "httpx" not in _BODY_KINDS and _adopt_httpx() is not None:
        return classify_common(exc)
    return None


# --- the observing generators (the hot path) ----------------------------------------------------------------
def observe_sync(gen: Iterator[Any], call: Call, classify: Classifier) -> Iterator[Any]:
    """Around the SDK's ``__stream__``: each pull begins a wait (``t_pull``), each item the SDK yields is one event
    (timed at its frame's decoding when the adapter's tap saw it), and how the SDK's generator ends is how the stream
    ended (``ending``)."""
    tracker = call.tracker
    clock = tracker.clock
    with ending(call, classify):
        tracker.first_pull(clock())
        for item in gen:
            try:
                tracker.event(item, call.sse_name)
            except Exception as exc:  # our bug: never changes what the caller gets (re-raised in strict mode)
                _guard.report("adapters.event", exc)
            yield item
            tracker.t_pull = clock()


async def observe_async(agen: AsyncIterator[Any], call: Call, classify: Classifier) -> AsyncIterator[Any]:
    tracker = call.tracker
    clock = tracker.clock
    with ending(call, classify):
        tracker.first_pull(clock())
        async for item in agen:
            try:
                tracker.event(item, call.sse_name)
            except Exception as exc:
                _guard.report("adapters.event", exc)
            yield item
            tracker.t_pull = clock()


# where a stream's own iteration closes its body: our generators, the SDKs' stream loops and drains (added by
# ``register_iteration_code`` when their patch is applied) and httpx2's raw iterators (a cancelled pull closes the
# body there, while the throw that reaches it leaves the generators around it off the frame chain)
_ITERATION_CODES = {
    observe_sync.__code__,
    observe_async.__code__,
    httpx2.Response.iter_raw.__code__,
    httpx2.Response.aiter_raw.__code__,
}
_RESPONSE_CLOSE_CODES = {httpx2.Response.close.__code__, httpx2.Response.aclose.__code__}


def register_iteration_code(func: Any) -> None:
    """A ``__stream__`` patch's ``prepare``: the SDK's loop closes the body in its ``finally``, openai's async loop
    also through its drain after ``[DONE]`` (HTTP/1.1): such a close is the iteration ending, not the caller's
    (``body_closed``). The SDK's own function objects, looked up when the patch is applied."""
    if type(func) is not types.FunctionType:
        return
    _ITERATION_CODES.add(func.__code__)
    drain = func.__globals__.get("drain_response_async")
    if type(drain) is types.FunctionType:
        _ITERATION_CODES.add(drain.__code__)


class ending:
    """Around the body of an observing generator: how the body ends is how the stream ended. ``GeneratorExit``: the
    generator was closed, which happens only when the caller's stream is collected (``Stream.close()`` closes the
    body, not the generator: research §1.4 #2; a recorded close already ended the tracker), so ``gc``; any other
    exception, classified (``end_with``); running out, ``eof``. Never swallows anything."""

    __slots__ = ("call", "classify")

    def __init__(self, call: Call, classify: Classifier) -> None:
        self.call = call
        self.classify = classify

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is None:
            finish(self.call, "eof")
        elif isinstance(exc, GeneratorExit):
            finish(self.call, "gc")
        else:
            end_with(self.call, exc, self.classify)


def end_with(call: Call, exc: BaseException, classify: Classifier) -> None:
    how: str = "transport_error"
    error_type: str | None = None
    with _guard.guard("adapters.classify"):
        how, error_type = classify(exc)
    finish(call, how, error_type, exc)


def error_type_of(exc: BaseException) -> str | None:
    """The provider's error code/type from an SDK exception (``code``, then ``type``), if it has one."""
    for attr in ("code", "type"):
        value = exc.__dict__.get(attr) if hasattr(exc, "__dict__") else None
        if isinstance(value, str) and value:
            return value[:64]
        if type(value) is int:  # releases before openai 3.14 keep a numeric ``code`` as the int the server sent
            return str(value)
    return None


def http_send(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``httpx2.Client.send`` / ``AsyncClient.send``: while an SDK send path of one of our calls runs (``sending``),
    the request leaves here, after the SDK prepared it (anthropic signs or refreshes a token in ``_prepare_request``,
    inside ``_attempt_request``): ``t_request`` is this moment, the last such send winning. For the async client the
    coroutine is created here, right where the SDK awaits it. Clients of any other kind keep the SDK hook's time."""
    call = CURRENT.get()
    if call is not None and call.sending and not call.bound:
        with _guard.guard("adapters.http_send"):
            tracker = call.tracker
            tracker.t_request = tracker.t_last_ns = RUNTIME.clock()
    return wrapped(*args, **kwargs)


# The clients' send is patched by http_streams, whose wrapper hands an SDK adapter's calls to http_send. Without that
# patch point t_request is the SDK send hook's time, which for anthropic includes preparing (signing, a Vertex token
# refresh) the request.
T_REQUEST_MEASURES = (names.MEASURE_TIME_TO_FIRST_EVENT, names.MEASURE_TIME_TO_FIRST_DELTA, names.MEASURE_DURATION)
# What an SDK's patch points alone observe (names.MEASURE_*): unknown for their streams when a release lacks them.
# The send path (t_request would otherwise be the request entry: before retries and their back-off):
SEND_MEASURES = (*T_REQUEST_MEASURES, names.MEASURE_RETRIES)
# The request entry (t_request would be the building of the Stream, after the headers; a request failing before a
# stream exists would make no call):
REQUEST_MEASURES = (*SEND_MEASURES, names.MEASURE_HTTP_ERRORS)
# A lifecycle point: without it no end could be attributed, so its streams are not observed rather than misreported
LIFECYCLE_MEASURES = (names.MEASURE_STREAM,)
SEND_SCOPES_SYNC = (_patch.OPENAI, _patch.ANTHROPIC)
SEND_SCOPES_ASYNC = (_patch.OPENAI_ASYNC, _patch.ANTHROPIC_ASYNC)


Begin = Callable[[Any, "tuple[Any, ...]", "dict[str, Any]", "tuple[str, ...]"], "Call | None"]
After = Callable[["Call", Any], None]


def request_wrappers(begin: Begin, after: After, where: str, scopes: tuple[str, str]) -> tuple[Wrapper, Wrapper]:
    """The sync and async wrappers of an SDK's request entry: begin the call (span at the send), keep it in
    ``CURRENT`` while the SDK sends (a non-stream request made inside ours, a token refresh say, is not one of our
    attempts), report ``http_error`` when no stream comes of it, and hand the result to ``after``. ``scopes``: the
    sync and the async streams' patch scopes (``begin_call``)."""
    sync_scopes, async_scopes = (scopes[0],), (scopes[1],)

    def sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = None
        with _guard.guard(where):
            call = begin(instance, args, kwargs, sync_scopes)
        token = CURRENT.set(call)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            if call is not None:
                with _guard.guard(where):
                    fail_unbound(call, exc)
            raise
        finally:
            CURRENT.reset(token)
        if call is not None:
            after(call, result)
        return result

    async def async_(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = None
        with _guard.guard(where):
            call = begin(instance, args, kwargs, async_scopes)
        token = CURRENT.set(call)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            if call is not None:
                with _guard.guard(where):
                    fail_unbound(call, exc)
            raise
        finally:
            CURRENT.reset(token)
        if call is not None:
            after(call, result)
        return result

    return sync, async_


def observed_call(instance: Any) -> Call | None:
    """The call of an observed stream (for the adapter's ``_iter_events`` tap); None when it is not observed."""
    call = call_on(instance)
    return call if call is not None and call.observed == OBSERVED else None


def stream_wrapper(take: Callable[[Any], Call | None], classify: Classifier, where: str) -> Wrapper:
    """The wrapper of ``Stream.__stream__`` / ``AsyncStream.__stream__`` (the one choke point every SSE surface and
    helper iterates): when ``take(stream)`` names a call, the SDK's generator wrapped by ``observe_sync`` /
    ``observe_async``."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = None
        with _guard.guard(where):
            call = take(instance)
        if call is None:
            return wrapped(*args, **kwargs)
        call.observed = OBSERVED
        gen = wrapped(*args, **kwargs)
        return observe_async(gen, call, classify) if hasattr(gen, "__anext__") else observe_sync(gen, call, classify)

    return wrapper


def fail_unbound(call: Call, exc: BaseException) -> None:
    """The request raised before any stream existed (non-2xx, connection failure before headers): http_error."""
    if call.bound:
        return
    error_type = error_type_of(exc)
    if error_type is None:
        status = getattr(exc, "status_code", None)
        if isinstance(status, int):
            error_type = str(status)
    if is_cancel(exc):
        finish(call, "cancel")
    else:
        # a non-2xx answer still names the request (APIStatusError.response): keep the id for the support ticket
        response = getattr(exc, "response", None)
        if response is not None and call.tracker.request_id is None:
            call.tracker.request_id = header(response, names.REQUEST_ID_HEADERS)
        finish(call, "http_error", error_type, exc)


def request_params(body: object) -> dict[str, Any]:
    """The request parameters a span records (DESIGN §4), as the call passed them: StreamStart keyword arguments.
    Once per stream, from the request body (``max_output_tokens`` on Responses, ``max_completion_tokens`` or
    ``max_tokens`` on chat, ``max_tokens`` on completions and Anthropic Messages)."""
    if not isinstance(body, dict):
        return {}
    out: dict[str, Any] = {}
    for key in ("max_output_tokens", "max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if type(value) is int:
            out["request_max_tokens"] = value
            break
    for key, field in (("temperature", "request_temperature"), ("top_p", "request_top_p")):
        number = body.get(key)
        if (type(number) is float or type(number) is int) and math.isfinite(number):
            out[field] = float(number)
    n = body.get("n")
    if type(n) is int:
        out["request_choice_count"] = n
    return out


def report_of(obj: object) -> StreamReport | None:
    """``otelstream.report_of``: the report of the stream behind an SDK stream object (a ``Stream``, or a helper's
    stream that wraps one: ``ResponseStream``, ``ChatCompletionStream``, ``MessageStream``) once it has ended."""
    call = call_on(obj)
    if call is None:
        try:
            call = call_on(getattr(obj, "_raw_stream", None))
        except Exception:  # a stand-in whose __getattr__ raises something else
            return None
    if call is None:
        return None
    report: StreamReport | None = call.tracker.report
    return report


def server_of(base_url: Any) -> tuple[str | None, int | None]:
    """server.address / server.port from the client's base URL (an httpx2.URL)."""
    try:
        host = base_url.host or None
        port = base_url.port
        if port is None:
            port = 443 if base_url.scheme == "https" else 80 if base_url.scheme == "http" else None
        return host, port
    except Exception:
        return None, None


def path_of(url: object) -> str:
    """The path of an SDK options URL ('/chat/completions', '/v1/messages?beta=true', or an absolute URL)."""
    if not isinstance(url, str):
        return ""
    path = url.split("?", 1)[0]
    if "://" in path:
        path = "/" + path.split("://", 1)[1].partition("/")[2]
    return path.rstrip("/")


def request_of(response: Any) -> Any:
    try:
        return response.request
    except Exception:  # httpx2 raises RuntimeError when a response has no request
        return None


def name_on_request(call: Call, response: Any) -> None:
    """Name the call on the request a raw response answers (``with_raw_response``), so that the Stream its
    ``.parse()`` builds later finds this call; the send hooks do this too, but one of them may be missing."""
    ext = getattr(request_of(response), "extensions", None)
    if type(ext) is dict and KEY not in ext:
        ext[KEY] = call


def call_of_response(response: Any) -> Call | None:
    request = request_of(response)
    ext = getattr(request, "extensions", None)
    if type(ext) is dict:
        call = ext.get(KEY)
        return call if isinstance(call, Call) else None
    return None


def header(response: Any, keys: tuple[str, ...]) -> str | None:
    try:
        headers = response.headers
        for name in keys:
            value = headers.get(name)
            if value:
                return str(value)[:128]
    except Exception:
        return None
    return None
