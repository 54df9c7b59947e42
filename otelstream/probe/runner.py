"""One round of one target: its requests, at most ``concurrency`` at once, each a row made of its ``StreamReport``.

A round gives up on the requests it has not sent yet once a request failed to connect while none had reached the
server (an unreachable target costs one connect timeout, not one per request).
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass, field
from typing import Any, Final

from otelstream import attribution, names
from otelstream.core import errors
from otelstream.core.report import SequenceStats, StreamReport, Usage
from otelstream.probe import requests
from otelstream.probe.config import RunOptions, Target, secrets
from otelstream.probe.observe import Inbox

# the report is made when the stream ends and reaches on_report through two queues: well under a second
REPORT_WAIT_S: Final = 5.0


@dataclass(frozen=True)
class Row:
    """One request as the probe reports it: what otelstream measured (``observed``), else what the probe saw."""

    target: str
    index: int
    surface: str
    outcome: str | None
    error_class: str | None = None
    error_type: str | None = None
    failure_phase: str | None = None
    time_to_first_delta_s: float | None = None
    time_to_first_output_s: float | None = None
    time_to_first_event_s: float | None = None
    max_wait_s: float | None = None
    keepalives: int | None = None
    max_keepalive_gap_s: float | None = None
    events: int | None = None
    deltas: int | None = None
    usage: Usage | None = None
    done_sentinel: bool | None = None
    sequence: SequenceStats | None = None
    anomalies: tuple[tuple[str, int], ...] = ()  # protocol anomaly kind -> count
    request_id: str | None = None
    duration_s: float = 0.0
    raised: str | None = None  # the type of what the SDK raised to the probe (never its message)
    # the operating system's reason when no connection could be made ("Connection refused"): never server text
    connect_reason: str | None = None
    timed_out: bool = False  # the probe ended it at its overall deadline
    observed: bool = True  # False: no StreamReport (see note)
    unobserved: tuple[str, ...] = ()  # measures the installed SDK gave otelstream no way to see (names.MEASURES)
    note: str | None = None

    @property
    def usage_reported(self) -> bool | None:
        if self.usage is None:
            return None
        return any(v is not None for v in self.usage.to_json().values())

    @property
    def sequence_counts(self) -> dict[str, int]:
        """Sequence anomalies by kind (names.SEQUENCE_KINDS), the ones seen only."""
        if self.sequence is None:
            return {}
        return {kind: n for kind, n in self.sequence.counts_by_kind().items() if n}

    @property
    def connect_failed(self) -> bool:
        """Refused before any answer because no connection could be made (the target cannot be reached)."""
        return self.outcome == names.HTTP_ERROR and self.error_class == names.EC_CONNECTION

    def to_json(self) -> dict[str, Any]:
        return {
            "request": self.index,
            "outcome": self.outcome,
            "error_class": self.error_class,
            "error_type": self.error_type,
            "failure_phase": self.failure_phase,
            "time_to_first_delta_s": self.time_to_first_delta_s,
            "time_to_first_output_s": self.time_to_first_output_s,
            "time_to_first_event_s": self.time_to_first_event_s,
            "max_wait_s": self.max_wait_s,
            "keepalives": self.keepalives,
            "max_keepalive_gap_s": self.max_keepalive_gap_s,
            "events": self.events,
            "deltas": self.deltas,
            "usage_reported": self.usage_reported,
            "usage": None if self.usage is None else self.usage.to_json(),
            "done_sentinel": self.done_sentinel,
            "sequence": None if self.sequence is None else self.sequence.to_json(),
            "sequence_anomalies": self.sequence_counts,
            "anomalies": dict(self.anomalies),
            "request_id": self.request_id,
            "duration_s": round(self.duration_s, 6),
            "raised": self.raised,
            "connect_reason": self.connect_reason,
            "timed_out": self.timed_out,
            "observed": self.observed,
            "unobserved": list(self.unobserved),
            "note": self.note,
        }


def row_of(report: StreamReport, target: Target, index: int, attempt: requests.Attempt) -> Row:
    gap = report.max_keepalive_gap_ns
    return Row(
        target=target.name, index=index, surface=target.surface, outcome=report.outcome,
        error_class=report.error_class, error_type=report.error_type, failure_phase=report.failure_phase,
        time_to_first_delta_s=report.time_to_first_delta_s, time_to_first_output_s=report.time_to_first_output_s,
        time_to_first_event_s=report.time_to_first_event_s, max_wait_s=report.max_wait_s,
        keepalives=report.keepalives, max_keepalive_gap_s=None if gap is None else gap / 1e9,
        events=report.events, deltas=report.deltas, usage=report.usage, done_sentinel=report.done_sentinel,
        sequence=report.sequence, anomalies=_protocol(report.anomaly_counts), request_id=report.request_id,
        duration_s=attempt.duration_s, raised=_type_name(attempt.raised), timed_out=attempt.timed_out,
        connect_reason=os_reason(attempt.raised), unobserved=report.unobserved,
    )  # fmt: skip


def handshake_row(target: Target, index: int, attempt: requests.Attempt) -> Row:
    """A WebSocket handshake that failed: no response ever started, so otelstream (which reports responses) made no
    report. The row is the probe's own: ``http_error`` as the contract defines it (no stream: a refused upgrade or
    no connection), classed by otelstream's table from the HTTP status or the exception."""
    exc = attempt.raised
    status = _handshake_status(exc)
    return Row(
        target=target.name, index=index, surface=target.surface, outcome=names.HTTP_ERROR,
        error_class=errors.error_class(names.HTTP_ERROR, None, status, exc),
        error_type=None if status is None else str(status), failure_phase=names.PHASE_BEFORE_OUTPUT,
        duration_s=attempt.duration_s, raised=_type_name(exc), timed_out=attempt.timed_out, observed=False,
        connect_reason=os_reason(exc),
        note="the WebSocket handshake failed: no response, no otelstream report (not in /metrics)",
    )  # fmt: skip


