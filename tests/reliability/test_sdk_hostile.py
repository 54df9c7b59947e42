"""Hostile bodies through the real SDKs (httpx2.MockTransport): instrumented, the caller sees exactly what it sees
uninstrumented — the same items and the same exception — and every stream gets exactly one report with a valid
outcome (one span, one count in ``otelstream_streams_total``, nothing dropped).

Bodies: every SSE capture and fixture whole, cut at event boundaries (± 1 byte) and at seeded points, with seeded
byte mutants, delivered in seeded chunks (half-written lines and events), plus random bytes, invalid UTF-8, a 10 MB
event, many tiny events, deeply nested JSON and absurd numbers.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from otelstream import names
from tests.reliability.harness import FIGURES, corpus_files, event_boundaries, label, mutations, scaled
from tests.support.body_clients import (
    AsyncBodies,
    AsyncClients,
    Bodies,
    Clients,
    Seen,
    run_async,
    surface_of,
)
from tests.support.instrumented import instrumented, outcome_of
from tests.support.surfaces import SSE_SURFACES

# Outcomes a stream can end in when the caller read it to the end (no close, no cancellation).
READ_TO_END = frozenset({names.COMPLETED, names.INCOMPLETE, names.FAILED, names.ERROR, names.CUT})
# When the SDK raised: the error's own outcome, or the terminal outcome already reached (an error after the answer
# was complete, e.g. garbage after `finish_reason`, leaves it unchanged) — never `cut` (that is a clean EOF).
RAISED = frozenset({names.ERROR, names.TRANSPORT_ERROR, names.COMPLETED, names.INCOMPLETE, names.FAILED})

Case = tuple[str, str, bytes, int]  # surface, description, body, chunking seed


def _variants(path: Path, surface: str) -> list[Case]:
    body = path.read_bytes()
    rng = random.Random(f"sdk:{path.name}")
    cases: list[Case] = [(surface, f"{label(path)} whole", body, 0)]
    bounds = event_boundaries(body, jsonl=False)
    picked = bounds if len(bounds) <= 6 else sorted(rng.sample(bounds, 6))
    for b in picked:
        for d in (-1, 0, 1):
            if 0 <= b + d < len(body):
                cases.append((surface, f"{label(path)} cut@{b + d}", body[: b + d], b + d))
    for _ in range(scaled(3)):
        c = rng.randrange(len(body) + 1)
        cases.append((surface, f"{label(path)} cut@{c}", body[:c], c))
    for what, mutant in mutations(body, rng, scaled(4)):
        cases.append((surface, f"{label(path)} {what}", mutant, rng.randrange(1000)))
    return cases


def _sse(obj: object, event: str | None = None) -> bytes:
    return (f"event: {event}\n" if event else "").encode() + b"data: " + json.dumps(obj).encode() + b"\n\n"


def _specials() -> list[Case]:
    rng = random.Random(11)
    out: list[Case] = []
    nested = "[" * 100_000 + "]" * 100_000
    big = "x" * (10 * 1024 * 1024)
    for surface in SSE_SURFACES:
        for i in range(scaled(5)):
            out.append((surface, f"random bytes #{i}", rng.randbytes(rng.randrange(1, 2000)), i))
        out.append((surface, "invalid utf-8", b'data: {"type": "\xff\xfe", "choices": [], "x": "\xc3"}\n\n', 0))
        out.append((surface, "lone surrogate", b'data: {"delta": "\xed\xa0\x80"}\n\n', 0))
        out.append((surface, "deep nesting", f'data: {{"type":"ping","n":{nested}}}\n\n'.encode(), 0))
        out.append((surface, "bare [DONE]", b"data: [DONE]\n\n", 0))
        out.append((surface, "empty body", b"", 0))
        out.append((surface, "only comments", b": keepalive\n\n" * 50, 0))
        out.append((surface, "event: ping without data", b"event: ping\n\n", 0))
        out.append((surface, "comment after id", b'id: 1\ndata: {"type":"ping"}\n\n: keepalive\n\n', 0))
    # one 10 MB event per SDK
    out.append((names.RESPONSES, "10 MB delta", _sse({"type": "response.output_text.delta", "sequence_number": 0,
                                                      "delta": big, "item_id": "m", "output_index": 0,
                                                      "content_index": 0}), 3))  # fmt: skip
    out.append((names.MESSAGES, "10 MB delta", _sse({"type": "content_block_delta", "index": 0,
                                                     "delta": {"type": "text_delta", "text": big}},
                                                    "content_block_delta"), 3))  # fmt: skip
    # absurd numbers
    huge = "9" * 4000
    absurd = b"".join(
        f'data: {{"type":"response.output_text.delta","sequence_number":{n},"delta":"x","item_id":"m",'
        f'"output_index":0,"content_index":0}}\n\n'.encode()
        for n in (huge, "-1", "1e400", "NaN", "-Infinity")
    )
    out.append((names.RESPONSES, "absurd sequence numbers", absurd, 0))
    out.append((names.CHAT_COMPLETIONS, "NaN usage", b'data: {"id":"c","object":"chat.completion.chunk",'
                b'"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],'
                b'"usage":{"prompt_tokens":NaN,"completion_tokens":Infinity}}\n\ndata: [DONE]\n\n', 0))  # fmt: skip
    return out


def _cases() -> list[Case]:
    cases: list[Case] = []
    for path in corpus_files():
        surface = surface_of(path)
        if surface is not None:
            cases.extend(_variants(path, surface))
    return cases + _specials()


def _check(cases: list[Case], before: list[Seen], after: list[Seen], spans: list[object]) -> None:
    mismatches = [(c[1], b.short, a.short) for c, b, a in zip(cases, before, after, strict=True) if b != a]
    assert not mismatches, f"{len(mismatches)} streams differ when instrumented, e.g. {mismatches[:5]}"
    by_model: dict[str, list[object]] = {}
    for span in spans:
        model = str((span.attributes or {}).get(names.ATTR_REQUEST_MODEL))  # type: ignore[attr-defined]
        by_model.setdefault(model, []).append(span)
    for i, (case, seen) in enumerate(zip(cases, after, strict=True)):
        got = by_model.get(f"m{i}", [])
        assert len(got) == 1, f"{case[1]}: {len(got)} spans (exactly one report per stream)"
        outcome = outcome_of(got[0])  # type: ignore[arg-type]
        allowed = RAISED if seen.error is not None else READ_TO_END
        assert outcome in allowed, f"{case[1]}: outcome {outcome} but the caller saw {seen.short}"


@pytest.mark.slow
def test_hostile_bodies_sync_sdks() -> None:
    cases = _cases()
    handler = Bodies()
    plain = Clients(handler)
    before = [plain.consume(s, body, f"m{i}", seed) for i, (s, _, body, seed) in enumerate(cases)]
    with instrumented() as inst:
        after = [plain.consume(s, body, f"m{i}", seed) for i, (s, _, body, seed) in enumerate(cases)]
        spans = inst.finished()
        assert inst.streams_total() == len(cases)
        assert inst.dropped_total() == 0
    FIGURES["SDK (sync): hostile bodies streamed, uninstrumented vs instrumented"] += len(cases)
    _check(cases, before, after, spans)


@pytest.mark.slow
def test_hostile_bodies_async_sdks() -> None:
    rng = random.Random(5)
    cases = _cases()
    cases = [c for c in cases if "whole" in c[1] or "10 MB" not in c[1]]
    cases = rng.sample(cases, min(len(cases), scaled(400)))
    handler = AsyncBodies()

    async def run_all() -> list[Seen]:
        clients = AsyncClients(handler)
        return [await clients.consume(s, body, f"m{i}", seed) for i, (s, _, body, seed) in enumerate(cases)]

    before = run_async(run_all())
    with instrumented() as inst:
        after = run_async(run_all())
        spans = inst.finished()
        assert inst.streams_total() == len(cases)
        assert inst.dropped_total() == 0
    FIGURES["SDK (async): hostile bodies streamed, uninstrumented vs instrumented"] += len(cases)
    _check(cases, before, after, spans)


@pytest.mark.slow
def test_many_tiny_events_through_the_sdk() -> None:
    """Tiny events through the real SDK: every one counted, one report."""
    n = scaled(20_000)
    chunk = _sse({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                  "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]})  # fmt: skip
    body = chunk * n + b"data: [DONE]\n\n"
    handler = Bodies()
    clients = Clients(handler)
    with instrumented() as inst:
        seen = clients.consume(names.CHAT_COMPLETIONS, body, "m0", seed=0)
        spans = inst.finished()
    assert seen.error is None and len(seen.items) == n
    (span,) = spans
    attrs = span.attributes or {}
    assert attrs[names.ATTR_EVENTS] == n and attrs[names.ATTR_DELTAS] == n
    # no finish_reason ever came, but [DONE] is the server's explicit end
    assert outcome_of(span) == names.COMPLETED
    assert names.ANOM_MISSING_FINISH_REASON in {(e.attributes or {}).get(names.ATTR_ANOMALY_KIND) for e in span.events}
    FIGURES["SDK: tiny events in one stream"] = n
