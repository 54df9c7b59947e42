"""One streamed call: its state (``Call``), the process-wide adapter configuration (``Runtime``), its beginning
(``begin_call``), its one end (``finish``) and the watch on the object the caller holds (its collection is one of
those ends).

Lifecycle of one streamed call (both SDKs):

1. The SDK's request entry (``request`` / ``_request``) is wrapped (``request.request_wrappers``): for a
   ``stream=True`` request to a supported surface a ``Call`` is made — tracker created, ``listener.stream_started``
   (the span starts on the caller's thread, under whatever is current, e.g. Anthropic's own call span) — and kept in
   a context variable (``CURRENT``).
2. The per-attempt send (``_send_request`` / ``_attempt_request``) stamps ``t_request`` (the last attempt wins),
   counts attempts, makes our span current around the send, and puts the ``Call`` into
   ``request.extensions[KEY]`` so that a ``Stream`` built later from that response (``with_raw_response…parse()``)
   still finds it.
3. When the SDK builds its ``Stream`` the call is *bound* (the moment the stream is handed to the caller: the gap
   until its first pull is the caller's, consumer time): the response body is wrapped to see its reads and closes
   (``body_readers.bind_response``), a weak reference watches the caller's object (``watch``), and the SDK's own
   generators run, unchanged, observed from outside at two points, the same on every SDK release. The adapter's tap on
   ``_iter_events`` (the SSE decoder's iteration) stamps each frame as it is decoded (``tracker.t_frame``: the end of
   the wait, before the SDK parses the JSON and builds its model, which is the SDK's work, not the server's) and sees
   what the SDK drops (``[DONE]``, pings, the ``event:`` name); ``observing.observe_sync`` / ``observe_async`` around
   ``__stream__`` stamp each pull and hand each item the SDK yields to ``tracker.event``, and see how the stream ends.
4. The first end wins (``tracker.end`` returns a report once): EOF, an exception (mapped per docs/telemetry.md:
   ``exceptions.classify_common`` and the SDK adapter's ``classify``), the caller's close (the SDK stream's
   ``close()``, or a close of the body while no pull runs: ``close_ownership``), the
   collection of the caller's object (``gc``), or ``http_error`` when the request raised before a stream existed
   (``request.fail_unbound``).
"""

from __future__ import annotations

import atexit
import contextvars
import dataclasses
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from otelstream import _guard, _process, attribution, names
from otelstream.adapters import _patch
from otelstream.core.listener import StreamListener
from otelstream.core.report import Attributes, StreamReport, StreamStart
from otelstream.core.tracker import StreamTracker
from otelstream.names import BodyState, CallState, EndReason

KEY = "_otelstream_call"  # request.extensions key, and the attribute of the SDK's Stream that names its call


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


class Call:
    """One streamed call: its tracker, the listener it reports to, and the bookkeeping around the SDK's objects."""

    __slots__ = (
        "attempts", "body", "bound", "close_asked", "generation", "listener", "observed", "sending", "sse", "state",
        "tracker", "watcher",
    )  # fmt: skip

    def __init__(self, tracker: StreamTracker, listener: StreamListener) -> None:
        self.tracker = tracker
        self.listener = listener
        self.generation = _process.generation  # a forked child leaves the parent's calls to the parent
        self.attempts = 0
        self.sending = 0  # nesting depth of send wrappers (openai's auth retry re-enters _send_request)
        self.bound = False  # a Stream was built for it
        self.observed = False  # the SDK's generator is wrapped and its raw SSE tapped at _iter_events
        self.watcher: _Watch | None = None
        self.sse: Any = None  # the SDK's latest SSE frame (observing.tap_sync / tap_async)
        # the facts close_ownership decides from: the caller's side (written by the observing generator), the body's
        # (written by our body wrapper), and a close asked through the SDK stream's close() while a pull ran
        self.state = CallState.UNPULLED
        self.body = BodyState.OPEN
        self.close_asked = False


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


def finish(call: Call, how: EndReason | str, error_type: str | None = None, exc: BaseException | None = None) -> None:
    """End the call's stream (first end wins) and hand the report to the listener. ``exc``, the exception that ended
    it: its status and type (a timeout, a reset) decide the report's error class. In a forked child a call the
    parent started is the parent's: whatever ends it here, nothing is reported."""
    if call.generation != _process.generation:
        return
    try:
        tracker = call.tracker
        if not tracker.conclude(how, error_type, exc=exc):
            return
        watcher = call.watcher
        if watcher is not None:
            call.watcher = None
            _WATCHED.pop(watcher, None)
        # the report is assembled by the listener's side (the export thread), or by report_of if asked first
        call.listener.stream_finished(tracker, tracker.handle)
    except Exception as err:
        _guard.report("adapters.finish", err)


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
        finish(call, EndReason.GC)


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


def observed_call(instance: Any) -> Call | None:
    """The call of an observed stream (for the adapter's ``_iter_events`` tap); None when it is not observed."""
    call = call_on(instance)
    return call if call is not None and call.observed else None


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
    # ended but not yet assembled by the export thread: assembled now, here, once (None while the stream is open)
    return call.tracker.final_report()
