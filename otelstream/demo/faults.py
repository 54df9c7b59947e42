"""The fault catalogue of the fake provider: names, where each applies, what outcome otelstream must report.

A *fault* is chosen per request (header ``x-otelstream-fault`` or, on a WebSocket ``response.create``,
``metadata.otelstream_fault``) or drawn from a *mix* (``ok=70,cut=5,...`` or a named preset). The table
``EXPECTED_OUTCOME`` is the contract between the fake provider, the demo and the tests: a stream served with a
fault must end in that outcome, so the demo can assert that what Prometheus counted is what it asked for.

Pure module: standard library only.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from otelstream import names

# --- names ---------------------------------------------------------------------------------------
OK: Final = "ok"
SLOW_FIRST: Final = "slow_first"  # pause before the first delta (TTFD outlier)
STALL: Final = "stall"  # pause in the middle of the deltas (max-wait outlier)
CUT: Final = "cut"  # clean EOF before the terminal event (terminating chunk sent)
RESET: Final = "reset"  # socket shutdown mid-body, no terminating chunk
FAILED: Final = "failed"  # response.failed
INCOMPLETE: Final = "incomplete"  # response.incomplete / finish_reason length / stop_reason max_tokens
ERROR: Final = "error"  # in-band error after HTTP 200
KEEPALIVE: Final = "keepalive"  # SSE comment lines, and `event: ping` where the surface has it
SEQ_GAP: Final = "seq_gap"  # one event lost: a sequence number is skipped
SEQ_DUP: Final = "seq_dup"  # one event sent twice: a sequence number repeats
TRAILING_DONE: Final = "trailing_done"  # `data: [DONE]` after response.completed (gateway quirk)
HTTP_500: Final = "http_500"  # non-2xx before streaming
HTTP_429: Final = "http_429"
OVERLOADED: Final = "overloaded"  # HTTP 529 overloaded_error (Anthropic) / 503 (OpenAI) before streaming
NO_HEADERS: Final = "no_headers"  # accept the request, never answer (client read timeout)
REASONING: Final = "reasoning"  # thinking first: Gemini thought parts, Bedrock reasoningContent, then the answer
# Not server faults: the demo's caller stops after a couple of deltas and closes the stream, or its task is
# cancelled after the first delta (async callers only).
ABANDON: Final = "abandon"
CANCEL: Final = "cancel"

SERVER_FAULTS: Final = (
    OK,
    SLOW_FIRST,
    STALL,
    CUT,
    RESET,
    FAILED,
    INCOMPLETE,
    ERROR,
    KEEPALIVE,
    SEQ_GAP,
    SEQ_DUP,
    TRAILING_DONE,
    HTTP_500,
    HTTP_429,
    OVERLOADED,
    NO_HEADERS,
    REASONING,
)
CALLER_FAULTS: Final = (ABANDON, CANCEL)
FAULTS: Final = (*SERVER_FAULTS, *CALLER_FAULTS)

_SSE_SURFACES: Final = (names.RESPONSES, names.CHAT_COMPLETIONS, names.COMPLETIONS, names.MESSAGES)
_CLOUD: Final = (names.GENERATE_CONTENT, names.CONVERSE)  # google-genai and boto3 / aiobotocore
_HTTP: Final = (*_SSE_SURFACES, *_CLOUD)  # a request, a status, a body: HTTP-level faults apply
_ALL: Final = (*_HTTP, names.RESPONSES_WEBSOCKET)
_SEQUENCED: Final = (names.RESPONSES, names.RESPONSES_WEBSOCKET)  # the surfaces that carry sequence_number

# Where the fake provider can serve each fault. A request for a fault outside its row is answered with
# HTTP 400 (SSE) or an `error` event with code `otelstream_unsupported_fault` (WebSocket), never silently `ok`.
SURFACES_BY_FAULT: Final[Mapping[str, tuple[str, ...]]] = {
    OK: _ALL,
    SLOW_FIRST: _ALL,
    STALL: _ALL,
    CUT: _ALL,  # WebSocket: the server closes the socket normally (1000) while the response is open
    RESET: _ALL,  # WebSocket: the TCP connection is aborted (close code 1006 on the client)
    FAILED: _SEQUENCED,  # only the Responses API has a `failed` terminal event
    INCOMPLETE: _ALL,
    ERROR: _ALL,
    KEEPALIVE: _SSE_SURFACES,  # WebSocket keepalive is protocol-level ping, invisible to the SDK
    SEQ_GAP: _SEQUENCED,
    SEQ_DUP: _SEQUENCED,
    TRAILING_DONE: (names.RESPONSES,),
    HTTP_500: _HTTP,
    HTTP_429: _HTTP,
    OVERLOADED: _HTTP,  # Gemini and Bedrock: 503 (UNAVAILABLE, ServiceUnavailableException)
    NO_HEADERS: _HTTP,
    REASONING: _CLOUD,
    ABANDON: _ALL,
    CANCEL: _HTTP,
}
# What Bedrock's InvokeModelWithResponseStream serves for an Anthropic model (its chunks are Messages events, the
# `messages` surface): no keepalive (the event stream has none).
INVOKE_FAULTS: Final = (OK, SLOW_FIRST, STALL, CUT, RESET, INCOMPLETE, ERROR, HTTP_500, HTTP_429, OVERLOADED,
                        NO_HEADERS, ABANDON, CANCEL)  # fmt: skip

# What otelstream must report for a stream served with each fault (docs/telemetry.md outcomes).
EXPECTED_OUTCOME: Final[Mapping[str, str]] = {
    OK: names.COMPLETED,
    SLOW_FIRST: names.COMPLETED,
    STALL: names.COMPLETED,
    CUT: names.CUT,
    RESET: names.TRANSPORT_ERROR,
    FAILED: names.FAILED,
    INCOMPLETE: names.INCOMPLETE,
    ERROR: names.ERROR,
    KEEPALIVE: names.COMPLETED,
    SEQ_GAP: names.COMPLETED,  # a protocol deviation is an anomaly, not a bad outcome
    SEQ_DUP: names.COMPLETED,
    TRAILING_DONE: names.COMPLETED,
    HTTP_500: names.HTTP_ERROR,
    HTTP_429: names.HTTP_ERROR,
    OVERLOADED: names.HTTP_ERROR,
    NO_HEADERS: names.HTTP_ERROR,  # the read timeout fires before any stream exists
    REASONING: names.COMPLETED,
    ABANDON: names.ABANDONED,
    CANCEL: names.ABANDONED,
}

# The surfaces the demo drives each fault on. Narrower than SURFACES_BY_FAULT where the outcome a live observer
# reports is not pinned down by the contract (a WebSocket closed or aborted under an open response).
DEMO_SURFACES_BY_FAULT: Final[Mapping[str, tuple[str, ...]]] = {
    **SURFACES_BY_FAULT,
    CUT: _HTTP,
    RESET: _HTTP,
}

PRESETS: Final[Mapping[str, str]] = {
    # the default: mostly healthy traffic with every kind of trouble present, so each panel has something to show
    "default": (
        "ok=62,slow_first=6,stall=4,keepalive=4,cut=4,reset=3,failed=3,incomplete=4,error=4,"
        "seq_gap=2,seq_dup=1,trailing_done=1,http_500=1,http_429=1,overloaded=1,no_headers=1,abandon=2,reasoning=2,"
        "cancel=1"
    ),
    "healthy": "ok=96,slow_first=2,keepalive=2",
    "outage": "ok=40,http_500=10,overloaded=10,http_429=10,reset=10,cut=10,error=10",
    "everything": ",".join(f"{f}=1" for f in FAULTS),
}


def is_supported(fault: str, surface: str) -> bool:
    return surface in SURFACES_BY_FAULT.get(fault, ())


@dataclass(frozen=True, slots=True)
class FaultMix:
    """Relative weights per fault name, in the order given. Parse with :meth:`parse`."""

    weights: tuple[tuple[str, float], ...]

    @classmethod
    def parse(cls, spec: str | Mapping[str, float] | FaultMix | None) -> FaultMix:
        """``None`` → the default preset; a preset name; ``a=70,b=5``; a bare fault name (= 100 % of it)."""
        if isinstance(spec, FaultMix):
            return spec
        if spec is None:
            spec = PRESETS["default"]
        if isinstance(spec, Mapping):
            items: Iterable[tuple[str, float]] = ((str(k), float(v)) for k, v in spec.items())
        else:
            text = PRESETS.get(spec.strip(), spec)
            items = [_parse_item(part) for part in text.split(",") if part.strip()]
        weights: dict[str, float] = {}
        for name, weight in items:
            if name not in FAULTS:
                raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULTS)} (presets: {', '.join(PRESETS)})")
            if not weight >= 0:  # also rejects NaN
                raise ValueError(f"fault weight must be >= 0: {name}={weight}")
            weights[name] = weights.get(name, 0.0) + weight
        if not any(w > 0 for w in weights.values()):
            raise ValueError("fault mix has no positive weight")
        return cls(tuple((k, v) for k, v in weights.items() if v > 0))

    def counts(self, total: int) -> dict[str, int]:
        """Split ``total`` streams exactly by weight (largest remainder, ties in mix order): deterministic."""
        weight_sum = sum(w for _, w in self.weights)
        exact = [(name, total * w / weight_sum) for name, w in self.weights]
        counts = {name: int(x) for name, x in exact}
        left = total - sum(counts.values())
        by_remainder = sorted(range(len(exact)), key=lambda i: (-(exact[i][1] - int(exact[i][1])), i))
        for i in by_remainder[:left]:
            counts[exact[i][0]] += 1
        return counts

    def assign(self, total: int, rng: random.Random) -> list[str]:
        """Exactly ``counts(total)`` fault names, shuffled by ``rng`` (same seed → same list)."""
        faults = [name for name, n in self.counts(total).items() for _ in range(n)]
        rng.shuffle(faults)
        return faults

    def draw(self, rng: random.Random) -> str:
        """One fault at random by weight (the server-side mix, for callers that do not choose)."""
        return rng.choices([n for n, _ in self.weights], weights=[w for _, w in self.weights])[0]

    def spec(self) -> str:
        return ",".join(f"{name}={weight:g}" for name, weight in self.weights)


def _parse_item(part: str) -> tuple[str, float]:
    name, sep, value = part.strip().partition("=")
    if not sep:
        return name.strip(), 100.0
    try:
        return name.strip(), float(value)
    except ValueError:
        raise ValueError(f"bad fault weight in {part.strip()!r} (expected name=number)") from None


def expected_outcomes(faults: Sequence[str]) -> dict[str, int]:
    """Outcome counts the observer must report for streams served with ``faults``."""
    out: dict[str, int] = {}
    for fault in faults:
        outcome = EXPECTED_OUTCOME[fault]
        out[outcome] = out.get(outcome, 0) + 1
    return out
