"""A Responses WebSocket transcript: one replayed run per response, lanes by ``stream_id``, and the counts over
every response, in memory bounded whatever the transcript holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from otelstream import names
from otelstream.core.report import SequenceStats, StreamReport, Usage
from otelstream.offline.reading import Record
from otelstream.offline.replay import Run

MAX_REPORTED_LANE_RESPONSES: Final = 1_000  # a transcript's responses listed in `lanes`; all of them are counted
MAX_OPEN_LANES: Final = 1_024  # lanes followed at once; beyond it the longest-idle lane is forgotten

# client-to-server WebSocket events a transcript may also hold: not part of any response
_WS_CLIENT_EVENTS = frozenset({"response.create", "response.cancel", "response.steer", "session.update"})


@dataclass
class Totals:
    """docs/api.md's counts over every response of a transcript, listed in ``lanes`` or not: exact, in memory that
    does not grow with the responses (integers, and dicts keyed by anomaly kind and outcome)."""

    responses: int = 0
    events: int = 0
    deltas: int = 0
    keepalives: int = 0
    done_sentinel: bool = False
    # per-response numbering restarts at 0, so first and last are only meaningful per lane: unknown here
    sequence: SequenceStats = field(default_factory=SequenceStats)
    usage: dict[str, int | None] = field(default_factory=lambda: Usage().to_json())  # every key, each None
    anomaly_counts: dict[str, int] = field(default_factory=dict)
    # responses finish out of order (lanes interleave), so "first" means the lowest place in order of first events
    first_bad: tuple[int, str] | None = None  # the first response that did not complete: (place, outcome)
    error_types: dict[str, tuple[int, str]] = field(default_factory=dict)  # per outcome, its first error_type
    error_classes: dict[str, tuple[int, str]] = field(default_factory=dict)  # per outcome, its first error_class
    phases: dict[str, tuple[int, str]] = field(default_factory=dict)  # per outcome, its first failure phase
    model: tuple[int, str] | None = None
    lane_ids: set[str | None] = field(default_factory=set)  # distinct lanes, up to MAX_REPORTED_LANE_RESPONSES
    lanes_more: bool = False
    evicted: int = 0  # responses still open when their lane was forgotten (MAX_OPEN_LANES)

    @property
    def outcome(self) -> str:
        if self.first_bad is not None:
            return self.first_bad[1]
        return names.COMPLETED if self.responses else names.CUT

    def add(self, place: int, r: StreamReport) -> None:
        self.responses += 1
        self.events += r.events
        self.deltas += r.deltas
        self.keepalives += r.keepalives or 0  # None (unknown) only live, never offline
        self.done_sentinel = self.done_sentinel or bool(r.done_sentinel)
        self.sequence = self.sequence.added(r.sequence)
        usage = self.usage
        for key, value in r.usage.to_json().items():
            if value is not None:
                usage[key] = (usage[key] or 0) + value
        counts = self.anomaly_counts
        for kind, c in r.anomaly_counts:
            counts[kind] = counts.get(kind, 0) + c
        if r.outcome != names.COMPLETED and (self.first_bad is None or place < self.first_bad[0]):
            self.first_bad = (place, r.outcome)
        if r.error_type is not None:
            known = self.error_types.get(r.outcome)
            if known is None or place < known[0]:
                self.error_types[r.outcome] = (place, r.error_type)
        if r.error_class is not None:
            known = self.error_classes.get(r.outcome)
            if known is None or place < known[0]:
                self.error_classes[r.outcome] = (place, r.error_class)
        phase = r.failure_phase
        if phase is not None:
            known = self.phases.get(r.outcome)
            if known is None or place < known[0]:
                self.phases[r.outcome] = (place, phase)
        if r.response_model and (self.model is None or place < self.model[0]):
            self.model = (place, r.response_model)
        if r.stream_id not in self.lane_ids:
            if len(self.lane_ids) < MAX_REPORTED_LANE_RESPONSES:
                self.lane_ids.add(r.stream_id)
            else:
                self.lanes_more = True


@dataclass
class Lane:
    """One lane being followed: its current response and the client's requests it has not answered yet."""

    run: Run | None = None
    place: int = 0  # the run's place in order of first events
    # the client's response.create not yet answered by a run: after a response's terminal event, the next server
    # event belongs to the next request (an `error` refusing it may come without response.created)
    requested: int = 0


@dataclass
class Lanes:
    """A WebSocket transcript: one run per response, lanes by ``stream_id``.

    Bounded whatever the transcript holds: at most MAX_OPEN_LANES lanes are followed (least recently fed first, so
    the one to forget is the longest idle), a response's report is folded into ``totals`` when its lane moves on,
    and only the first MAX_REPORTED_LANE_RESPONSES reports are kept for ``lanes``."""

    open: dict[str | None, Lane] = field(default_factory=dict)
    listed: list[StreamReport | None] = field(default_factory=list)  # by place; None while that run is open
    totals: Totals = field(default_factory=Totals)
    started: int = 0

    def record(self, rec: Record) -> None:
        value = rec.value
        d = value if type(value) is dict else None
        typ = d.get("type") if d is not None else None
        sid = d.get("stream_id") if d is not None else None
        client = type(typ) is str and typ in _WS_CLIENT_EVENTS
        if client and typ != "response.create":
            return
        lane = sid[:128] if isinstance(sid, str) else None
        entry = self.open.pop(lane, None)
        if entry is None:
            entry = Lane()
            if len(self.open) >= MAX_OPEN_LANES:
                self._forget(next(iter(self.open)))
        self.open[lane] = entry  # re-inserted: the most recently fed lane is last
        if client:
            entry.requested += 1
            return
        run = entry.run
        if (
            run is None
            or (typ == "response.created" and run.tracker.events)
            or (run.tracker.terminal and entry.requested)
        ):
            if entry.requested:
                entry.requested -= 1
            if run is not None:
                self._close(entry)
            run = entry.run = Run.open(names.RESPONSES_WEBSOCKET, sse_framed=False, stream_id=lane)
            entry.place = self.started
            self.started += 1
            if entry.place < MAX_REPORTED_LANE_RESPONSES:
                self.listed.append(None)
        run.record(rec)

    def _forget(self, lane: str | None) -> None:
        entry = self.open.pop(lane)
        run = entry.run
        if run is not None:
            if run.report is None and not run.tracker.terminal:
                self.totals.evicted += 1
            self._close(entry)

    def _close(self, entry: Lane) -> None:
        assert entry.run is not None  # only called for a lane with a current response
        report = entry.run.finish()
        entry.run = None
        self.totals.add(entry.place, report)
        if entry.place < MAX_REPORTED_LANE_RESPONSES:
            self.listed[entry.place] = report

    def reports(self) -> tuple[StreamReport, ...]:
        """The listed reports, in order of first events; every lane still open ends here (the transcript did)."""
        for entry in self.open.values():
            if entry.run is not None:
                self._close(entry)
        self.open.clear()
        listed = tuple(r for r in self.listed if r is not None)
        assert len(listed) == len(self.listed)  # every run was closed, here or when its lane moved on
        return listed
