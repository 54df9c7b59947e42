"""What the installed SDK releases can do, for the tests whose subject an older supported release lacks or does
differently. Each flag is read from the SDK itself (a module it has or not, a name its stream code uses), never from
its version string; the release where it changed is named for the reader."""

from __future__ import annotations

import importlib.util
import inspect
from types import ModuleType

import anthropic
import anthropic._base_client
import anthropic._streaming
import httpx2
import openai
import openai._base_client
import openai._streaming
import openai.resources.responses.responses

# openai 3.32+: the connection base class (``openai._websocket_connection``) every WebSocket-mode patch point
# relies on; without it otelstream leaves WebSocket mode unobserved (one WARNING) rather than half observed
OPENAI_WEBSOCKET_OBSERVED = importlib.util.find_spec("openai._websocket_connection") is not None
WITHOUT_WEBSOCKET = "this openai release has no openai._websocket_connection: WebSocket mode is not observed"

# openai 3.1+: WebSocket lanes, ``stream_id`` on a ``response.create`` sent over the socket
OPENAI_WEBSOCKET_LANES = (
    "stream_id" in inspect.signature(openai.resources.responses.responses.ResponsesResponseResource.create).parameters
)
WITHOUT_WEBSOCKET_LANES = "this openai release has no WebSocket lanes (stream_id on response.create)"

# The demo's floor (its extra: openai 3.32+): it drives WebSocket lanes and tables what otelstream observed of them
DEMO_SDK = OPENAI_WEBSOCKET_OBSERVED
WITHOUT_DEMO_SDK = "below the demo's openai 3.32 (its extra): this release's WebSocket mode is not observed"


def release_warning(message: str) -> bool:
    """Whether an otelstream WARNING is the one the installed release always gets: WebSocket mode not observed."""
    return not OPENAI_WEBSOCKET_OBSERVED and "openai WebSocket-mode responses are not observed" in message


# The HTTP client library openai builds its clients on: httpx2 (3.x) or httpx (2.x, which refuses an httpx2 client
# in its oldest releases). anthropic 1.x and 2.x both use httpx2.
OPENAI_HTTP: ModuleType = getattr(openai._base_client, "httpx2", None) or openai._base_client.httpx
ANTHROPIC_HTTP: ModuleType = httpx2


# What the caller gets when the body breaks mid-stream: the SDK's connection / timeout error where the release wraps the
# HTTP client's (openai 3.14+, anthropic 2.17+), else the HTTP client's own. Tests assert the kind, not which layer
# raised it: a release may move the wrapping, the caller's handling and otelstream's report stay the same.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    openai.APIConnectionError, anthropic.APIConnectionError, httpx2.TransportError, OPENAI_HTTP.TransportError
)  # fmt: skip
TIMEOUT_ERRORS: tuple[type[BaseException], ...] = (
    openai.APITimeoutError, anthropic.APITimeoutError, httpx2.TimeoutException, OPENAI_HTTP.TimeoutException
)  # fmt: skip


def http_of(request: object) -> ModuleType:
    """The HTTP client library a request was built by: one mock handler serving both SDKs answers in its kind."""
    return OPENAI_HTTP if isinstance(request, OPENAI_HTTP.Request) else ANTHROPIC_HTTP


# openai 2.45+: the beta twins of the Responses API (``client.beta.responses``)
OPENAI_BETA_RESPONSES = importlib.util.find_spec("openai.resources.beta.responses") is not None

# openai 3.38+: ``OpenAI._send_request`` (the auth retry) hands over to ``openai.lib._client_auth``, whose function
# calls the base class's; before, the client's own ``_send_with_auth_retry`` did
OPENAI_AUTH_RETRY_MODULE = importlib.util.find_spec("openai.lib._client_auth") is not None

# anthropic 1.14+: ``_request`` below the public ``request()`` calls ``_attempt_request``; before, ``request()`` (the
# retry loop) calls it itself
ANTHROPIC_REQUEST_BELOW_PUBLIC = hasattr(anthropic._base_client.SyncAPIClient, "_request")

# anthropic 1.14+: a Stream's events start in its ``_iterator`` (a cached property, on a copy of the stream); before,
# in ``__init__``: the method that calls ``__stream__``
ANTHROPIC_STREAM_STARTER = "_iterator" if "_iterator" in vars(anthropic._streaming.Stream) else "__init__"

# anthropic 1.14+: the SDK's own OpenTelemetry tracing (``anthropic._tracing``, the clients' ``open_telemetry=``)
ANTHROPIC_TRACING = importlib.util.find_spec("anthropic._tracing") is not None
WITHOUT_ANTHROPIC_TRACING = "this anthropic release has no tracing of its own (anthropic._tracing, open_telemetry=)"


def lacking(entry: str) -> str | None:
    """Why a test of the SDK entry point ``entry`` (a test id such as ``beta.responses.create``) cannot run on the
    installed release, or None when it has it."""
    if entry.startswith("beta.responses") and not OPENAI_BETA_RESPONSES:
        return "this openai release has no beta.responses"
    return None
