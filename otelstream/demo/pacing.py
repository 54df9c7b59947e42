"""When a fake response's events go out: ``script(events, spec, pacing, rng)`` interleaves pauses (time to first
delta, per-token gaps, the fault's pause) and, for ``reset`` and WebSocket ``cut``, the point where the connection
dies. Pure: the server sleeps the :class:`Pause` steps, nothing here reads a clock.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.events import DELTA, ERROR_EVENT, META, TERMINAL, Event, StreamSpec


@dataclass(frozen=True, slots=True)
class Pacing:
    """Timing of a fake stream (seconds). Defaults are small so tests are fast; the demo uses livelier values."""

    ttfd_s: float = 0.01  # request → first delta (about a quarter of it before the first event)
    gap_s: float = 0.002  # between deltas
    jitter: float = 0.0  # 0 = exact; >0 = lognormal sigma on TTFD and ±jitter spread on gaps
    pause_s: float = 0.25  # the extra pause of `slow_first` and `stall`
    no_headers_s: float = 30.0  # how long `no_headers` holds the request before dropping the connection


@dataclass(frozen=True, slots=True)
class Pause:
    seconds: float


@dataclass(frozen=True, slots=True)
class Reset:
    """Kill the connection here: socket shutdown without the terminating chunk (WebSocket: abort)."""


@dataclass(frozen=True, slots=True)
class Close:
    """WebSocket ``cut``: close the socket normally (1000) while the response is still open."""


Step = Event | Pause | Reset | Close


def script(events: Sequence[Event], spec: StreamSpec, pacing: Pacing, rng: random.Random) -> list[Step]:
    """Interleave pauses (and the break of ``reset`` / WebSocket ``cut``) with ``events``."""
    ttfd = pacing.ttfd_s
    if pacing.jitter > 0:
        ttfd *= math.exp(rng.gauss(0.0, pacing.jitter))
    deltas = sum(1 for e in events if e.kind == DELTA)
    stall_at = max(1, deltas // 2)
    steps: list[Step] = [Pause(ttfd * 0.25)]
    seen = 0
    for event in events:
        if event.kind == DELTA:
            if seen == 0:
                steps.append(Pause(ttfd * 0.75 + (pacing.pause_s if spec.fault == F.SLOW_FIRST else 0.0)))
            else:
                gap = pacing.gap_s
                if pacing.jitter > 0:
                    gap *= rng.uniform(max(0.0, 1 - pacing.jitter), 1 + pacing.jitter)
                if seen == stall_at and spec.fault == F.STALL:
                    gap += pacing.pause_s
                steps.append(Pause(gap))
            seen += 1
        elif event.kind in (TERMINAL, ERROR_EVENT) or (event.kind == META and seen > 0):
            steps.append(Pause(pacing.gap_s))
        steps.append(event)
    if spec.fault == F.RESET:
        steps.append(Reset())
    elif spec.fault == F.CUT and spec.surface == names.RESPONSES_WEBSOCKET:
        steps.append(Close())
    return [s for s in steps if not (isinstance(s, Pause) and s.seconds <= 0)]
