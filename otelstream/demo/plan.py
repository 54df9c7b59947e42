"""The demo's plan: which surface (through which client), fault and mode (sync or async) each stream gets, a pure
function of the seed and of the lanes this install can drive, and the outcome counts the fault table promises."""

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
    names.GENERATE_CONTENT: "gemini-2.5-flash",
    names.CONVERSE: "amazon.nova-pro-v1:0",
}
# messages streams also go through Bedrock's invoke API (an Anthropic model there): a model of their own, so the
# table can add its TTFD and tokens to the surface's
BEDROCK_INVOKE: Final = "bedrock_invoke"
INVOKE_MODEL: Final = "anthropic.claude-sonnet-4-5-v1:0"
SSE_SURFACES: Final = (names.RESPONSES, names.CHAT_COMPLETIONS, names.COMPLETIONS, names.MESSAGES)
CLOUD_SURFACES: Final = (names.GENERATE_CONTENT, names.CONVERSE)


@dataclass(frozen=True, slots=True)
class Lanes:
    """What this install can drive besides the openai and anthropic SDKs: each cloud's streams run only when its SDK
    is there (google-genai; boto3, and aiobotocore for async Bedrock streams)."""

    gemini: bool = True
    bedrock: bool = True
    bedrock_async: bool = True

    def allows(self, surface: str, via: str, is_async: bool | None = None) -> bool:
        bedrock = surface == names.CONVERSE or via == BEDROCK_INVOKE
        if surface == names.GENERATE_CONTENT:
            return self.gemini
        if bedrock:
            return self.bedrock and (is_async is not True or self.bedrock_async)
        return True


ALL_LANES: Final = Lanes()
NO_CLOUD: Final = Lanes(gemini=False, bedrock=False, bedrock_async=False)


@dataclass(frozen=True, slots=True)
class Job:
    index: int
    surface: str
    fault: str
    is_async: bool
    via: str = ""  # "": the surface's own SDK; BEDROCK_INVOKE: an Anthropic model through Bedrock's invoke API

    @property
    def model(self) -> str:
        return INVOKE_MODEL if self.via == BEDROCK_INVOKE else MODEL_BY_SURFACE[self.surface]

    @property
    def lane(self) -> str:
        """The surface, and the client when it is not the surface's own (``messages via bedrock_invoke``)."""
        return f"{self.surface} via {self.via}" if self.via else self.surface


def models_by_surface(lanes: Lanes = ALL_LANES) -> dict[str, tuple[str, ...]]:
    """The models the demo streams to on each surface it drives (what the table attributes TTFD and tokens by)."""
    out: dict[str, tuple[str, ...]] = {s: (m,) for s, m in MODEL_BY_SURFACE.items() if lanes.allows(s, "")}
    if lanes.bedrock:
        out[names.MESSAGES] += (INVOKE_MODEL,)
    return out


def plan(streams: int, mix: F.FaultMix, seed: int, lanes: Lanes = ALL_LANES) -> list[Job]:
    """Exactly ``mix.counts(streams)`` faults, each on a surface where it applies; a pure function of the seed and
    of the lanes."""
    rng = random.Random(seed)
    return _jobs(mix.assign(streams, rng), rng, lanes)


def serve_plan(streams: int, mix: F.FaultMix, seed: int, lanes: Lanes = ALL_LANES) -> list[Job]:
    """One round of ``--serve``'s light traffic: every fault of the mix once, the rest of ``streams`` by weight.
    (Rounds allocated by weight alone gave a small round the same few faults every time: ``outage`` in rounds of 4
    never served a cut or an error.)"""
    rng = random.Random(seed)
    every = [name for name, _ in mix.weights]
    faults = every + mix.assign(max(0, streams - len(every)), rng)
    rng.shuffle(faults)
    return _jobs(faults, rng, lanes)


def _jobs(faults: list[str], rng: random.Random, lanes: Lanes) -> list[Job]:
    jobs = []
    for i, fault in enumerate(faults):
        async_only = fault == F.CANCEL  # only an async caller's task can be cancelled
        choices = [(s, "") for s in DEMO_SURFACES[fault] if lanes.allows(s, "", True if async_only else None)]
        if fault in F.INVOKE_FAULTS and lanes.allows(names.MESSAGES, BEDROCK_INVOKE, True if async_only else None):
            choices.append((names.MESSAGES, BEDROCK_INVOKE))
        surface, via = rng.choice(choices)
        is_async = rng.random() < 0.5 or async_only
        if is_async and not lanes.allows(surface, via, True):  # boto3 without aiobotocore: Bedrock streams sync
            is_async = False
        jobs.append(Job(i, surface, fault, is_async, via))
    return jobs


DEMO_SURFACES: Final[Mapping[str, tuple[str, ...]]] = {
    **F.DEMO_SURFACES_BY_FAULT,
    # closing a WebSocket mid-response is a cut or an abandon depending on the observer
    F.ABANDON: (*SSE_SURFACES, *CLOUD_SURFACES),
}


def expected_by_surface(jobs: list[Job]) -> dict[str, dict[str, int]]:
    """surface → outcome → streams, as the fault table promises."""
    out: dict[str, dict[str, int]] = {}
    for job in jobs:
        per = out.setdefault(job.surface, {})
        outcome = F.EXPECTED_OUTCOME[job.fault]
        per[outcome] = per.get(outcome, 0) + 1
    return out


def servable(mix: F.FaultMix, lanes: Lanes) -> tuple[F.FaultMix | None, list[str]]:
    """The mix without the faults no lane of this install can serve (``reasoning`` without google-genai or boto3),
    and their names; None when nothing is left."""

    def has_lane(fault: str) -> bool:
        if fault in F.INVOKE_FAULTS and lanes.allows(names.MESSAGES, BEDROCK_INVOKE):
            return True
        return any(lanes.allows(s, "", True if fault == F.CANCEL else None) for s in DEMO_SURFACES[fault])

    kept = tuple((name, w) for name, w in mix.weights if has_lane(name))
    dropped = [name for name, _ in mix.weights if not has_lane(name)]
    return (F.FaultMix(kept) if kept else None), dropped
