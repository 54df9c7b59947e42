"""Google Gemini ``streamGenerateContent`` chunks (Gemini API and Vertex AI): one ``GenerateContentResponse`` per
event, as decoded JSON (camelCase keys) or as google-genai's model of it (snake_case fields, read as well).

A delta is a candidate part with non-empty ``text`` (reasoning when the part has ``thought: true``), or a
``functionCall``, ``executableCode``, ``codeExecutionResult`` or ``inlineData``; a part carrying only a
``thoughtSignature`` is none. The answer is complete when every candidate seen has a ``finishReason``: ``STOP`` on
all of them is completed, ``MAX_TOKENS`` or a filter is incomplete, any other reason an error of that type. A prompt
blocked before any candidate (``promptFeedback.blockReason``) is incomplete, its block reason the finish reason. A
top-level ``error`` object is an in-band error (its ``status``, else its ``code``). Usage is the last
``usageMetadata`` (proto3 JSON: a count left out of it is 0): input = prompt + tool-use prompt tokens, output =
candidates + thoughts tokens. No keepalives, no sequence numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otelstream import names
from otelstream.core.errors import ErrorFields, code_text, status_in_body
from otelstream.core.protocols._fields import DELTA, EMPTY, OTHER, REASONING, fields, listed, read_usage

if TYPE_CHECKING:
    from otelstream.core.side_objects import Tokens
    from otelstream.core.state import StreamState

COMPLETE_REASONS = frozenset({"STOP"})
INCOMPLETE_REASONS = frozenset(
    {"MAX_TOKENS", "SAFETY", "RECITATION", "LANGUAGE", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
     "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR"}
)  # fmt: skip
# part fields whose presence is output (camelCase as sent, snake_case as google-genai's models name them)
_OUTPUT_PARTS = (
    ("functionCall", "function_call"),
    ("executableCode", "executable_code"),
    ("codeExecutionResult", "code_execution_result"),
    ("inlineData", "inline_data"),
)
_MAX_PARTS = 256  # parts read per candidate: a chunk carries a handful


def _get(f: dict[str, Any], camel: str, snake: str) -> Any:
    value = f.get(camel)
    return f.get(snake) if value is None else value


def observe_generate_content(t: StreamState, d: dict[str, Any], name: object, ev: object = None) -> int:
    err = d.get("error")
    if err is not None:
        _error(t, err)
        return OTHER
    if t.response_id is None or t.response_model is None:
        _name(t, d)
    kind = OTHER
    candidates = d.get("candidates")
    if candidates:
        was_terminal = t.terminal
        for cand in listed(t, candidates, "candidates"):  # none when not a list: then no output, nothing reopened
            c = fields(cand)
            if not c:
                t.anomaly(names.ANOM_BAD_FIELD, "candidate")
                continue
            if kind != DELTA:
                found = _parts_kind(fields(c.get("content")).get("parts"))
                if found != OTHER:
                    kind = found
            index = t.choice_seen(c.get("index", 0))
            reason = _get(c, "finishReason", "finish_reason")
            if index is not None and isinstance(reason, str) and reason:
                _finished(t, index, reason)
        if kind != OTHER and was_terminal:
            t.after_terminal()  # new output after every candidate had finished
    else:
        feedback = _get(d, "promptFeedback", "prompt_feedback")
        if feedback is not None:
            block = _get(fields(feedback), "blockReason", "block_reason")
            if isinstance(block, str) and block and not t.terminal and t.last_choice is None:
                # blocked before any candidate: the answer ends here, cut by a filter
                t.add_finish_reason(block)
                t.outcome_seen(names.INCOMPLETE, terminal=True)
    usage = _get(d, "usageMetadata", "usage_metadata")
    if usage is not None:
        read_usage(t, usage, _counts)
    return kind


def _parts_kind(parts: object) -> int:
    """DELTA when a part carries output, else REASONING when one carries thought text, else OTHER."""
    if type(parts) is not list:
        return OTHER
    kind = OTHER
    for part in parts[:_MAX_PARTS]:
        p = fields(part)
        if p is EMPTY:
            continue
        text = p.get("text")
        if type(text) is str and text:
            if p.get("thought") is True:
                kind = REASONING
                continue
            return DELTA
        for camel, snake in _OUTPUT_PARTS:
            if _get(p, camel, snake) is not None:
                return DELTA
    return kind


def _finished(t: StreamState, index: int, reason: str) -> None:
    if reason in INCOMPLETE_REASONS:
        t.outcome_seen(names.INCOMPLETE, terminal=False)
    elif reason not in COMPLETE_REASONS:
        # a failed generation (MALFORMED_FUNCTION_CALL, OTHER, …): an error of that type
        t.error_seen((reason[:64], None, None))
        t.outcome_seen(names.ERROR, terminal=False)
    if t.choice_finished(index, reason) and not t.terminal:
        t.outcome_seen(names.COMPLETED, terminal=True)


def error_body_fields(err: object) -> ErrorFields:
    """A Gemini error object (``{"code": 429, "status": "RESOURCE_EXHAUSTED", "message": …}``, in-band or an HTTP
    error's body): its type is the status, else the code; a numeric code is the HTTP status the class falls back
    on."""
    if isinstance(err, str):
        return (code_text(err), None, None)
    f = fields(err)
    code = f.get("code")
    return (code_text(f.get("status")) or code_text(code), None, status_in_body(code))


def _error(t: StreamState, err: object) -> None:
    t.error_seen(error_body_fields(err))
    t.outcome_seen(names.ERROR, terminal=True)


def _name(t: StreamState, d: dict[str, Any]) -> None:
    rid = _get(d, "responseId", "response_id")
    if isinstance(rid, str) and rid and t.response_id is None:
        t.response_id = rid[:128]
    model = _get(d, "modelVersion", "model_version")
    if isinstance(model, str) and model and t.response_model is None:
        t.response_model = model[:128]


def _counts(t: StreamState, u: dict[str, Any], n: Tokens) -> None:
    """The counts of a ``usageMetadata``. Gemini's JSON is proto3's, which leaves out a count of 0: in a usage
    object that is present, an absent count was reported as 0 (Gemini reports no cache writes at all: unknown)."""
    prompt = t.tokens(_get(u, "promptTokenCount", "prompt_token_count"), "promptTokenCount") or 0
    tool = t.tokens(_get(u, "toolUsePromptTokenCount", "tool_use_prompt_token_count"), "toolUsePromptTokenCount") or 0
    out = t.tokens(_get(u, "candidatesTokenCount", "candidates_token_count"), "candidatesTokenCount") or 0
    thoughts = t.tokens(_get(u, "thoughtsTokenCount", "thoughts_token_count"), "thoughtsTokenCount") or 0
    # the last usageMetadata replaces everything before it (earlier chunks carry partial counts)
    n.usage_input = _sum(t, prompt, tool, "input")
    n.usage_output = _sum(t, out, thoughts, "output")
    n.usage_reasoning = thoughts
    n.usage_cache_read = t.tokens(_get(u, "cachedContentTokenCount", "cached_content_token_count"), "cached") or 0
    n.usage_cache_write = None


def _sum(t: StreamState, a: int, b: int, what: str) -> int | None:
    total = a + b
    return t.tokens(total, f"{what} tokens (sum)")
