"""The probe's requests: one small, fixed, built-in streamed request per surface, through the real SDK's async client
(boto3's, which has none, on threads: ``cloud_clients``), the SDK's retries off (each request is one attempt), read
to its end as an application would.

The prompt is a constant of this module and asks for one word; nothing of it or of the answer is kept: the stream's
items are read and dropped. The SDKs' loggers are held at WARNING while the probe runs (``quiet_sdk_loggers``),
because their DEBUG output (``OPENAI_LOG=debug``) prints request bodies and headers in some releases.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import inspect
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from otelstream import names
from otelstream.distribution import install_hint
from otelstream.probe import cloud_clients
from otelstream.probe.config import ProbeError, Secrets, Target

PROMPT: Final = "Reply with the single word: ok"
# the events that end a response on a WebSocket connection (the connection itself stays open)
WS_TERMINAL: Final = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
# past the SDK's own timeout: a single wait that long fails in the SDK (a timeout, what the row should say), so the
# probe's overall bound only ends streams that keep trickling
DEADLINE_GRACE_S: Final = 1.0
# botocore's DEBUG output holds each request's signed headers
_QUIET: Final = ("openai", "anthropic", "httpx", "httpx2", "httpcore", "websockets", "google_genai", "google.auth",
                  "aiohttp", "boto3", "botocore", "urllib3")  # fmt: skip


@dataclass(frozen=True)
class Attempt:
    """What the probe itself saw of one request (what otelstream saw is its report)."""

    raised: BaseException | None  # what the SDK raised to the probe, if anything
    connected: bool  # False: a WebSocket handshake that failed (no stream: otelstream makes no report)
    timed_out: bool  # the probe ended it at its overall deadline
    duration_s: float


def quiet_sdk_loggers() -> dict[str, int]:
    """Hold the SDKs' and HTTP libraries' loggers at WARNING at least; returns their levels before, to restore."""
    before: dict[str, int] = {}
    for name in _QUIET:
        log = logging.getLogger(name)
        if log.getEffectiveLevel() < logging.WARNING:
            before[name] = log.level
            log.setLevel(logging.WARNING)
    return before


def restore_loggers(levels: dict[str, int]) -> None:
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def require_sdk(target: Target) -> Any:
    """The target's SDK module, or a ``ProbeError`` saying what to install."""
    try:
        sdk = importlib.import_module(target.sdk)
    except ImportError:
        raise ProbeError(f"surface {target.surface} needs the {target.sdk} SDK: {install_hint(target.extra)}") from None
    if target.surface == names.RESPONSES_WEBSOCKET and not _has_websocket_mode():
        raise ProbeError(f"surface responses_websocket needs openai >= 3.32 and websockets: {install_hint('openai')}")
    return sdk


def require_credentials(target: Target) -> None:
    """What the SDK needs beside a key, checked before anything is sent: converse's AWS region and credentials,
    Vertex AI's Application Default Credentials."""
    if target.surface == names.CONVERSE:
        cloud_clients.require_aws(target)
    elif target.vertex:
        cloud_clients.google_credentials(target)


def _has_websocket_mode() -> bool:
    """openai's WebSocket mode as otelstream observes it: from 3.32, the release with ``openai._websocket_connection``
    (earlier ``responses.connect()`` exists but is unobserved: no report would come)."""
    try:
        observed = importlib.util.find_spec("openai._websocket_connection") is not None
        resource = importlib.import_module("openai.resources.responses")
    except ImportError:
        return False
    has_connect = hasattr(resource.AsyncResponses, "connect")
    return observed and has_connect and importlib.util.find_spec("websockets") is not None


def make_client(target: Target, secrets: Secrets, timeout_s: float) -> Any:
    """The SDK's async client for the target: retries 0, ``timeout_s`` for connect and each read, the custom headers
    on every request (and on the WebSocket handshake)."""
    sdk = require_sdk(target)
    if target.surface == names.GENERATE_CONTENT:
        return cloud_clients.GeminiClient(target, secrets, timeout_s)
    if target.surface == names.CONVERSE:
        return cloud_clients.BedrockClient(target, secrets, timeout_s)
    kwargs: dict[str, Any] = {"api_key": secrets.api_key, "max_retries": 0, "timeout": timeout_s,
                              "default_headers": dict(secrets.headers)}  # fmt: skip
    if target.sdk == "anthropic":
        cls = sdk.AsyncAnthropic
        # anthropic 1.14+ traces on its own once a TracerProvider exists; its span would be a second CLIENT span
        if "open_telemetry" in inspect.signature(cls.__init__).parameters:
            kwargs["open_telemetry"] = False
        return cls(base_url=target.base_url, **kwargs)
    parts = urlsplit(target.base_url)
    if parts.scheme in ("ws", "wss"):
        # a WebSocket URL is used as the SDK's websocket_base_url; the HTTP twin is never requested
        kwargs["websocket_base_url"] = target.base_url
        return sdk.AsyncOpenAI(base_url=urlunsplit(("http" if parts.scheme == "ws" else "https", *parts[1:])),
                               **kwargs)  # fmt: skip
    return sdk.AsyncOpenAI(base_url=target.base_url, **kwargs)


