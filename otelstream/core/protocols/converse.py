"""AWS Bedrock ConverseStream events, as botocore's event stream yields them: one dict per event-stream message,
its one key the event type (``{"contentBlockDelta": {…}}``), exception messages alike (``{"throttlingException":
{"message": …}}``). ``core.bedrock`` builds the same dicts from decoded messages (``converse_event``).

A delta is a ``contentBlockDelta`` with non-empty ``text``, ``toolUse.input`` or ``citation`` (output) or
``reasoningContent.text`` (reasoning; a signature or redacted content is none). ``messageStop`` ends the answer: its
``stopReason`` ``end_turn`` / ``tool_use`` / ``stop_sequence`` is completed, ``max_tokens`` / ``guardrail_intervened``
/ ``content_filtered`` / ``model_context_window_exceeded`` incomplete, ``malformed_model_output`` /
``malformed_tool_use`` an error of that type. An exception message is an in-band error of its type. Usage comes in
the ``metadata`` event after ``messageStop`` (its absence is the end's ``usage_missing``): input = input + cache read
+ cache write, as for Anthropic. The stream names neither response nor model: the request's model and request id
stand for them.

A Bedrock invoke stream of a model family whose events otelstream does not read arrives here as ``{"chunk": …}``
events: each counted, none read, one ``unsupported_payload`` anomaly, and its outcome is what the transport says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otelstream import names
from otelstream.core.protocols._fields import DELTA, EMPTY, OTHER, REASONING, fields, input_with_cache, read_usage

if TYPE_CHECKING:
    from otelstream.core.side_objects import Tokens
    from otelstream.core.state import StreamState

COMPLETE_REASONS = frozenset({"end_turn", "tool_use", "stop_sequence"})
INCOMPLETE_REASONS = frozenset({"max_tokens", "guardrail_intervened", "content_filtered",
                                "model_context_window_exceeded"})  # fmt: skip
ERROR_REASONS = frozenset({"malformed_model_output", "malformed_tool_use"})
EXCEPTION_TYPES = frozenset(
    {"internalServerException", "modelStreamErrorException", "validationException", "throttlingException",
     "serviceUnavailableException", "modelTimeoutException"}
)  # fmt: skip
INVOKE_CHUNK = "chunk"  # an invoke stream's event: the model family's own event, base64 in "bytes"
_OTHER_TYPES = frozenset({"messageStart", "contentBlockStart", "contentBlockStop"})


def event_type_of(d: dict[str, Any]) -> tuple[object, Any]:
    """The event's type (its one key) and its body."""
    for key, body in d.items():
        return key, body
    return None, None


def observe_converse(t: StreamState, d: dict[str, Any], name: object, ev: object = None) -> int:
    typ, body = event_type_of(d)
    if typ == "contentBlockDelta":
        delta = fields(fields(body).get("delta"))
        kind = _delta_kind(delta) if delta is not EMPTY else OTHER
        if kind != OTHER and t.terminal:
            t.after_terminal()
        return kind
    if t.response_model is None and t.start.request_model:
        # the stream names no model: the request's stands for it, and its request id for the response's id
        t.response_model = t.start.request_model[:128]
        if t.response_id is None and t.request_id:
            t.response_id = t.request_id[:128]
    if type(typ) is not str:
        t.anomaly(names.ANOM_BAD_FIELD, "event without a type" if typ is None else "event type")
        return OTHER
    if typ in _OTHER_TYPES:
        return OTHER
    if typ == "messageStop":
        reason = fields(body).get("stopReason")
        if t.terminal:
            t.after_terminal()
        if isinstance(reason, str) and reason:
            t.add_finish_reason(reason)
            if reason in INCOMPLETE_REASONS:
                t.outcome_seen(names.INCOMPLETE, terminal=True)
                return OTHER
            if reason in ERROR_REASONS:
                t.error_seen((reason[:64], None, None))
                t.outcome_seen(names.ERROR, terminal=True)
                return OTHER
            if reason not in COMPLETE_REASONS:
                t.anomaly(names.ANOM_UNKNOWN_EVENT, f"stopReason {reason}"[:80])
        t.outcome_seen(names.COMPLETED, terminal=True)
        return OTHER
    if typ == "metadata":
        meta = fields(body)
        read_usage(t, meta.get("usage"), _counts)
        latency = fields(meta.get("metrics")).get("latencyMs")
        if type(latency) is int and 0 <= latency < 2**63:
            t.provider_latency_ms = latency
        return OTHER
    if typ in EXCEPTION_TYPES or typ.endswith("Exception"):
        t.error_seen((typ[:64], None, None))
        t.outcome_seen(names.ERROR, terminal=True)
        return OTHER
    if typ == INVOKE_CHUNK:
        if not is_unsupported_payload(t):
            t.anomaly(names.ANOM_UNSUPPORTED_PAYLOAD, "invoke stream of a model family otelstream does not read")
        return OTHER
    t.anomaly(names.ANOM_UNKNOWN_EVENT, typ[:80])
    return OTHER


# a delta's block kinds whose string is nested: (the block, its string's key, what a non-empty string is)
_NESTED_KINDS = (("toolUse", "input", DELTA), ("reasoningContent", "text", REASONING))


def _delta_kind(delta: dict[str, Any]) -> int:
    text = delta.get("text")
    if type(text) is str and text:
        return DELTA
    if delta.get("citation"):
        return DELTA
    for block, key, kind in _NESTED_KINDS:  # output (tool arguments) before reasoning
        value = delta.get(block)
        if value is not None:
            nested = fields(value).get(key)
            if type(nested) is str and nested:
                return kind
    return OTHER


def _counts(t: StreamState, u: dict[str, Any], n: Tokens) -> None:
    n.usage_output = t.tokens(u.get("outputTokens"), "outputTokens")
    n.usage_input_raw = t.tokens(u.get("inputTokens"), "inputTokens")
    n.usage_cache_read = t.tokens(u.get("cacheReadInputTokens"), "cacheReadInputTokens")
    n.usage_cache_write = t.tokens(u.get("cacheWriteInputTokens"), "cacheWriteInputTokens")
    input_with_cache(t, n)


def is_unsupported_payload(t: StreamState) -> bool:
    """Whether this stream's events were an invoke payload otelstream does not read (its outcome is then the
    transport's: a clean end of the body completes it)."""
    r = t._rare
    counts = r._anomaly_counts if r is not None else None
    return bool(counts) and names.ANOM_UNSUPPORTED_PAYLOAD in counts  # type: ignore[operator]
