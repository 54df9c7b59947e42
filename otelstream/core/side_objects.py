"""A stream's side objects: the fields only rare events write, kept apart from the tracker's own slots and made on
the first write, so an open stream in mid-answer pays one slot for each group (memory per open stream is budgeted;
every slot is 8 bytes). ``forwarded`` lets the tracker read and write their fields as its own. Pure module.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from otelstream.core.errors import NO_ERROR_FIELDS, ErrorFields
from otelstream.core.report import Anomaly, Stall, StreamReport


class Rare:
    """The fields only rare events and the end write (errors, finishes, stalls, anomalies, the end itself): a side
    object made on the first write, so an open stream in mid-answer carries one slot for all of them (memory per
    open stream is budgeted; every slot is 8 bytes)."""

    __slots__ = (
        "_anomalies",
        "_anomaly_counts",
        "_choices_finished",
        "_ending",
        "_stalls",
        "choices_seen",
        "consumer_ns",
        "done_ended",
        "error_fields",
        "error_type",
        "finish_reasons",
        "max_keepalive_gap_ns",
        "report",
        "stall_count",
        "starting_after",
        "t_keepalive",
        "t_terminal",
    )

    def __init__(self) -> None:
        self._anomalies: list[Anomaly] | None = None
        self._anomaly_counts: dict[str, int] | None = None
        self._choices_finished: dict[int, str] | None = None
        # how the stream ended (outcome, abandoned reason, end time, error class), set by the end: the report is
        # assembled from it and the state later, on the export thread or for otelstream.report_of
        self._ending: tuple[str, str | None, int, str | None] | None = None
        self._stalls: list[Stall] | None = None
        self.choices_seen: set[int] | None = None
        self.consumer_ns = 0
        self.done_ended = False  # chat/completions: [DONE] was the terminal condition (no finish on every choice)
        self.error_fields: ErrorFields = NO_ERROR_FIELDS  # the first in-band error body's code, type, status
        self.error_type: str | None = None
        self.finish_reasons: list[str] = []
        self.max_keepalive_gap_ns = 0  # the largest gap between two keepalives: a proxy's read timeout must exceed it
        self.report: StreamReport | None = None  # the one report, once assembled (StreamTracker.final_report)
        self.stall_count = 0
        self.starting_after: int | None = None
        self.t_keepalive = 0  # the last keepalive's time (0: none yet, or no clock for it)
        self.t_terminal = 0


class Tokens:
    """The token counts as the server reported them (None: not reported): made at the first usage object."""

    __slots__ = (
        "usage_cache_read",
        "usage_cache_write",
        "usage_input",
        "usage_input_raw",
        "usage_output",
        "usage_reasoning",
    )

    def __init__(self) -> None:
        self.usage_input: int | None = None
        self.usage_input_raw: int | None = None  # Anthropic: input before adding the cache counts
        self.usage_output: int | None = None
        self.usage_cache_read: int | None = None
        self.usage_cache_write: int | None = None
        self.usage_reasoning: int | None = None


NO_RARE = Rare()  # read-only defaults for the forwarding properties (never written: writes make a side object)
NO_RARE.finish_reasons = ()  # type: ignore[assignment]
NO_TOKENS = Tokens()


def forwarded(side: str, make: Callable[[Any], object], default: object, name: str) -> property:
    """A field of a side object read and written as the tracker's own (its default while the object is not made):
    for the adapters, the end and tests; the protocol modules write the side objects directly."""
    get_side = attrgetter(side)
    read = attrgetter(name)

    def fget(self: Any) -> Any:
        obj = get_side(self)
        return read(default if obj is None else obj)

    def fset(self: Any, value: object) -> None:
        setattr(make(self), name, value)

    return property(fget, fset)
