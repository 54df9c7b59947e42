"""Running the matrix: every cell (surface × sync/async × fault) through the installed SDK's own client over the mock
transport, observed by the real patches and reported to the doctor's listener only; then each cell's one report
compared with what the contract says it must be.

The measures compared: outcome, error class, abandonment reason, whether a time to first delta was measured, events,
deltas, keepalives, usage (input and output tokens as sent), sequence gaps (Responses), whether `[DONE]` was seen,
the protocol anomalies (where the fault is about them), that nothing was left unobserved, and, where the caller
closes the stream, that its one report was there as the close returned (``reported_at_close``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import importlib
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from otelstream import names
from otelstream.core.report import StreamReport
from otelstream.doctor import bedrock_cells, bedrock_run, bodies, callers, clients, patchpoints, private_loop
from otelstream.doctor import faults as F
from otelstream.doctor.routing import CELL, DoctorListener, Routing, routed
from otelstream.doctor.versions import versions

_ASYNC_CELL_TIMEOUT_S: Final = 5.0  # a cell that hangs (a cancellation swallowed) is a mismatch, not a hung doctor
NOT_COVERED: Final = (
    f"{names.RESPONSES_WEBSOCKET}: not covered (WebSocket mode needs a socket server; its patch points are checked)",
)
DROPPED_ERROR: Final = (
    f"{names.GENERATE_CONTENT}: this google-genai drops an in-band error object (releases before 1.50): the caller "
    "gets no exception and otelstream reports such a stream as cut, the error's type unknown"
)
_WEBSOCKET_SDK: Final = "openai"  # no cells for its WebSocket mode, but its patch points are checked when asked


@dataclass(frozen=True)
class Cell:
    surface: str
    mode: str
    fault: F.Fault
    via: str = ""  # another SDK's route to the surface: ``invoke`` (Bedrock's invoke stream of an Anthropic model)

    @property
    def key(self) -> str:
        return f"{self.label}/{self.mode}/{self.fault.name}"

    @property
    def label(self) -> str:
        return f"{self.surface}+{self.via}" if self.via else self.surface


@dataclass(frozen=True)
class Row:
    cell: Cell
    expected: dict[str, Any]  # the measures compared, each with the value it must have
    observed: dict[str, Any] | None  # every measure; None: no report (or more than one: see ``problem``)
    mismatches: tuple[str, ...]  # the measures that differ
    problem: str | None = None  # no report, several, a hang, or the cell could not run

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.problem is None

    def to_json(self) -> dict[str, Any]:
        return {"surface": self.cell.surface, "via": self.cell.via or None, "mode": self.cell.mode,
                "fault": self.cell.fault.name, "ok": self.ok,
                "expected": self.expected, "observed": self.observed, "mismatches": list(self.mismatches),
                "problem": self.problem}  # fmt: skip


@dataclass
class Result:
    rows: list[Row] = field(default_factory=list)
    missing: list[patchpoints.MissingPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str | None] = field(default_factory=dict)
    seconds: float = 0.0
    interrupted: bool = False  # instrumentation changed (or a stop was asked) mid-run: the rows prove nothing
    unchecked: list[str] = field(default_factory=list)  # a surface asked (or, unasked, any) that no cell checked

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if not r.ok]

    @property
    def wrong(self) -> bool:
        """Something differed (a cell, a patch point) or the run proves nothing: not merely unchecked."""
        return bool(self.failed or self.missing or self.interrupted)

    @property
    def ok(self) -> bool:
        return not self.wrong and not self.unchecked


def cells(surfaces: Sequence[str] | None = None, *, small: bool = False) -> list[Cell]:
    """The matrix for the installed SDKs, in order: surface, mode, fault."""
    wanted = F.SURFACES if surfaces is None else tuple(s for s in F.SURFACES if s in surfaces)
    found = [
        Cell(surface, mode, fault)
        for surface in wanted
        if clients.installed(clients.SDK_BY_SURFACE[surface])
        for mode in F.MODES
        for fault in F.FAULTS
        if _in_matrix(surface, mode, fault, small)
    ]
    if bedrock_cells.installed():
        # the self-check (small) leaves aiobotocore alone unless the application imported it, and leaves the invoke
        # route (the same botocore patch points) to the full doctor
        use_async = bedrock_cells.installed_async() and (not small or "aiobotocore" in sys.modules)
        modes = (F.SYNC, F.ASYNC) if use_async else (F.SYNC,)
        routes = [(names.CONVERSE, "")] + ([] if small else [(names.MESSAGES, bedrock_cells.INVOKE)])
        found += [Cell(surface, mode, fault, via) for surface, via in routes
                  if surfaces is None or surface in surfaces
                  for mode in modes for fault in bedrock_cells.faults()
                  if mode in fault.modes and (fault.small or not small)]  # fmt: skip
    return found


def unchecked(surfaces: Sequence[str] | None, chosen: Sequence[Cell]) -> list[str]:
    """Why each surface asked has no cell here; unasked (every installed surface), why no cell ran at all."""
    if surfaces is None:
        return [] if chosen else [f"every surface: no SDK installed ({', '.join(sorted(_SDKS))})"]
    ran = {c.surface for c in chosen}
    return [
        f"{surface}: the doctor has no cells for it" if surface not in _SDK_OF else
        f"{surface}: the {_SDK_OF[surface]} SDK is not installed"
        for surface in dict.fromkeys(surfaces) if surface not in ran
    ]  # fmt: skip


_SDK_OF: Final = {**clients.SDK_BY_SURFACE, names.CONVERSE: "botocore"}  # converse cells: bedrock_cells
_SDKS: Final = frozenset(_SDK_OF.values())


def _in_matrix(surface: str, mode: str, fault: F.Fault, small: bool) -> bool:
    if surface not in fault.surfaces or mode not in fault.modes:
        return False
    if not small:
        return True
    # the self-check's cells: its faults, and on generate_content only a couple of them
    return fault.small and (surface != names.GENERATE_CONTENT or (fault.name, mode) in F.GEMINI_SMALL)


def expected_of(cell: Cell, served: bodies.Served | None, items: int | None = None,
                dropped: bool = False) -> dict[str, Any]:  # fmt: skip
    """What the cell's report must say; ``items``: the counted events the caller received, where it drained or
    waited to be cancelled (None: all the server sent up to where the caller stopped); ``dropped``: the SDK dropped
    the in-band error (``DROPPED_ERROR``), so the stream the caller saw ended without its finish: ``cut``."""
    fault = cell.fault
    if served is None:  # a Bedrock cell (bedrock_cells serves it)
        return bedrock_cells.expected(fault, cell.via)
    counts = bodies.expected_counts(cell.surface, bodies.received(served, fault.caller, items))
    outcome, error_class = fault.outcome, F.error_class_for(fault, cell.surface)
    if dropped:
        outcome, error_class = names.CUT, names.EC_CUT
    expected = {
        "outcome": outcome,
        "error_class": error_class,
        "abandoned_reason": fault.abandoned_reason,
        "ttfd": counts.ttfd,
        "events": counts.events,
        "deltas": counts.deltas,
        "keepalives": counts.keepalives,
        "usage": list(counts.usage),
        "sequence_gaps": counts.sequence_gaps,
        "done_sentinel": counts.done_sentinel,
        "anomalies": sorted(fault.anomalies or ()),
        "unobserved": [],
    }
    if fault.caller in _CLOSES:
        expected["reported_at_close"] = 1
    if fault.anomalies is None:
        del expected["anomalies"]
    for measure in fault.uncompared:
        del expected[measure]
    return expected  # what is not in it is not compared


_CLOSES: Final = (F.BREAK_CLOSE, F.CLOSE_UNREAD)  # the callers whose close() must be reported as it returns


def observed_of(cell: Cell, report: StreamReport, at_close: int | None = None) -> dict[str, Any]:
    """Every measure of the cell's report; ``at_close``: how many reports the cell had as the caller's close
    returned (None: the caller does not close)."""
    return {
        "outcome": report.outcome,
        "error_class": report.error_class,
        "abandoned_reason": report.abandoned_reason,
        "ttfd": report.time_to_first_delta_ns is not None,
        "events": report.events,
        "deltas": report.deltas,
        "keepalives": report.keepalives,
        "usage": [report.usage.input_tokens, report.usage.output_tokens],
        "sequence_gaps": report.sequence.gaps if cell.surface == names.RESPONSES else None,
        "done_sentinel": report.done_sentinel,
        "anomalies": sorted(kind for kind, n in report.anomaly_counts if n),
        "unobserved": sorted(report.unobserved),
        "reported_at_close": at_close,
    }


def compare(
    cell: Cell,
    expected: dict[str, Any],
    reports: list[StreamReport],
    problem: str | None = None,
    at_close: int | None = None,
) -> Row:
    if problem is None and len(reports) != 1:
        problem = "no report" if not reports else f"{len(reports)} reports for one stream"
    if len(reports) != 1:
        return Row(cell, expected, None, (), problem)
    observed = observed_of(cell, reports[0], at_close)
    differ = tuple(k for k, v in expected.items() if observed.get(k) != v)
    return Row(cell, expected, observed, differ, problem)


class _Run:
    """One run's plans, listener and results; the ``stop`` event (set on another thread) ends it between cells."""

    def __init__(self, chosen: list[Cell], stop: threading.Event | None, deadline: float | None) -> None:
        self.cells = chosen
        bedrock = [c for c in chosen if c.surface == names.CONVERSE or c.via]
        self.served = {c.key: bodies.serve(c.surface, c.fault) for c in chosen if c not in bedrock}
        self.bedrock = bedrock_cells.plans_for(bedrock)
        self.problems: dict[str, str] = {}
        self.at_close: dict[str, int] = {}
        self.watches: dict[str, callers.Watch] = {}
        self.listener = DoctorListener()
        self._stop = stop
        self._deadline = deadline

    def items(self, key: str) -> int | None:
        watch = self.watches.get(key)
        return None if watch is None else watch.items

    def dropped(self, cell: Cell) -> bool:
        """A Gemini in-band error cell whose caller drained to the end unraised: the release dropped the error."""
        watch = self.watches.get(cell.key)
        gemini_error = cell.surface == names.GENERATE_CONTENT and cell.fault.outcome == names.ERROR
        return gemini_error and watch is not None and watch.drained

    def watch(self, key: str) -> callers.Watch:
        def closed() -> None:
            self.at_close[key] = len(self.listener.reports_of(key))

        self.watches[key] = callers.Watch(closed)
        return self.watches[key]

    @property
    def stopped(self) -> bool:
        if self._deadline is not None and time.monotonic() > self._deadline:
            return True
        return self._stop is not None and self._stop.is_set()

    def sync_cells(self, sdk: str, mode_cells: list[Cell], routing: Routing) -> None:
        client = clients.make_client(sdk, self.served, is_async=False)
        try:
            for cell in mode_cells:
                if self.stopped or not routing.intact:
                    return
                served = self.served[cell.key]
                opener = clients.OPENERS[cell.surface]
                token = CELL.set(cell.key)
                try:
                    callers.run_sync(functools.partial(opener, client, cell.key), cell.fault.caller,
                                     bodies.reads(served, cell.fault.caller),
                                     self.watch(cell.key))  # fmt: skip
                except Exception as exc:  # the doctor's own harness failing: a mismatch with the reason, no crash
                    self.problems[cell.key] = f"could not run: {exc!r}"
                finally:
                    CELL.reset(token)
        finally:
            client.close()

    async def async_cells(self, sdk: str, mode_cells: list[Cell], routing: Routing) -> None:
        client = clients.make_client(sdk, self.served, is_async=True)
        try:
            for cell in mode_cells:
                if self.stopped or not routing.intact:
                    return
                served = self.served[cell.key]
                opener = clients.OPENERS[cell.surface]
                token = CELL.set(cell.key)
                try:
                    run = callers.run_async(functools.partial(opener, client, cell.key), cell.fault.caller,
                                            bodies.reads(served, cell.fault.caller), served.holding,
                                            self.watch(cell.key))  # fmt: skip
                    await asyncio.wait_for(run, _ASYNC_CELL_TIMEOUT_S)
                except asyncio.TimeoutError:
                    self.problems[cell.key] = f"hung: no end within {_ASYNC_CELL_TIMEOUT_S:g} s"
                except Exception as exc:
                    self.problems[cell.key] = f"could not run: {exc!r}"
                finally:
                    CELL.reset(token)
        finally:
            await client.close()


