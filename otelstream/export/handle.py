"""Per-stream state the export side keeps between the send and the report (the opaque listener handle)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Protocol

from opentelemetry.trace import Span

from otelstream import _process
from otelstream.core.report import StreamReport, StreamStart
from otelstream.names import EndReason


class Tracked(Protocol):
    """What the export side reads from a stream's tracker (``core.tracker.StreamTracker``): the watchdog's times and
    the idle fallback's end."""

    ended: bool
    t_pull: int
    t_last_ns: int
    t_request: int
    clock: Callable[[], int]

    def last_activity_ns(self) -> int: ...

    def conclude(self, how: EndReason) -> bool: ...

    def final_report(self) -> StreamReport | None: ...


class StreamHandle:
    """Returned by ``stream_started`` and kept on the tracker by the adapter.

    It holds the tracker weakly where the tracker allows it: the watchdog's registry holds handles, and must not be
    what keeps a dropped stream's state alive. It never references the SDK stream object.
    """

    __slots__ = (
        "_live_stalls",
        "ended",
        "events_left",
        "finished",
        "generation",
        "internal",
        "labels",
        "mono_anchor_ns",
        "peer_scope",
        "span",
        "stall_mark",
        "start",
        "tracker_ref",
        "wall_anchor_ns",
    )

    def __init__(
        self,
        span: Span,
        start: StreamStart,
        tracker: Tracked,
        labels: tuple[str, ...],
        wall_anchor_ns: int,
        mono_anchor_ns: int,
        internal: bool,
        max_events: int,
        peer_scope: str | None = None,
    ) -> None:
        self.span = span
        self.start = start
        try:
            self.tracker_ref: Callable[[], Tracked | None] | None = weakref.ref(tracker)
        except TypeError:
            # A slotted tracker without __weakref__: hold it strongly. It references no SDK object, so the
            # stream's own finalizer still runs and retires it; the idle fallback covers reference cycles.
            self.tracker_ref = _Strong(tracker)
        # (*common label values, surface), export.labels: resolved once at the send so the live gauges, the
        # counters and a drop all use the same label values even if a cap fills up in between.
        self.labels = labels
        self.wall_anchor_ns = wall_anchor_ns
        self.mono_anchor_ns = mono_anchor_ns
        self.internal = internal
        # the instrumentation scope of the GenAI peer's CLIENT span it nests under ("" unnamed), None without one
        self.peer_scope = peer_scope
        self.events_left = max_events
        self.finished = False  # stream_finished was called (enqueue at most once)
        self.ended = False  # the span was ended (exactly once, on the dispatcher thread)
        self.stall_mark = 0  # t_pull of the wait already reported live as a stall
        self._live_stalls: list[int] | None = None  # see live_stalls: made on first use
        self.generation = _process.generation

    @property
    def live_stalls(self) -> list[int]:
        """The t_pull values (ns) of the stalls already added as span events. Made on first use (a stall, or the
        report's stalls at the end): an empty list per open stream was 56 bytes of the budgeted memory per open
        stream."""
        live = self._live_stalls
        if live is None:
            live = self._live_stalls = []
        return live

    @property
    def inherited(self) -> bool:
        """Started before an ``os.fork()`` this process is the child of: the parent's stream, not reported here."""
        return self.generation != _process.generation

    def wall_ns(self, mono_ns: int) -> int:
        """Monotonic tracker time → wall-clock ns, via the anchor pair taken when the span started."""
        return self.wall_anchor_ns + (mono_ns - self.mono_anchor_ns)


class _Strong:
    __slots__ = ("obj",)

    def __init__(self, obj: Tracked) -> None:
        self.obj = obj

    def __call__(self) -> Tracked:
        return self.obj


class ConnectionHandle:
    """A WebSocket connection span; per-response spans name it as their parent."""

    __slots__ = ("__weakref__", "closed", "generation", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.closed = False
        self.generation = _process.generation

    @property
    def inherited(self) -> bool:
        """Opened before an ``os.fork()`` this process is the child of: the parent's connection."""
        return self.generation != _process.generation
