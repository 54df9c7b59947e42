"""The one interface between the adapters (which see streams) and the sinks (which export them).

Adapters call a ``StreamListener``; ``instrument()`` wires in the export pipeline's implementation. Adapters never
import sinks, and sinks never see SDK objects. Pure module (a Protocol only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from otelstream.core.report import StreamReport, StreamStart
    from otelstream.core.tracker import StreamTracker


class Ended(Protocol):
    """A stream that has ended (a ``StreamTracker`` once ``conclude`` returned True): its report, assembled on the
    first call, by whichever thread asks first."""

    def final_report(self) -> StreamReport | None: ...


class StreamListener(Protocol):
    def stream_started(self, start: StreamStart, tracker: StreamTracker, parent: object | None = None) -> object:
        """At the send, on the caller's thread: start the span (the one export step on that thread), register
        the tracker for the live gauges and the stall watchdog. Returns an opaque handle kept on the tracker.
        ``parent`` is a connection handle (WebSocket) or None for the caller's current context."""
        ...

    def activate(self, handle: object) -> object:
        """Make ``handle``'s span current around the send (so the HTTP client span nests under it)."""
        ...

    def deactivate(self, token: object) -> None: ...

    def stream_finished(self, ended: Ended, handle: object) -> None:
        """Once per stream, on whatever thread ended it (caller, finalizer, watchdog): enqueue only, never block.
        The report is not assembled yet: ``ended.final_report()`` does it, off the caller's thread where it can."""
        ...

    def connection_opened(self, server_address: str | None, server_port: int | None) -> object:
        """A WebSocket connection opened: start the ``otelstream.websocket`` span; returns its handle."""
        ...

    def connection_event(self, handle: object, name: str, attributes: dict[str, str | int | float | bool]) -> None:
        """Something happened on a connection (a reconnect): one span event."""
        ...

    def connection_closed(self, handle: object, error_type: str | None) -> None: ...
