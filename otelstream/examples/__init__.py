"""Small hand-written stream bodies to try ``otelstream check`` on right after installing:

- ``responses-completed.sse``: an OpenAI Responses stream that completes (outcome ``completed``);
- ``chat-cut.sse``: a Chat Completions stream whose body ends mid-answer (outcome ``cut``);
- ``messages-overloaded.sse``: an Anthropic Messages stream with an ``overloaded_error`` mid-stream (``error``).

They are written for this package (not recordings); ``paths()`` lists them.
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent


def paths() -> list[Path]:
    return sorted(EXAMPLES_DIR.glob("*.sse"))
