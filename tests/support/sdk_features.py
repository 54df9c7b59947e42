"""What the installed SDK releases can do, for the tests whose subject an older supported release lacks or does
differently. Each flag is read from the SDK itself (a module it has or not, a name its stream code uses), never from
its version string; the release where it changed is named for the reader."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import httpx2
import openai
import openai._base_client
import openai._streaming

# openai 3.32+: the connection base class (``openai._websocket_connection``) every WebSocket-mode patch point
# relies on; without it otelstream leaves WebSocket mode unobserved (one WARNING) rather than half observed
OPENAI_WEBSOCKET_OBSERVED = importlib.util.find_spec("openai._websocket_connection") is not None
WITHOUT_WEBSOCKET = "this openai release has no openai._websocket_connection: WebSocket mode is not observed"

# openai 3.14+: a transport error while the body is read reaches the caller as APIConnectionError / APITimeoutError
# (the SDK wraps it in ``_iter_events``); older releases let the HTTP client's own exception through
OPENAI_WRAPS_BODY_ERRORS = hasattr(openai._streaming, "APIConnectionError")

# The HTTP client library openai builds its clients on: httpx2 (3.x) or httpx (2.x, which refuses an httpx2 client
# in its oldest releases). anthropic 1.x and 2.x both use httpx2.
OPENAI_HTTP: ModuleType = getattr(openai._base_client, "httpx2", None) or openai._base_client.httpx
ANTHROPIC_HTTP: ModuleType = httpx2

# openai 2.45+: the beta twins of the Responses API (``client.beta.responses``)
OPENAI_BETA_RESPONSES = importlib.util.find_spec("openai.resources.beta.responses") is not None


def lacking(entry: str) -> str | None:
    """Why a test of the SDK entry point ``entry`` (a test id such as ``beta.responses.create``) cannot run on the
    installed release, or None when it has it."""
    if entry.startswith("beta.responses") and not OPENAI_BETA_RESPONSES:
        return "this openai release has no beta.responses"
    return None