async def attempt(client: Any, target: Target, timeout_s: float) -> Attempt:
    """Send the target's request and read the stream to its end, within ``timeout_s`` + a grace second overall."""
    if target.surface == names.CONVERSE:
        raised, timed_out, seconds = await cloud_clients.converse_attempt(client, target, PROMPT,
                                                                          timeout_s + DEADLINE_GRACE_S)  # fmt: skip
        return Attempt(raised, True, timed_out, seconds)
    t0 = time.monotonic()
    connected = [True]
    # a task of its own copies this context: the stream carries the probe's attributes
    task = asyncio.ensure_future(_run(client, target, timeout_s, connected))
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s + DEADLINE_GRACE_S)
    except asyncio.CancelledError:  # the monitor's second signal: the stream goes with the probe
        task.cancel()
        raise
    if not done:
        # the probe's own bound: the stream is cancelled (otelstream reports it abandoned, reason cancel)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return Attempt(None, connected[0], True, time.monotonic() - t0)
    return Attempt(task.exception(), connected[0], False, time.monotonic() - t0)


async def warm_up(surfaces: Iterable[str]) -> None:
    """One stream per surface through its SDK over the doctor's mock transport (no socket), before otelstream
    observes anything: the SDK's one-time set-up at its first event (building its event models: tens of ms, more in
    a cold process) would otherwise be the first row's time to first delta. A WebSocket response is parsed by the
    same models as Responses over SSE. Best effort: a failure here only leaves the first row slower."""
    from otelstream.doctor import bodies, clients, faults

    warm = faults.FAULTS[0]  # "completed": a whole, healthy answer
    for surface in sorted({names.RESPONSES if s == names.RESPONSES_WEBSOCKET else s for s in surfaces}):
        sdk = clients.SDK_BY_SURFACE.get(surface)  # none for converse: botocore loads its models with the client
        if sdk is None:
            continue
        if not clients.installed(sdk):
            continue
        client = clients.make_client(sdk, {"warm": bodies.serve(surface, warm)}, is_async=True)
        try:
            stream = await clients.OPENERS[surface](client, "warm")
            # google-genai's is an async generator, the others' stream objects are context managers
            async with stream if hasattr(stream, "__aenter__") else contextlib.aclosing(stream):
                async for _ in stream:
                    pass
        except Exception as exc:  # best effort: the probe runs either way
            logging.getLogger("otelstream").debug("otelstream probe: warm-up of %s failed: %r", surface, exc)
        finally:
            await client.close()


async def _run(client: Any, target: Target, timeout_s: float, connected: list[bool]) -> None:
    if target.surface == names.RESPONSES_WEBSOCKET:
        await _websocket(client, target, timeout_s, connected)
        return
    if target.surface == names.GENERATE_CONTENT:
        await cloud_clients.gemini_stream(client, target, PROMPT)
        return
    stream = await _open(client, target)
    async with stream:
        async for _ in stream:
            pass


async def _open(client: Any, target: Target) -> Any:
    n = target.max_output_tokens
    messages = [{"role": "user", "content": PROMPT}]
    if target.surface == names.RESPONSES:
        return await client.responses.create(model=target.model, input=PROMPT, max_output_tokens=n, stream=True)
    if target.surface == names.CHAT_COMPLETIONS:
        # max_completion_tokens: OpenAI's reasoning models refuse max_tokens; compatible servers take both.
        # include_usage: the usage chunk, as applications that count tokens ask for it (its absence is a verdict)
        return await client.chat.completions.create(
            model=target.model, messages=messages, max_completion_tokens=n, stream=True,
            stream_options={"include_usage": True},
        )  # fmt: skip
    if target.surface == names.COMPLETIONS:
        return await client.completions.create(model=target.model, prompt=PROMPT, max_tokens=n, stream=True,
                                               stream_options={"include_usage": True})  # fmt: skip
    if target.surface == names.MESSAGES:
        return await client.messages.create(model=target.model, max_tokens=n, messages=messages, stream=True)
    raise ProbeError(f"unknown surface {target.surface!r}")


async def _websocket(client: Any, target: Target, timeout_s: float, connected: list[bool]) -> None:
    manager = client.responses.connect(websocket_connection_options={"open_timeout": timeout_s})
    connected[0] = False
    conn = await manager.__aenter__()
    connected[0] = True
    try:
        await conn.response.create(model=target.model, input=PROMPT, max_output_tokens=target.max_output_tokens)
        async for event in conn:
            if getattr(event, "type", None) in WS_TERMINAL:
                break
    finally:
        await manager.__aexit__(None, None, None)
