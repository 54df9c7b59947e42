"""OpenAI Chat Completions chunks and legacy Completions chunks (and every OpenAI-compatible server's).

A delta is non-empty ``delta.content`` (a string, or a list of content parts one of which carries text, thinking or
reasoning: how some compatible servers stream a reasoning model's thinking) / ``refusal`` / ``reasoning_content`` /
``reasoning`` / ``tool_calls[].function.arguments`` (chat) or ``choices[].text`` (legacy). The first chunk is usually
role-only: not a delta. The answer is complete when every choice has a ``finish_reason`` and, when usage was
requested, the ``choices: []`` usage chunk arrived, or when the server's ``[DONE]`` says so (the tracker's
``done_sentinel``). An ``{"error": …}`` object after HTTP 200 is an in-band error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otelstream import names
from otelstream.core.protocols._fields import (
    DELTA,
    EMPTY,
    KEEPALIVE,
    OTHER,
    REASONING,
    extra,
    fields,
    inband_error,
    listed,
    name_response,
    nonempty,
    read_usage,
)

if TYPE_CHECKING:
    from otelstream.core.side_objects import Tokens
    from otelstream.core.state import StreamState

_INCOMPLETE_REASONS = frozenset({"length", "content_filter", "max_tokens"})
_ERROR_REASONS = frozenset(names.ERROR_FINISH_REASONS)
# docs/telemetry.md: an aborted generation is the server's failure; recorded as the type of the error it stands for
_ABORT_TYPE = names.EC_SERVER_ERROR
_PART_KEYS = ("text", "thinking", "reasoning")
_REASONING_PARTS = frozenset({"thinking", "reasoning"})
_MAX_PART_DEPTH = 3  # a thinking part nests its text parts: [{"type": "thinking", "thinking": [{"text": …}]}]


def _parts_kind(parts: list[Any], depth: int = 0) -> int:
    """What a list of content parts carries: DELTA when one part has non-empty text, else REASONING when one has
    non-empty thinking or reasoning (a thinking part's nested text parts included, to a bounded depth), else OTHER."""
    kind = OTHER
    for part in parts:
        f = fields(part)
        reasoning = f.get("type") in _REASONING_PARTS
        for key in _PART_KEYS:
            value = f.get(key)
            if type(value) is str:
                found = (DELTA if key == "text" else REASONING) if value else OTHER
            elif type(value) is list and depth < _MAX_PART_DEPTH:
                found = _parts_kind(value, depth + 1)
                if found != OTHER and key != "text":
                    found = REASONING
            else:
                continue
            if found == DELTA and not reasoning:
                return DELTA
            if found != OTHER:
                kind = REASONING
    return kind


def _chat_delta_rest(delta: object, dl: dict[str, Any]) -> int:
    """The rarer delta payloads, once ``content`` was found not to be a non-empty string: DELTA, REASONING or
    OTHER."""
    content = dl.get("content")
    kind = _parts_kind(content) if type(content) is list else OTHER
    if kind == DELTA:
        return DELTA
    refusal = dl.get("refusal")
    if isinstance(refusal, str) and refusal:
        return DELTA
    calls = dl.get("tool_calls")
    if calls and type(calls) is list:
        for call in calls:
            if nonempty(fields(fields(call).get("function")).get("arguments")):
                return DELTA
    # vendor reasoning fields (DeepSeek, vLLM, OpenRouter, Groq) are extras outside the SDK model: read only when
    # there are extras (an SDK model's are an empty dict on OpenAI's own chunks)
    ex = dl if type(delta) is dict else getattr(delta, "__pydantic_extra__", None)
    if ex and type(ex) is dict and (nonempty(ex.get("reasoning_content")) or nonempty(ex.get("reasoning"))):
        return REASONING
    return kind


def observe_completions(t: StreamState, d: dict[str, Any], name: object, ev: object = None) -> int:
    return observe_chat(t, d, name, ev, False)


def observe_chat(t: StreamState, d: dict[str, Any], name: object, ev: object = None, chat: bool = True) -> int:
    """Chat chunks (``chat=False``: legacy completions chunks, whose payload is ``choices[].text``)."""
    err = d.get("error")
    if err is not None:
        inband_error(t, err)
        # gateways (OpenRouter) put the final usage on the error chunk itself: it is still what was billed
        usage = d.get("usage")
        if usage is not None:
            _usage(t, usage)
        return OTHER
    if name is not None:  # event_name, inline: read on every chunk that reaches the general path
        if type(name) is not str:
            name = getattr(name, "event", None)
        if name == "ping":
            return KEEPALIVE
    if t.response_id is None or t.response_model is None:
        # the first non-empty values: Azure's first chunk (prompt_filter_results) has id and model ""
        name_response(t, d)
        # read here, until the chunks named the response: every chunk repeats them, none needs reading per event
        tier = d.get("service_tier")
        if isinstance(tier, str) and tier:
            t.service_tier = tier[:64]
        fingerprint = d.get("system_fingerprint")
        if isinstance(fingerprint, str) and fingerprint:
            t.system_fingerprint = fingerprint[:128]
    if t.usage_requested is None and ev is d and "usage" in d and d["usage"] is None:
        # decoded JSON: chunks carry a null usage key until the last only when usage was requested (a model cannot
        # tell absent from null); known before a finish in the same chunk is judged
        t.usage_requested = True
    kind = OTHER  # DELTA as soon as one choice carries output, else REASONING when one carries reasoning
    finish_seen = False
    choices = d.get("choices")
    if choices:
        was_terminal = t.terminal
        for choice in listed(t, choices, "choices"):  # none when not a list: then no output, nothing reopened
            try:
                c = choice.__dict__
            except AttributeError:
                if type(choice) is not dict:
                    t.anomaly(names.ANOM_BAD_FIELD, "choice")
                    continue
                c = choice
            if kind != DELTA:
                if chat:
                    delta = c.get("delta")
                    try:
                        dl = delta.__dict__
                    except AttributeError:
                        dl = delta if type(delta) is dict else EMPTY
                    content = dl.get("content")
                    if type(content) is str and content != "":
                        kind = DELTA
                    elif (found := _chat_delta_rest(delta, dl)) != OTHER:
                        kind = found
                else:
                    text = c.get("text")
                    if type(text) is str and text != "":
                        kind = DELTA
            index = c.get("index", 0)
            if index != t.last_choice:  # the same choice as the chunk before: known already
                index = t.choice_seen(index)
            reason = c.get("finish_reason")
            if reason is not None and index is not None and isinstance(reason, str):
                finish_seen = True
                _finished(t, index, reason)
        # new output after the answer ended (a choice first seen now reopens it); a chunk without any (OpenRouter
        # repeats the finish_reason) is ordinary traffic
        if kind != OTHER and was_terminal and t.terminal:
            t.after_terminal()
    usage = d.get("usage")
    if usage is None and (finish_seen or not choices):
        # Groq (compound) reports usage only as x_groq.usage, on the last chunks: a vendor extra, read there only
        # (and only when the model has extras at all)
        obj = ev if ev is not None else d
        ex = obj if type(obj) is dict else getattr(obj, "__pydantic_extra__", None)
        if ex and type(ex) is dict:
            usage = fields(ex.get("x_groq")).get("usage")
    if usage is not None:
        _usage(t, usage)
    if t.usage_seen and t.all_choices_finished():
        _complete(t)
    return kind


def _finished(t: StreamState, index: int, reason: str) -> None:
    if reason in _INCOMPLETE_REASONS:
        t.outcome_seen(names.INCOMPLETE, terminal=False)
    elif reason in _ERROR_REASONS:
        # an aborted or failed generation (vLLM: "abort"), then usually [DONE]: error, whatever completes the stream
        t.error_seen((reason[:64], _ABORT_TYPE, None))
        t.outcome_seen(names.ERROR, terminal=False)
    if t.choice_finished(index, reason) and (t.usage_seen or not t.usage_requested):
        _complete(t)


def _complete(t: StreamState) -> None:
    if not t.terminal:
        t.outcome_seen(names.COMPLETED, terminal=True)


def _usage(t: StreamState, usage: object) -> None:
    # the counts need the usage object itself besides its fields: its vendor extras
    read_usage(t, usage, lambda t, u, n: _counts(t, usage, u, n))


def _counts(t: StreamState, usage: object, u: dict[str, Any], n: Tokens) -> None:
    v = u.get("prompt_tokens")
    n.usage_input = t.tokens(v, "prompt_tokens")
    v = u.get("completion_tokens")
    n.usage_output = t.tokens(v, "completion_tokens")
    # the vendor extras of the usage object, read once (an SDK model's are an empty dict on OpenAI's own usage)
    ex = u if type(usage) is dict else getattr(usage, "__pydantic_extra__", None)
    if not ex or type(ex) is not dict:
        ex = EMPTY
    details = u.get("prompt_tokens_details")
    df = fields(details) if details is not None else EMPTY
    cached = df.get("cached_tokens")
    if cached is None:
        cached = ex.get("cached_tokens")  # Together reports it at the top level of usage
    if cached is None:
        cached = ex.get("cache_read_input_tokens")  # servers proxying Anthropic caching
    n.usage_cache_read = t.tokens(cached, "cached_tokens")
    # cache writes, where servers report them (gateways proxying Anthropic caching)
    written = df.get("cache_write_tokens")  # declared by newer SDK models, an extra in older ones
    if written is None and details is not None:
        written = extra(details, "cache_write_tokens")
    if written is None:
        written = ex.get("cache_creation_input_tokens")
    if written is not None:
        n.usage_cache_write = t.tokens(written, "cache_write_tokens")
    cd = u.get("completion_tokens_details")
    n.usage_reasoning = t.tokens(fields(cd).get("reasoning_tokens"), "reasoning_tokens") if cd is not None else None
