"""What the installed SDK releases can do, for the tests whose subject an older supported release lacks or does
differently. Each flag is read from the SDK itself (a module it has or not, a name its stream code uses), never from
its version string; the release where it changed is named for the reader."""

from __future__ import annotations

import importlib.util

import openai
import openai._streaming

# openai 3.32+: the connection base class (``openai._websocket_connection``) every WebSocket-mode patch point
# relies on; without it otelstream leaves WebSocket mode unobserved (one WARNING) rather than half observed
OPENAI_WEBSOCKET_OBSERVED = importlib.util.find_spec("openai._websocket_connection") is not None
WITHOUT_WEBSOCKET = "this openai release has no openai._websocket_connection: WebSocket mode is not observed"

# openai 3.14+: a transport error while the body is read reaches the caller as APIConnectionError / APITimeoutError
# (the SDK wraps it in ``_iter_events``); older releases let the HTTP client's own exception through
OPENAI_WRAPS_BODY_ERRORS = hasattr(openai._streaming, "APIConnectionError")