def missing_row(target: Target, index: int, attempt: requests.Attempt) -> Row:
    return Row(
        target=target.name, index=index, surface=target.surface, outcome=None, duration_s=attempt.duration_s,
        raised=_type_name(attempt.raised), timed_out=attempt.timed_out, observed=False,
        note=f"otelstream made no report within {REPORT_WAIT_S:g} s of the end",
    )  # fmt: skip


def _handshake_status(exc: BaseException | None) -> int | None:
    """The HTTP status a refused WebSocket upgrade carried (websockets' InvalidStatus keeps the response)."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if type(status) is int else errors.status_of(exc)


_SEQUENCE_ANOMALIES: Final = frozenset(names.SEQUENCE_ANOMALY_BY_KIND.values())


def _protocol(counts: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """The protocol anomalies of a report's counts (its sequence ones are the row's sequence column)."""
    return tuple((kind, n) for kind, n in counts if kind not in _SEQUENCE_ANOMALIES)


def os_reason(exc: BaseException | None) -> str | None:
    """The ``strerror`` of the first OSError in the exception's chain (the SDKs wrap the socket's error)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.strerror:
            # asyncio words a refused connect as "Connect call failed (address)": the errno's own text is plainer
            errno = exc.errno
            if isinstance(errno, int) and errno > 0 and not isinstance(exc, socket.gaierror):
                return os.strerror(errno)
            return str(exc.strerror)
        exc = exc.__cause__ or exc.__context__
    return None


def _type_name(exc: BaseException | None) -> str | None:
    return None if exc is None else type(exc).__name__


@dataclass
class _Progress:
    reached: bool = False  # a request got an answer of any kind from the server
    give_up: bool = False  # a request could not connect before any had reached it
    rows: list[Row] = field(default_factory=list)


async def run_round(target: Target, options: RunOptions, inbox: Inbox) -> list[Row]:
    """The target's ``requests`` requests, in order of their index; fewer when the target could not be reached."""
    client = requests.make_client(target, secrets(target), options.timeout_s)
    gate = asyncio.Semaphore(options.concurrency)
    progress = _Progress()

    async def one(index: int) -> None:
        async with gate:
            if progress.give_up:
                return
            row = await _request(client, target, index, options, inbox)
        progress.rows.append(row)
        if row.connect_failed:
            progress.give_up = progress.give_up or not progress.reached
        else:
            progress.reached = True

    try:
        await asyncio.gather(*(one(i) for i in range(1, target.requests + 1)))
    finally:
        await client.close()
    return sorted(progress.rows, key=lambda r: r.index)


async def _request(client: Any, target: Target, index: int, options: RunOptions, inbox: Inbox) -> Row:
    key, future = inbox.expect()
    attrs = {names.PROBE_NAME_ATTRIBUTE: target.name, names.PROBE_REQUEST_ATTRIBUTE: key}
    try:
        with attribution.attributes(attrs):
            attempt = await requests.attempt(client, target, options.timeout_s)
        if not attempt.connected:
            return handshake_row(target, index, attempt)
        try:
            report = await asyncio.wait_for(future, REPORT_WAIT_S)
        except asyncio.TimeoutError:
            return missing_row(target, index, attempt)
        return row_of(report, target, index, attempt)
    finally:
        inbox.forget(key)
