"""The export tests' harness: a driven clock, a fake tracker, report builders, a stream runner."""

from __future__ import annotations

import dataclasses
from typing import Any

from otelstream import names
from otelstream.core.errors import error_class
from otelstream.core.report import StreamReport, StreamStart, Usage
from otelstream.export import Pipeline

T0 = 1_000_000_000_000  # an arbitrary monotonic origin (ns)

# the common labels of a stream from make_start() finished with make_report(); the live gauges and drops have no
# response model yet (empty: prometheus_client writes the label, Prometheus reads it as absent)
COMMON_LABELS = {
    names.LABEL_PROVIDER: "openai", names.LABEL_OPERATION: "chat", names.LABEL_MODEL: "gpt-test",
    names.LABEL_SERVER_ADDRESS: "127.0.0.1", names.LABEL_SERVER_PORT: "8080",
    names.LABEL_RESPONSE_MODEL: "gpt-test-2025",
}  # fmt: skip
LIVE_LABELS = {**COMMON_LABELS, names.LABEL_RESPONSE_MODEL: ""}


class Clock:
    """A driven monotonic clock in ns."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1e9)


class FakeTracker:
    """The attributes the export side reads from a tracker, nothing more."""

    def __init__(self, start: StreamStart, clock: Clock) -> None:
        self.start = start
        self.clock = clock
        self.t_pull = 0
        self.t_request = start.t_request_ns  # the last attempt's send (a retry moves it)
        self.t_last_ns = clock()  # the send (adapters stamp it)
        self.t_last_event = 0  # the last event (the tracker stamps it)
        self.ended = False
        self.end_calls: list[str] = []
        self.report: StreamReport | None = None

    def last_activity_ns(self) -> int:
        return max(self.t_last_ns, self.t_last_event)

    def conclude(self, how: str, error_type: str | None = None) -> bool:
        self.end_calls.append(how)
        if self.ended:
            return False
        self.ended = True
        self.report = make_report(
            self.start, outcome=names.ABANDONED, abandoned_reason=how, t_end_ns=self.clock(),
            time_to_first_event_ns=None, time_to_first_delta_ns=None, time_to_first_output_ns=None, usage=Usage(),
        )  # fmt: skip
        return True

    def final_report(self) -> StreamReport | None:
        return self.report

    def end(self, how: str, error_type: str | None = None) -> StreamReport | None:
        return self.final_report() if self.conclude(how, error_type) else None


class Ended:
    """A stream that ended, as ``Pipeline.stream_finished`` takes it, around a report made here."""

    def __init__(self, report: StreamReport) -> None:
        self.report = report

    def final_report(self) -> StreamReport:
        return self.report


def make_start(**kw: Any) -> StreamStart:
    base: dict[str, Any] = dict(
        surface=names.RESPONSES, provider=names.PROVIDER_OPENAI, request_model="gpt-test",
        server_address="127.0.0.1", server_port=8080, api_type="responses", t_request_ns=T0,
    )  # fmt: skip
    base.update(kw)
    return StreamStart(**base)


def make_report(start: StreamStart | None = None, **kw: Any) -> StreamReport:
    start = start or make_start()
    base: dict[str, Any] = dict(
        surface=start.surface, provider=start.provider, outcome=names.COMPLETED,
        request_model=start.request_model, response_model="gpt-test-2025", response_id="resp_1",
        request_id="req_1", server_address=start.server_address, server_port=start.server_port,
        api_type=start.api_type, finish_reasons=("stop",), t_request_ns=start.t_request_ns,
        t_end_ns=start.t_request_ns + 1_500_000_000, time_to_first_event_ns=100_000_000,
        time_to_first_delta_ns=200_000_000, time_to_first_output_ns=300_000_000, first_output_event=4,
        max_wait_ns=200_000_000, wait_ns=400_000_000,
        consumer_ns=50_000_000, events=12, deltas=5, usage=Usage(10, 5, 2, 0, 1),
        stream_id=start.stream_id, resumed=start.resumed,
    )  # fmt: skip
    base.update(kw)
    if "error_class" not in kw:  # as the tracker derives it (no status, no exception)
        base["error_class"] = error_class(base["outcome"], base.get("error_type"), None, None)
    return StreamReport(**base)


def replace(report: StreamReport, **kw: Any) -> StreamReport:
    return dataclasses.replace(report, **kw)


def run_stream(
    p: Pipeline, clock: Clock, report_kw: dict[str, Any] | None = None, **start_kw: Any
) -> tuple[Any, FakeTracker, StreamReport]:
    """Start a stream at the clock's now, advance 1.5 s, finish it with a report; returns (handle, tracker, report)."""
    start = make_start(t_request_ns=clock(), **start_kw)
    tracker = FakeTracker(start, clock)
    handle = p.stream_started(start, tracker)
    clock.advance(1.5)
    tracker.ended = True
    report = make_report(start, t_end_ns=clock(), **(report_kw or {}))
    p.stream_finished(Ended(report), handle)
    return handle, tracker, report
