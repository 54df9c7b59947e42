"""OpenAI Responses events (SSE and the WebSocket mode, whose events are the same plus ``stream_id``).

Every event carries ``type`` and ``sequence_number`` (from 0, +1 per event); deltas are ``response.*.delta`` with a
non-empty ``delta``; ``response.completed`` / ``response.failed`` / ``response.incomplete`` / ``error`` end a
response. Gateways may omit ``type`` (then the SSE ``event:`` name classifies it), append ``data: [DONE]``, or send
an ``{"error": …}`` object instead of an ``error`` event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otelstream import names
from otelstream.core.errors import code_text, error_fields, status_in_body
from otelstream.core.protocols._fields import (
    DELTA,
    KEEPALIVE,
    OTHER,
    REASONING,
    event_name,
    extra,
    fields,
    inband_error,
    name_response,
    nonempty,
    read_usage,
)

if TYPE_CHECKING:
    from otelstream.core.side_objects import Tokens
    from otelstream.core.state import StreamState

_K_OTHER, _K_DELTA, _K_LIFECYCLE, _K_COMPLETED, _K_INCOMPLETE, _K_FAILED, _K_ERROR, _K_PING, _K_REASONING = range(9)

_DELTA_TYPES = (
    "response.audio.delta",
    "response.audio.transcript.delta",
    "response.code_interpreter_call_code.delta",
    "response.custom_tool_call_input.delta",
    "response.function_call_arguments.delta",
    "response.mcp_call_arguments.delta",
    "response.output_text.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.refusal.delta",
    "response.shell_call_command.delta",
    "response.shell_call_output_content.delta",
)
_OTHER_TYPES = (
    "response.audio.done",
    "response.audio.transcript.done",
    "response.code_interpreter_call.completed",
    "response.code_interpreter_call.in_progress",
    "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call_code.done",
    "response.compaction.compacting",
    "response.content_part.added",
    "response.content_part.done",
    "response.custom_tool_call_input.done",
    "response.file_search_call.completed",
    "response.file_search_call.in_progress",
    "response.file_search_call.searching",
    "response.function_call_arguments.done",
    "response.image_generation_call.completed",
    "response.image_generation_call.generating",
    "response.image_generation_call.in_progress",
    "response.image_generation_call.partial_image",
    "response.mcp_call.completed",
    "response.mcp_call.failed",
    "response.mcp_call.in_progress",
    "response.mcp_call_arguments.done",
    "response.mcp_list_tools.completed",
    "response.mcp_list_tools.failed",
    "response.mcp_list_tools.in_progress",
    "response.output_item.added",
    "response.output_item.done",
    "response.output_text.annotation.added",
    "response.output_text.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.done",
    "response.reasoning_text.done",
    "response.refusal.done",
    "response.shell_call_command.added",
    "response.shell_call_command.done",
    "response.shell_call_output_content.done",
    "response.web_search_call.completed",
    "response.web_search_call.in_progress",
    "response.web_search_call.searching",
    # WebSocket mode only
    "response.steer.accepted",
    "response.steer.pending",
    "response.steer.failed",
)
DELTA_TYPES = frozenset(_DELTA_TYPES)  # the tracker's fast path checks these inline
# deltas of the model's reasoning: deltas, but not the answer a user waits for (TTFO counts the others)
REASONING_DELTA_TYPES = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})
_KIND: dict[str, int] = {t: _K_REASONING if t in REASONING_DELTA_TYPES else _K_DELTA for t in _DELTA_TYPES}
_KIND.update({t: _K_OTHER for t in _OTHER_TYPES})
_KIND.update(
    {
        "response.created": _K_LIFECYCLE,
        "response.in_progress": _K_LIFECYCLE,
        "response.queued": _K_LIFECYCLE,
        "response.completed": _K_COMPLETED,
        "response.incomplete": _K_INCOMPLETE,
        "response.failed": _K_FAILED,
        "error": _K_ERROR,
        "ping": _K_PING,
        "keepalive": _K_PING,
    }
)
KNOWN_TYPES = frozenset(_KIND)


def observe_responses(t: StreamState, d: dict[str, Any], name: object, ev: object = None) -> int:
    typ = d.get("type")
    response = None  # read only where it is used: lifecycle and terminal events
    if typ is None:
        response = d.get("response")
        # An event without `type` is built by the SDK as its union's first member, which keeps the fields that
        # member does not declare (`response` of a lifecycle event) as pydantic extras: read those too.
        extras = getattr(ev, "__pydantic_extra__", None) if ev is not d else None
        if type(extras) is dict and extras:
            d = {**d, **extras}
            response = d.get("response")
        if d.get("error"):
            # a gateway's in-band {"error": …} object, whatever its `event:` name: the SDK raises APIError for any
            # event whose `error` is truthy, so live this is where the stream ends
            inband_error(t, d["error"])
            return OTHER
        if response is None:
            response = d  # a gateway's untyped lifecycle event is the Response object itself (id, model, usage)
        typ = event_name(name)
        if typ is not None and typ != "ping":
            t.anomaly(names.ANOM_UNTYPED_EVENT, typ)
    kind = _KIND.get(typ) if type(typ) is str else None
    if kind == _K_PING:
        return KEEPALIVE
    seq = d.get("sequence_number")
    if seq == t.seq_next and type(seq) is int:
        t.seq_next = seq + 1  # in order, the common case: all the tracker's sequence() would do
    elif seq is not None or kind != _K_ERROR:
        t.sequence(seq)
    if kind == _K_OTHER:  # the commonest event here (output items, content parts, their ends): first
        if t.terminal:
            t.after_terminal()
        return OTHER
    if kind in (_K_DELTA, _K_REASONING):
        delta = d.get("delta")
        if type(delta) is str and delta:
            if t.terminal:  # new output after the end (an empty delta is none: no anomaly)
                t.after_terminal()
            after = t.client_filter_after
            # the .stream(response_id=…, starting_after=N) helper hides events up to N from the caller
            if after is None or (type(seq) is int and seq > after):
                return DELTA if kind == _K_DELTA else REASONING
        return OTHER
    if kind is None:
        if type(typ) is str and typ.endswith(".delta"):
            t.anomaly(names.ANOM_UNKNOWN_EVENT, typ[:80])
            if not nonempty(d.get("delta")):
                return OTHER
            return REASONING if "reasoning" in typ else DELTA
        t.anomaly(names.ANOM_UNKNOWN_EVENT, typ[:80] if type(typ) is str else "event without type")
        return OTHER
    if kind == _K_ERROR:
        # SSE `error` events carry code/message at the top level (their `type` is the event's); WebSocket ones nest
        # them under `error`, with the status beside it
        code, typ, status = error_fields(d.get("error"))
        if status is None:
            status = status_in_body(d.get("status"))
        t.error_seen((code_text(d.get("code")) or code, typ, status))
        t.outcome_seen(names.ERROR, terminal=True)
        return OTHER
    # OpenAI follows an `error` event with `response.failed` (the recorded insufficient_quota stream does): that
    # pair is the protocol, not the server talking after the end
    if t.terminal and not (kind == _K_FAILED and t.saw_error()):
        t.after_terminal()
    if response is None:
        response = d.get("response")
    _response(t, response)
    if kind == _K_COMPLETED:
        t.add_finish_reason("stop")
        t.outcome_seen(names.COMPLETED, terminal=True)
    elif kind == _K_INCOMPLETE:
        details = fields(fields(response).get("incomplete_details"))
        reason = details.get("reason")
        t.add_finish_reason(reason if isinstance(reason, str) and reason else "length")
        t.outcome_seen(names.INCOMPLETE, terminal=True)
    elif kind == _K_FAILED:
        t.error_seen(error_fields(fields(response).get("error")))
        t.set_error_type(names.FAILED)  # when the error named nothing
        t.add_finish_reason("error")
        t.outcome_seen(names.FAILED, terminal=True)
    return OTHER


def _response(t: StreamState, response: object) -> None:
    """Identity and usage from the Response object embedded in lifecycle and terminal events."""
    r = fields(response)
    if not r:
        return
    if t.response_id is None or t.response_model is None:  # the first non-empty values: once both are known, done
        name_response(t, r)
    tier = r.get("service_tier")  # the created event says what was asked ("auto"), the terminal one what served it
    if isinstance(tier, str) and tier:
        t.service_tier = tier[:64]
    usage = r.get("usage")
    if usage is not None:
        read_usage(t, usage, _counts)


def _counts(t: StreamState, u: dict[str, Any], n: Tokens) -> None:
    v = u.get("input_tokens")
    n.usage_input = t.tokens(v, "input_tokens")
    v = u.get("output_tokens")
    n.usage_output = t.tokens(v, "output_tokens")
    in_details = u.get("input_tokens_details")
    di = fields(in_details)  # once for both of its counts
    v = di.get("cached_tokens")
    n.usage_cache_read = t.tokens(v, "cached_tokens")
    # Bedrock's cache writes: not a field of the SDK's model, so an extra there (field_or_extra, on the fields read)
    v = di.get("cache_write_tokens")
    if v is None:
        v = extra(in_details, "cache_write_tokens")
    n.usage_cache_write = t.tokens(v, "cache_write_tokens")
    v = fields(u.get("output_tokens_details")).get("reasoning_tokens")
    n.usage_reasoning = t.tokens(v, "reasoning_tokens")
