"""The demo's plan: which surface, fault and mode (sync or async) each stream gets, a pure function of the seed,
and the outcome counts the fault table promises for it."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from otelstream import names
from otelstream.demo import faults as F

# One model per surface: the semantic-convention series (TTFD, tokens) carry no surface label, so the table (and a
# Grafana panel filtered by model) tells the surfaces apart by model.
MODEL_BY_SURFACE: Final = {
    names.RESPONSES: "gpt-4o-mini",
    names.RESPONSES_WEBSOCKET: "gpt-4.1-mini",
    names.CHAT_COMPLETIONS: "gpt-4o",
    names.COMPLETIONS: "gpt-3.5-turbo-instruct",
    names.MESSAGES: "claude-sonnet-4-5",
}
SSE_SURFACES: Final = (names.RESPONSES, names.CHAT_COMPLETIONS, names.COMPLETIONS, names.MESSAGES)


@dataclass(frozen=True, slots=True)
class Job:
    index: int
    surface: str
    fault: str
    is_async: bool


def plan(streams: int, mix: F.FaultMix, seed: int) -> list[Job]:
    """Exactly ``mix.counts(streams)`` faults, each on a surface where it applies; a pure function of the seed."""
    rng = random.Random(seed)
    return _jobs(mix.assign(streams, rng), rng)


def serve_plan(streams: int, mix: F.FaultMix, seed: int) -> list[Job]:
    """One round of ``--serve``'s light traffic: every fault of the mix once, the rest of ``streams`` by weight.
    (Rounds allocated by weight alone gave a small round the same few faults every time: ``outage`` in rounds of 4
    never served a cut or an error.)"""
    rng = random.Random(seed)
    every = [name for name, _ in mix.weights]
    faults = every + mix.assign(max(0, streams - len(every)), rng)
    rng.shuffle(faults)
    return _jobs(faults, rng)


def _jobs(faults: list[str], rng: random.Random) -> list[Job]:
    return [Job(i, rng.choice(DEMO_SURFACES[fault]), fault, rng.random() < 0.5) for i, fault in enumerate(faults)]


DEMO_SURFACES: Final[Mapping[str, tuple[str, ...]]] = {
    **F.DEMO_SURFACES_BY_FAULT,
    F.ABANDON: SSE_SURFACES,  # closing a WebSocket mid-response is a cut or an abandon depending on the observer
}


def expected_by_surface(jobs: list[Job]) -> dict[str, dict[str, int]]:
    """surface → outcome → streams, as the fault table promises."""
    out: dict[str, dict[str, int]] = {}
    for job in jobs:
        per = out.setdefault(job.surface, {})
        outcome = F.EXPECTED_OUTCOME[job.fault]
        per[outcome] = per.get(outcome, 0) + 1
    return out

