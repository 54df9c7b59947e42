"""Surface detection: which API produced a recording, told from its events' shapes (``type`` / ``event:`` names,
``object``, ``choices[].delta`` or ``.text``, Gemini's ``candidates`` / ``usageMetadata`` / ``modelVersion``).
Anthropic's legacy ``/v1/complete`` is recognised, to be refused."""

from __future__ import annotations

from typing import Any, Final

from otelstream import names

AUTO: Final = "auto"
DETECT_LIMIT: Final = 256  # events buffered while the surface is still unknown
UNSUPPORTED_COMPLETE: Final = "unsupported surface: Anthropic legacy /v1/complete (only Messages is supported)"

_ANTHROPIC_TYPES = frozenset(
    {"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
     "message_stop"}
)  # fmt: skip


# what only a Gemini GenerateContentResponse carries
_GEMINI_KEYS: Final = ("candidates", "usageMetadata", "modelVersion", "promptFeedback")


def detect(name: str | None, value: Any) -> str | None:
    """The surface one event belongs to, from its shape; None when it does not tell (errors, pings, usage-only).
    Returns UNSUPPORTED_COMPLETE for Anthropic's legacy completion events."""
    d = value if type(value) is dict else None
    typ = d.get("type") if d is not None else None
    for t in (typ, name):
        if isinstance(t, str):
            if t.startswith("response."):
                return names.RESPONSES
            if t in _ANTHROPIC_TYPES:
                return names.MESSAGES
            if t == "completion":
                return UNSUPPORTED_COMPLETE
    if d is None:
        return None
    obj = d.get("object")
    if obj == "chat.completion.chunk":
        return names.CHAT_COMPLETIONS
    if obj == "text_completion":
        return names.COMPLETIONS
    if "completion" in d and "stop_reason" in d and "choices" not in d:
        return UNSUPPORTED_COMPLETE  # legacy /v1/complete payloads without a type field
    if any(key in d for key in _GEMINI_KEYS):
        return names.GENERATE_CONTENT
    choices = d.get("choices")
    if type(choices) is list and choices and type(choices[0]) is dict:
        c = choices[0]
        if "delta" in c or "message" in c:
            return names.CHAT_COMPLETIONS
        if "text" in c:
            return names.COMPLETIONS
    return None
