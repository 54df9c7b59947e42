"""The doctor's private listener, and how its streams reach it through the real patches and nowhere else.

The adapters hand every stream to one process-wide listener (``adapters.calls.RUNTIME.listener``). While the doctor
runs, that listener is a ``DoctorListener``: a stream started in the doctor's context (a context variable naming its
cell, set on the doctor's thread and copied into its asyncio tasks) is recorded here; every other stream goes to the
listener that was there before (the application's export pipeline), unchanged. The doctor's streams therefore never
start a span, never enter the live gauges and never reach a metric sink. Where nothing was instrumented the patches
are applied for the doctor's run and removed after it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any, Final

from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.stream_listener import Ended, StreamListener

# the cell whose stream is being opened in this context (None: not the doctor's)
CELL: contextvars.ContextVar[str | None] = contextvars.ContextVar("otelstream_doctor_cell", default=None)


class _Handle:
    """A doctor stream's handle: which cell it belongs to."""

    __slots__ = ("cell",)

    def __init__(self, cell: str) -> None:
        self.cell = cell


_IGNORED: Final = object()  # another thread's stream while nothing else listens: not reported anywhere
_NO_TOKEN: Final = object()


class DoctorListener:
    """Implements ``StreamListener``: the doctor's streams recorded by cell, the others passed to ``app``."""

    def __init__(self) -> None:
        self.app: StreamListener | None = None
        self._lock = threading.RLock()  # re-entrant: a collection inside it may end (and record) a dropped stream
        self.reports: dict[str, list[StreamReport]] = {}

    def reports_of(self, cell: str) -> list[StreamReport]:
        with self._lock:
            return list(self.reports.get(cell, ()))

    def stream_started(self, start: StreamStart, tracker: Any, parent: object | None = None) -> object:
        cell = CELL.get()
        if cell is not None:
            return _Handle(cell)
        app = self.app
        return _IGNORED if app is None else app.stream_started(start, tracker, parent)

    def activate(self, handle: object) -> object:
        if isinstance(handle, _Handle) or handle is _IGNORED or self.app is None:
            return _NO_TOKEN  # no span of ours to make current
        return self.app.activate(handle)

    def deactivate(self, token: object) -> None:
        if token is not _NO_TOKEN and self.app is not None:
            self.app.deactivate(token)

    def stream_finished(self, ended: Ended, handle: object) -> None:
        if isinstance(handle, _Handle):
            report = ended.final_report()  # the doctor reads it at once: assembled here (its thread, not a caller's)
            if report is not None:
                with self._lock:
                    self.reports.setdefault(handle.cell, []).append(report)
        elif handle is not _IGNORED and self.app is not None:
            self.app.stream_finished(ended, handle)

    def connection_opened(self, server_address: str | None, server_port: int | None) -> object:
        if CELL.get() is not None or self.app is None:
            return _IGNORED
        return self.app.connection_opened(server_address, server_port)

    def connection_event(self, handle: object, name: str, attributes: dict[str, str | int | float | bool]) -> None:
        if handle is not _IGNORED and self.app is not None:
            self.app.connection_event(handle, name, attributes)

    def connection_closed(self, handle: object, error_type: str | None) -> None:
        if handle is not _IGNORED and self.app is not None:
            self.app.connection_closed(handle, error_type)


class Routing:
    """Whether the doctor's listener is still the one the adapters use (``uninstrument()`` may have switched it
    off meanwhile: then the results do not describe the instrumented process and are discarded)."""

    def __init__(self, listener: DoctorListener) -> None:
        self.listener = listener

    @property
    def intact(self) -> bool:
        from otelstream.adapters._patch import PATCHER
        from otelstream.adapters.calls import RUNTIME

        return PATCHER.active and RUNTIME.listener is self.listener


@contextlib.contextmanager
def routed(listener: DoctorListener) -> Iterator[Routing]:
    """Observe with the real patches, reporting the doctor's streams to ``listener`` only, for the ``with`` block.

    Instrumented already: the application's listener stays behind ``listener`` for every other stream. Not
    instrumented: the patches are applied now and removed after (unless someone instrumented meanwhile)."""
    from otelstream import adapters, instrumentation
    from otelstream.adapters._patch import PATCHER
    from otelstream.adapters.calls import RUNTIME

    # instrument() / uninstrument()'s lock around "instrumented?" and the install or removal that follows: else an
    # instrument() between the two would find its patches removed (or its listener replaced) by ours
    with instrumentation._lock:
        with RUNTIME.lock:
            owned = not PATCHER.active
            if not owned:
                listener.app = RUNTIME.listener
                RUNTIME.listener = listener
        if owned:
            adapters.install(listener)
    try:
        yield Routing(listener)
    finally:
        with instrumentation._lock:
            with RUNTIME.lock:
                ours = RUNTIME.listener is listener
                if ours and not owned:
                    RUNTIME.listener = listener.app  # streams started meanwhile keep passing through us to it
            if ours and owned:
                adapters.uninstall()
