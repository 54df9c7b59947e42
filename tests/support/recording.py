"""A StreamListener that records what the adapters hand over (test helper)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.stream_listener import Ended


@dataclass
class Started:
    start: StreamStart
    tracker: Any
    parent: object | None
    handle: int


@dataclass
class RecordingListener:
    started: list[Started] = field(default_factory=list)
    reports: list[StreamReport] = field(default_factory=list)
    finished_handles: list[object] = field(default_factory=list)
    activations: int = 0
    active: int = 0
    connections: list[tuple[str, Any]] = field(default_factory=list)
    fail: bool = False  # every hook raises (failure-isolation tests)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _maybe_fail(self) -> None:
        if self.fail:
            raise RuntimeError("listener hook failure (injected)")

    def stream_started(self, start: StreamStart, tracker: Any, parent: object | None = None) -> object:
        self._maybe_fail()
        with self._lock:
            handle = len(self.started) + 1
            self.started.append(Started(start, tracker, parent, handle))
        return handle

    def activate(self, handle: object) -> object:
        self._maybe_fail()
        self.activations += 1
        self.active += 1
        return handle

    def deactivate(self, token: object) -> None:
        self.active -= 1
        self._maybe_fail()

    def stream_finished(self, ended: Ended, handle: object) -> None:
        report = ended.final_report()  # the tests read it at once: assembled here
        assert report is not None
        with self._lock:
            self.reports.append(report)
            self.finished_handles.append(handle)
        self._maybe_fail()

    def connection_opened(self, server_address: str | None, server_port: int | None) -> object:
        self._maybe_fail()
        self.connections.append(("opened", (server_address, server_port)))
        return "conn"

    def connection_event(self, handle: object, name: str, attributes: dict[str, Any]) -> None:
        self.connections.append(("event", (name, dict(attributes))))
        self._maybe_fail()

    def connection_closed(self, handle: object, error_type: str | None) -> None:
        self.connections.append(("closed", error_type))
        self._maybe_fail()

    def one(self) -> StreamReport:
        assert len(self.reports) == 1, self.reports
        return self.reports[0]

    def clear(self) -> None:
        self.started.clear()
        self.reports.clear()
        self.finished_handles.clear()
        self.connections.clear()