def run(
    surfaces: Sequence[str] | None = None,
    *,
    small: bool = False,
    stop: threading.Event | None = None,
    deadline: float | None = None,
) -> Result:
    """Run the matrix (``small``: the runtime self-check's) on the installed SDKs. ``stop`` (set on another thread)
    or the ``deadline`` (``time.monotonic()``) ends the run between cells: the result is then ``interrupted``."""
    start = time.monotonic()
    chosen = cells(surfaces, small=small)
    state = _Run(chosen, stop, deadline)
    result = Result(versions=versions(), notes=list(NOT_COVERED), unchecked=unchecked(surfaces, chosen))
    sdks = tuple(dict.fromkeys(clients.SDK_BY_SURFACE[c.surface] for c in chosen
                               if c.surface != names.CONVERSE and not c.via))  # fmt: skip
    # the SDKs whose patch points are checked: those of the cells, and openai's when its WebSocket mode is asked
    pointed = sdks
    if names.RESPONSES_WEBSOCKET in (surfaces or ()) and clients.installed(_WEBSOCKET_SDK):
        pointed = tuple(dict.fromkeys((*sdks, _WEBSOCKET_SDK)))
    with routed(state.listener) as routing:
        for sdk in pointed:
            importlib.import_module(sdk)
        checked = pointed
        on_bedrock = [c for c in chosen if c.surface == names.CONVERSE or c.via]
        if on_bedrock:  # botocore's (and aiobotocore's) points too
            converse_async = any(c.mode == F.ASYNC for c in on_bedrock)
            checked += ("botocore", "aiobotocore") if converse_async else ("botocore",)
            for module in checked[len(pointed) :]:
                importlib.import_module(module)
        if not small:
            patchpoints.import_patch_modules(checked)
        with _young_heap(any(c.fault.caller == F.DROP for c in chosen)):
            for sdk in sdks:
                for mode in F.MODES:
                    mode_cells = [c for c in chosen if not c.via
                                  and clients.SDK_BY_SURFACE.get(c.surface) == sdk and c.mode == mode]  # fmt: skip
                    if not mode_cells:
                        continue
                    if mode == F.SYNC:
                        state.sync_cells(sdk, mode_cells, routing)
                    else:
                        private_loop.run_loop(state.async_cells(sdk, mode_cells, routing))
            bedrock_run.run_cells(state, [c for c in chosen if c.surface == names.CONVERSE or c.via], routing)
        result.interrupted = state.stopped or not routing.intact
        missing, notes = patchpoints.missing(checked)  # before the patches are removed: that forgets what was missing
    result.missing = missing
    result.notes.extend(notes)
    if any(state.dropped(c) for c in chosen):
        result.notes.append(DROPPED_ERROR)
    result.rows = [
        compare(
            c,
            expected_of(c, state.served.get(c.key), state.items(c.key), state.dropped(c)),
            state.listener.reports_of(c.key),
            state.problems.get(c.key),
            state.at_close.get(c.key),
        )
        for c in chosen
    ]
    result.seconds = time.monotonic() - start
    return result


@contextlib.contextmanager
def _young_heap(needed: bool) -> Iterator[None]:
    """The drop cells need a cyclic collection each (the SDKs' streams sit in reference cycles); with the heap there
    was before the run frozen out of the collector's sight, each costs milliseconds instead of a full-heap pass."""
    if not needed:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
