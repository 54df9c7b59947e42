"""Anthropic Messages events.

``message_start`` carries the id, model and input usage; ``content_block_delta`` is a delta when its text /
thinking / partial_json / citation payload is non-empty (``signature_delta`` is not output; thinking is reasoning, not
yet the answer); ``message_delta`` carries ``stop_reason`` and the *cumulative* usage (assign, never add);
``message_stop`` ends the answer; an ``error`` event is an in-band error after HTTP 200; ``ping`` is a keepalive.
There are no sequence numbers.
Reported input tokens = input + cache read + cache write, as the semantic conventions require.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otelstream import names
from otelstream.core.errors import error_fields
from otelstream.core.protocols._fields import (
    DELTA,
    EMPTY,
    KEEPALIVE,
    OTHER,
    REASONING,
    event_name,
    fields,
    inband_error,
    input_with_cache,
    name_response,
    read_usage,
)

if TYPE_CHECKING:
    from otelstream.core.side_objects import Tokens
    from otelstream.core.state import StreamState

# per delta type, its payload's key and what a non-empty payload is
_PAYLOAD = {
    "text_delta": ("text", DELTA),
    "thinking_delta": ("thinking", REASONING),
    "input_json_delta": ("partial_json", DELTA),
    "citations_delta": ("citation", DELTA),
}
_NO_PAYLOAD = (None, OTHER)
_COMPLETE_REASONS = frozenset({"end_turn", "tool_use", "stop_sequence", "pause_turn"})
_INCOMPLETE_REASONS = frozenset({"max_tokens", "model_context_window_exceeded", "refusal"})
_OTHER_TYPES = frozenset({"content_block_start", "content_block_stop"})


def observe_messages(t: StreamState, d: dict[str, Any], name: object, ev: object = None) -> int:
    typ = d.get("type")
    if typ is None:
        typ = event_name(name)
        if typ is not None and typ != "ping":
            t.anomaly(names.ANOM_UNTYPED_EVENT, str(typ)[:80])
    if typ == "content_block_delta":
        delta = d.get("delta")
        try:
            dd = delta.__dict__
        except AttributeError:
            dd = delta if type(delta) is dict else EMPTY
        try:
            key, kind = _PAYLOAD.get(dd.get("type"), _NO_PAYLOAD)  # type: ignore[arg-type]
        except TypeError:  # an unhashable delta type
            return OTHER
        if key is None:
            return OTHER
        payload = dd.get(key)
        if not payload or (type(payload) is not str and key != "citation"):
            return OTHER
        if t.terminal:  # new output after message_stop (an empty delta is no new output: no anomaly)
            t.after_terminal()
        return kind
    if type(typ) is not str and typ is not None:
        # a non-string type (a list, a dict) must not reach the frozenset lookup below: unhashable.
        # Checked after the delta branch so the per-delta path pays nothing for it.
        t.anomaly(names.ANOM_BAD_FIELD, "type")
        return OTHER
    if typ in _OTHER_TYPES:
        return OTHER
    if typ == "ping":
        return KEEPALIVE
    if typ == "message_start":
        message = fields(d.get("message"))
        # the first non-empty values: a second message_start does not rename the response
        name_response(t, message)
        read_usage(t, message.get("usage"), _counts)
        return OTHER
    if typ == "message_delta":
        reason = fields(d.get("delta")).get("stop_reason")
        if isinstance(reason, str):
            t.add_finish_reason(reason)
            if reason in _INCOMPLETE_REASONS:
                t.outcome_seen(names.INCOMPLETE, terminal=False)
        read_usage(t, d.get("usage"), _counts)
        return OTHER
    if typ == "message_stop":
        if t.terminal:
            t.after_terminal()
        t.outcome_seen(names.COMPLETED, terminal=True)
        return OTHER
    if typ == "error":
        t.error_seen(error_fields(d.get("error")))
        t.outcome_seen(names.ERROR, terminal=True)
        return OTHER
    if typ is None and d.get("error") is not None:
        inband_error(t, d["error"])
        return OTHER
    t.anomaly(names.ANOM_UNKNOWN_EVENT, str(typ)[:80])
    return OTHER


def _counts(t: StreamState, u: dict[str, Any], n: Tokens) -> None:
    # message_delta usage is cumulative: every present field replaces the previous value
    out = u.get("output_tokens")
    if out is not None:
        n.usage_output = t.tokens(out, "output_tokens")
    raw_input = u.get("input_tokens")
    cache_read = u.get("cache_read_input_tokens")
    cache_write = u.get("cache_creation_input_tokens")
    if raw_input is not None:
        n.usage_input_raw = t.tokens(raw_input, "input_tokens")
    if cache_read is not None:
        n.usage_cache_read = t.tokens(cache_read, "cache_read_input_tokens")
    if cache_write is not None:
        n.usage_cache_write = t.tokens(cache_write, "cache_creation_input_tokens")
    # newer servers report thinking tokens as output_tokens_details.thinking_tokens (message_delta, cumulative)
    details = u.get("output_tokens_details")
    if details is not None:
        thinking = fields(details).get("thinking_tokens")
        if thinking is not None:
            n.usage_reasoning = t.tokens(thinking, "thinking_tokens")
    input_with_cache(t, n)
