"""Expectations read off what a server actually sent (the fake provider records every body it serves)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from otelstream import names


@dataclass(frozen=True)
class WireEvent:
    name: str | None
    data: Any  # parsed JSON, or the raw string ([DONE], undecodable)


def sse_events(body: bytes) -> tuple[list[WireEvent], int]:
    """(events, comment-only blocks) of an SSE body as sent (LF line ends, as the fake provider writes them)."""
    events: list[WireEvent] = []
    comments = 0
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        name = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if not data:
            comments += 1
            continue
        text = "\n".join(data)
        try:
            events.append(WireEvent(name, json.loads(text)))
        except ValueError:
            events.append(WireEvent(name, text))
    return events, comments


def jsonl_events(body: bytes) -> list[WireEvent]:
    return [WireEvent(None, json.loads(line)) for line in body.decode().splitlines() if line.strip()]


def is_delta(surface: str, data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    if surface in (names.RESPONSES, names.RESPONSES_WEBSOCKET):
        return str(data.get("type", "")).endswith(".delta") and bool(data.get("delta"))
    if surface == names.CHAT_COMPLETIONS:
        return any((c.get("delta") or {}).get("content") for c in data.get("choices") or [])
    if surface == names.COMPLETIONS:
        return any(c.get("text") for c in data.get("choices") or [])
    delta = data.get("delta") if data.get("type") == "content_block_delta" else None
    return isinstance(delta, dict) and bool(delta.get("text"))


def is_inband_error(surface: str, ev: WireEvent) -> bool:
    d = ev.data
    if not isinstance(d, dict):
        return False
    if surface == names.MESSAGES:
        return ev.name == "error"
    return "error" in d and d.get("type") in (None, "error") and surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS)


@dataclass(frozen=True)
class Expected:
    events: int
    deltas: int
    pings: int
    done: bool
    input_tokens: int | None
    output_tokens: int | None
    first_seq: int | None


def expected(surface: str, events: list[WireEvent], *, after: int | None = None) -> Expected:
    """What the live report must say for these wire events: ``[DONE]`` and ``event: ping`` are not events; an in-band
    error the SDK raises on is never yielded (chat/completions ``{"error": …}``, Anthropic ``event: error``), and the
    SDK stops reading there. ``after``: the client-side resume filter (deltas up to it do not count)."""
    n = deltas = pings = 0
    done = False
    inp = out = None
    first_seq = None
    for ev in events:
        d = ev.data
        if d == "[DONE]":
            done = True
            if surface != names.MESSAGES:
                break
            continue
        if surface == names.MESSAGES and ev.name == "ping":
            pings += 1
            continue
        if is_inband_error(surface, ev):
            break
        n += 1
        if not isinstance(d, dict):
            continue
        seq = d.get("sequence_number")
        if first_seq is None and isinstance(seq, int):
            first_seq = seq
        if is_delta(surface, d) and (after is None or (isinstance(seq, int) and seq > after)):
            deltas += 1
        usage: Any = None
        if surface in (names.RESPONSES, names.RESPONSES_WEBSOCKET):
            usage = (d.get("response") or {}).get("usage") if isinstance(d.get("response"), dict) else None
            if usage:
                inp, out = usage.get("input_tokens"), usage.get("output_tokens")
        elif surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS):
            usage = d.get("usage")
            if usage:
                inp, out = usage.get("prompt_tokens"), usage.get("completion_tokens")
        else:
            if d.get("type") == "message_start":
                u = d["message"]["usage"]
                inp = u["input_tokens"] + (u.get("cache_read_input_tokens") or 0) + (
                    u.get("cache_creation_input_tokens") or 0)  # fmt: skip
                out = u.get("output_tokens")
            elif d.get("type") == "message_delta" and d.get("usage"):
                out = d["usage"].get("output_tokens", out)
    return Expected(n, deltas, pings, done, inp, out, first_seq)
