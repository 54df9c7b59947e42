# ruff: noqa: E501  (the expectations table reads best one capture per line)
"""Every real capture in ../shared/captures through `otelstream check`, against expectations read off each capture
and its sidecar (`features` / `interesting`). The table is the specification; the code paths never read it.

Row: outcome, finish_reasons, error_type, events, deltas, keepalives,
     usage (input, output, cache_read, cache_write, reasoning), exact anomaly counts, (sequence first, last) or None,
     done_sentinel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest

from otelstream import offline
from tests.support.paths import CAPTURES


class E(NamedTuple):
    outcome: str
    finish_reasons: tuple[str, ...]
    error_type: str | None
    events: int
    deltas: int
    keepalives: int
    usage: tuple[int | None, int | None, int | None, int | None, int | None]
    anomalies: dict[str, int]
    sequence: tuple[int, int] | None
    done_sentinel: bool


UNSUPPORTED = "unsupported surface"

# fmt: off
EXPECTED: dict[str, Any] = {
    "anthropic/complete/claude-2-crlf.sse": UNSUPPORTED,
    "anthropic/messages/code-execution-thinking.sse": E("completed", ('end_turn',), None, 34, 19, 1, (4714, 304, 0, 0, None), {}, None, False),
    # compaction_delta is not one of the output delta kinds: 3 text deltas
    "anthropic/messages/compaction-block.sse": E("completed", ('end_turn',), None, 11, 3, 1, (181, 8, 0, 0, None), {}, None, False),
    # no trailing newline: the SDKs drop the last frame (message_stop); max_tokens already said incomplete
    "anthropic/messages/max-tokens-mid-tool-input.sse": E("incomplete", ('max_tokens',), None, 14, 8, 1, (450, 124, 0, 0, None), {'unterminated_event': 1}, None, False),
    # both tool inputs arrive as partial_json "": no delta
    "anthropic/messages/parallel-tool-use.sse": E("completed", ('tool_use',), None, 9, 0, 1, (542, 62, 0, 0, None), {'no_delta': 1}, None, False),
    # pause_turn completes; thinking_tokens 261 in message_delta usage
    "anthropic/messages/pause-turn.sse": E("completed", ('pause_turn',), None, 166, 101, 2, (404500, 943, 0, 0, 261), {}, None, False),
    # input = 4 + cache_read 1165 + cache_write 0
    "anthropic/messages/prompt-cache-read.sse": E("completed", ('end_turn',), None, 45, 40, 1, (1169, 221, 1165, 0, None), {}, None, False),
    # input = 4 + cache_read 0 + cache_write 1165
    "anthropic/messages/prompt-cache-write.sse": E("completed", ('end_turn',), None, 38, 33, 1, (1169, 201, 0, 1165, None), {}, None, False),
    "anthropic/messages/redacted-thinking.sse": E("completed", ('end_turn',), None, 24, 15, 3, (92, 189, 0, 0, None), {}, None, False),
    "anthropic/messages/stop-sequence-prefill.sse": E("completed", ('stop_sequence',), None, 9, 4, 1, (16, 28, 0, 0, None), {}, None, False),
    "anthropic/messages/structured-output-json-schema.sse": E("completed", ('end_turn',), None, 9, 4, 1, (135, 10, 0, 0, None), {}, None, False),
    # 2024 usage has no cache fields: null, never 0
    "anthropic/messages/text-2024.sse": E("completed", ('end_turn',), None, 75, 70, 1, (17, 171, None, None, None), {}, None, False),
    "anthropic/messages/text-then-tool-use-fragments.sse": E("completed", ('tool_use',), None, 34, 23, 1, (506, 153, 0, 0, None), {}, None, False),
    "anthropic/messages/text.sse": E("completed", ('end_turn',), None, 9, 4, 1, (17, 10, 0, 0, None), {}, None, False),
    # signature_delta is not output
    "anthropic/messages/thinking-signature.sse": E("completed", ('end_turn',), None, 40, 32, 1, (46, 84, 0, 0, None), {}, None, False),
    "anthropic/messages/thinking-then-tool-use.sse": E("completed", ('tool_use',), None, 12, 2, 1, (598, 92, 0, 0, 53), {}, None, False),
    "anthropic/messages/web-search-citations.sse": E("completed", ('end_turn',), None, 120, 92, 0, (10423, 341, 0, 0, None), {}, None, False),
    # first chunk choices:[] with empty id; finish stop; no stream_options
    "azure-openai/chat-completions/text-content-filter.sse": E("completed", ('stop',), None, 25, 22, 0, (None, None, None, None, None), {'usage_missing': 1}, None, True),
    "azure-openai/chat-completions/tool-call.sse": E("completed", ('tool_calls',), None, 16, 13, 0, (None, None, None, None, None), {'usage_missing': 1}, None, True),
    "deepseek/chat-completions/reasoning-content.sse": E("completed", ('stop',), None, 48, 46, 0, (17, 47, 0, None, 34), {}, None, True),
    "deepseek/responses/reasoning-text.sse": E("completed", ('stop',), None, 27, 14, 0, (90, 15, 0, None, 7), {}, (0, 26), False),
    # event: error frame after reasoning deltas, then EOF: no finish, no [DONE]
    "groq/chat-completions/error-event-tool-use-failed.sse": E("error", (), 'tool_use_failed', 95, 93, 0, (None, None, None, None, None), {}, None, False),
    # usage only as x_groq.usage on the finish chunk
    "groq/chat-completions/text-x-groq.sse": E("completed", ('stop',), None, 27, 25, 0, (12, 26, None, None, None), {}, None, True),
    "huggingface/chat-completions/text.sse": E("completed", ('stop',), None, 4, 1, 0, (40, 2, None, None, None), {}, None, True),
    "litellm-proxy/chat-completions/text.sse": E("completed", ('stop',), None, 24, 21, 0, (13, 22, 0, None, 0), {}, None, True),
    "mistral/chat-completions/text.sse": E("completed", ('stop',), None, 44, 42, 0, (11, 43, None, None, None), {}, None, True),
    "ollama/chat-completions/text.sse": E("completed", ('stop',), None, 4, 3, 0, (None, None, None, None, None), {'usage_missing': 1}, None, True),
    "ollama/chat-completions/tools-request.sse": E("completed", ('stop',), None, 28, 27, 0, (None, None, None, None, None), {'usage_missing': 1}, None, True),
    # n=2: both choices finish, then the usage chunk
    "openai/chat-completions/n2-interleaved-choices.sse": E("completed", ('stop', 'stop'), None, 109, 104, 0, (26, 104, 0, None, 0), {}, None, True),
    "openai/chat-completions/parallel-tool-calls-include-usage.sse": E("completed", ('tool_calls',), None, 18, 13, 0, (75, 51, 0, None, 0), {}, None, True),
    "openai/chat-completions/prompt-cache-read-length.sse": E("incomplete", ('length',), None, 103, 100, 0, (1420, 100, 1280, None, 0), {}, None, True),
    # all 1000 tokens spent reasoning: no delta at all
    "openai/chat-completions/reasoning-model-length-empty-content.sse": E("incomplete", ('length',), None, 3, 0, 0, (179, 1000, 0, None, 1000), {'no_delta': 1}, None, True),
    "openai/chat-completions/reasoning-model-max-tokens.sse": E("incomplete", ('length',), None, 3, 0, 0, (13, 50, 0, None, 50), {'no_delta': 1}, None, True),
    "openai/chat-completions/refusal-deltas.sse": E("completed", ('stop',), None, 15, 12, 0, (64, 13, 0, None, 0), {}, None, True),
    "openai/chat-completions/single-tool-call-no-usage.sse": E("completed", ('tool_calls',), None, 10, 8, 0, (None, None, None, None, None), {'usage_missing': 1}, None, True),
    "openai/chat-completions/text-include-usage.sse": E("completed", ('stop',), None, 8, 5, 0, (12, 5, 0, None, 0), {}, None, True),
    "openai/completions/model-snapshot-name.sse": E("completed", ('stop',), None, 9, 8, 0, (None, None, None, None, None), {'usage_missing': 1}, None, True),
    "openai/completions/text-length.sse": E("incomplete", ('length',), None, 16, 16, 0, (None, None, None, None, None), {'usage_missing': 1}, None, True),
    "openai/responses/background-queued.sse": E("completed", ('stop',), None, 17, 8, 0, (15, 9, 0, None, 0), {}, (0, 16), False),
    # starts at 1 with response.queued: a resume (starting_after=0), not a bad start
    "openai/responses/background-resume-starting-after.sse": E("completed", ('stop',), None, 16, 8, 0, (15, 9, 0, None, 0), {}, (1, 16), False),
    # payload-only form accepted: error then response.failed -> error wins
    "openai/responses/error-then-failed.payloads.jsonl": E("error", ('error',), 'insufficient_quota', 4, 0, 0, (None, None, None, None, None), {}, (0, 3), False),
    # early-2025 format without sequence_number
    "openai/responses/function-call-args-delta.sse": E("completed", ('stop',), None, 11, 5, 0, (255, 16, 0, None, 0), {'sequence_missing': 1}, None, False),
    "openai/responses/incomplete-after-function-call.sse": E("incomplete", ('max_output_tokens',), None, 157, 149, 0, (98, 1000, 0, None, 768), {}, (0, 156), False),
    # only a reasoning item: no delta
    "openai/responses/incomplete-during-reasoning.sse": E("incomplete", ('max_output_tokens',), None, 5, 0, 0, (13, 0, 0, None, 0), {'no_delta': 1}, (0, 4), False),
    "openai/responses/incomplete-max-output-tokens.sse": E("incomplete", ('max_output_tokens',), None, 24, 16, 0, (0, 0, 0, None, 0), {}, (0, 23), False),
    "openai/responses/logprobs.sse": E("completed", ('stop',), None, 17, 9, 0, (25, 10, 0, None, 0), {}, (0, 16), False),
    "openai/responses/parallel-function-calls.sse": E("completed", ('stop',), None, 22, 13, 0, (36, 54, 0, None, 0), {}, (0, 21), False),
    "openai/responses/reasoning-summary-text.sse": E("completed", ('stop',), None, 102, 89, 0, (14, 14, 0, None, 0), {}, (0, 101), False),
    "openai/responses/reasoning-then-function-call.sse": E("completed", ('stop',), None, 14, 6, 0, (53, 469, 0, None, 448), {}, (0, 13), False),
    "openai/responses/refusal.sse": E("completed", ('stop',), None, 17, 9, 0, (54, 11, 0, None, 0), {}, (0, 16), False),
    "openai/responses/text.sse": E("completed", ('stop',), None, 13, 5, 0, (22, 6, 0, None, 0), {}, (0, 12), False),
    "openai/responses/web-search-tool.sse": E("completed", ('stop',), None, 61, 44, 0, (9463, 582, 8320, None, 512), {}, (0, 60), False),
    # 17 comment keepalives; two chunks say finish_reason length (the second without new output: no anomaly); the
    # error chunk carries usage
    "openrouter/chat-completions/keepalive-comments-error-chunk.sse": E("error", ('length',), '400', 4, 2, 17, (43, 10, 0, None, 11), {}, None, True),
    "openrouter/chat-completions/reasoning-claude.sse": E("completed", ('stop',), None, 14, 5, 4, (43, 36, 0, None, 13), {}, None, True),
    # data-only frames, one comment, trailing [DONE] on Responses
    "openrouter/responses/reasoning-text-keepalive.sse": E("completed", ('stop',), None, 40, 27, 1, (78, 37, 0, None, 22), {'trailing_done': 1}, (0, 39), True),
    # usage.cached_tokens at the top level of usage
    "together/chat-completions/text.sse": E("completed", ('stop',), None, 15, 14, 0, (41, 15, 0, None, None), {}, None, True),
    "vllm/chat-completions/text.sse": E("incomplete", ('length',), None, 21, 20, 0, (None, None, None, None, None), {'usage_missing': 1}, None, True),
    # usage:null on every chunk (as if requested) and no usage chunk
    "vllm/completions/text.sse": E("incomplete", ('length',), None, 20, 20, 0, (None, None, None, None, None), {'usage_missing': 1}, None, True),
    # no [DONE] after a complete answer
    "writer/chat-completions/tool-call-no-done.sse": E("completed", ('tool_calls',), None, 6, 2, 0, (194, 22, None, None, None), {'missing_done': 1}, None, False),
}
# fmt: on
# the error class of the captures with a bad outcome (every other one has none)
CLASSES = {
    # code tool_use_failed is not in the table; its type invalid_request_error is
    "groq/chat-completions/error-event-tool-use-failed.sse": "bad_request",
    "openai/responses/error-then-failed.payloads.jsonl": "quota_exceeded",  # insufficient_quota
    "openrouter/chat-completions/keepalive-comments-error-chunk.sse": "bad_request",  # in-band code 400
}


# the failure phase of the bad outcomes: reasoning deltas reached the caller before Groq's and OpenRouter's errors
PHASES = {
    "groq/chat-completions/error-event-tool-use-failed.sse": "during_output",
    "openai/responses/error-then-failed.payloads.jsonl": "before_output",
    "openrouter/chat-completions/keepalive-comments-error-chunk.sse": "during_output",
}
# time to first output as check gives it (an event index), where reasoning came first: the first text or tool
# delta, counted by hand in each file (Anthropic's ping is a keepalive, not an event); None: only reasoning (or
# nothing) came
FIRST_OUTPUT = {
    "anthropic/messages/thinking-signature.sse": 34,
    "anthropic/messages/thinking-then-tool-use.sse": None,  # thinking, then tool input "": no output
    "deepseek/chat-completions/reasoning-content.sse": 35,
    "deepseek/responses/reasoning-text.sse": 16,
    "groq/chat-completions/error-event-tool-use-failed.sse": None,  # 93 reasoning deltas, then the error
    "openai/responses/reasoning-summary-text.sse": 90,
    "openrouter/chat-completions/reasoning-claude.sse": 9,
    "openrouter/chat-completions/keepalive-comments-error-chunk.sse": None,
    "openai/chat-completions/text-include-usage.sse": 1,  # no reasoning: the first delta
}


def _captures() -> Path:
    if not CAPTURES.is_dir():
        pytest.skip(f"real captures not available at {CAPTURES.resolve()} (they live beside the repo in ../shared)")
    return CAPTURES


def test_table_covers_every_capture() -> None:
    root = _captures()
    on_disk = {str(p.relative_to(root)) for p in root.rglob("*") if p.suffix in (".sse", ".jsonl")}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_capture(rel: str) -> None:
    path = _captures() / rel
    expected = EXPECTED[rel]
    if expected == UNSUPPORTED:
        with pytest.raises(offline.CheckError, match="unsupported surface"):
            offline.analyse(str(path))
        return
    d = offline.analyse(str(path)).to_json()
    u = d["usage"]
    s = d["sequence"]
    got = E(
        d["outcome"],
        tuple(d["finish_reasons"]),
        d["error_type"],
        d["events"],
        d["deltas"],
        d["keepalives"],
        (u["input_tokens"], u["output_tokens"], u["cache_read_input_tokens"], u["cache_write_input_tokens"],
         u["reasoning_output_tokens"]),
        d["anomaly_counts"],
        (s["first"], s["last"]) if s["first"] is not None else None,
        d["done_sentinel"],
    )  # fmt: skip
    assert got == expected
    assert d["error_class"] == CLASSES.get(rel)
    assert d["failure_phase"] == PHASES.get(rel)
    if rel in FIRST_OUTPUT:
        assert d["first_output_event_index"] == FIRST_OUTPUT[rel]
    elif d["deltas"]:
        assert d["first_output_event_index"] is not None


def test_summary_of_outcomes() -> None:
    """The spread the captures give (a quick read of what the set exercises)."""
    outcomes = [e.outcome if isinstance(e, E) else e for e in EXPECTED.values()]
    assert {o: outcomes.count(o) for o in set(outcomes)} == {
        "completed": 45, "incomplete": 10, "error": 3, UNSUPPORTED: 1}  # fmt: skip
