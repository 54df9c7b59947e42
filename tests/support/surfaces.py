"""The surfaces streamed as server-sent events (every surface but the Responses API's WebSocket mode)."""

from __future__ import annotations

from otelstream import names

SSE_SURFACES = (names.RESPONSES, names.CHAT_COMPLETIONS, names.COMPLETIONS, names.MESSAGES)
