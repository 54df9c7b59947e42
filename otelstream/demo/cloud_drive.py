"""The demo's Gemini and Bedrock callers: google-genai's ``generate_content_stream`` and boto3's (aiobotocore's,
async) ``converse_stream`` and ``invoke_model_with_response_stream`` against the fake provider, each stream handed
back with the way its caller closes it. Bedrock clients get the provider as ``endpoint_url``, dummy credentials and
retries off; the fault rides in the same request header as on the other surfaces (google-genai: the call's
``http_options``; Bedrock, whose calls take no headers: a ``request-created`` event handler adds it from a context
variable the job sets).

The SDKs are imported here, inside functions, only when the lane runs: the demo works without them.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.exchange import FAULT_HEADER
from otelstream.demo.plan import BEDROCK_INVOKE, Job, Lanes

GEMINI_FLOOR: Final = (1, 50)
SHORT_TIMEOUT_S: Final = 0.5  # `no_headers`: the read timeout that makes it an http_error
TIMEOUT_S: Final = 30.0
_PROMPT: Final = "Say hello."
_MESSAGES: Final = [{"role": "user", "content": [{"text": _PROMPT}]}]
_INVOKE_BODY: Final = json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 256,
                                  "messages": [{"role": "user", "content": _PROMPT}]})  # fmt: skip
_fault: contextvars.ContextVar[str] = contextvars.ContextVar("otelstream_demo_fault", default=F.OK)


def available_lanes() -> Lanes:
    def has(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a parent package missing
            return False

    bedrock = has("boto3")
    return Lanes(gemini=_gemini_at_floor(), bedrock=bedrock, bedrock_async=bedrock and has("aiobotocore"))


def _gemini_at_floor() -> bool:
    """google-genai from GEMINI_FLOOR (the demo extra's): before it the SDK drops an in-band error object and the
    stream reads as cut, so the demo's `error` would not match its plan."""
    from importlib import metadata

    try:
        release = metadata.version("google-genai")
    except metadata.PackageNotFoundError:
        return False
    numbers = tuple(int(part) for part in re.findall(r"\d+", release)[:2])
    return numbers >= GEMINI_FLOOR


def is_cloud(job: Job) -> bool:
    return job.surface in (names.GENERATE_CONTENT, names.CONVERSE) or job.via == BEDROCK_INVOKE


@dataclass
class CloudClients:
    lanes: Lanes
    base_url: str
    pool: int
    gemini: Any = None
    bedrock: Any = None
    bedrock_short: Any = None  # read timeout SHORT_TIMEOUT_S
    bedrock_async: Any = None  # aiobotocore clients live in an event loop: opened by `open_async`
    bedrock_async_short: Any = None
    _stack: contextlib.AsyncExitStack | None = field(default=None, repr=False)


def _set_fault_header(request: Any, **_: Any) -> None:
    request.headers[FAULT_HEADER] = _fault.get()


def _bedrock_kwargs(base_url: str, pool: int, read_timeout: float) -> dict[str, Any]:
    from botocore.config import Config

    # total_max_attempts=1: no retry at all (max_attempts=1 still allows one), so each fault is seen once
    config = Config(retries={"total_max_attempts": 1}, read_timeout=read_timeout, connect_timeout=5,
                    max_pool_connections=pool)  # fmt: skip
    return {"service_name": "bedrock-runtime", "endpoint_url": base_url, "region_name": "us-east-1",
            "aws_access_key_id": "demo", "aws_secret_access_key": "demo", "config": config}  # fmt: skip


def _with_fault_hook(client: Any) -> Any:
    client.meta.events.register("request-created.bedrock-runtime", _set_fault_header)
    return client


def make_cloud_clients(base_url: str, pool: int, lanes: Lanes) -> CloudClients:
    clients = CloudClients(lanes, base_url, pool)
    if lanes.gemini:
        from google import genai
        from google.genai import types

        options = types.HttpOptions(base_url=base_url, timeout=int(TIMEOUT_S * 1000))
        clients.gemini = genai.Client(api_key="demo", http_options=options)
    if lanes.bedrock:
        import boto3

        clients.bedrock = _with_fault_hook(boto3.client(**_bedrock_kwargs(base_url, pool, TIMEOUT_S)))
        clients.bedrock_short = _with_fault_hook(boto3.client(**_bedrock_kwargs(base_url, pool, SHORT_TIMEOUT_S)))
    return clients


async def open_async(clients: CloudClients) -> None:
    """Open the aiobotocore clients in the running event loop (their connections belong to it)."""
    if not clients.lanes.bedrock_async or clients._stack is not None:
        return
    from aiobotocore.session import get_session

    stack = contextlib.AsyncExitStack()
    session = get_session()
    for attr, timeout in (("bedrock_async", TIMEOUT_S), ("bedrock_async_short", SHORT_TIMEOUT_S)):
        client = await stack.enter_async_context(
            session.create_client(**_bedrock_kwargs(clients.base_url, clients.pool, timeout))
        )
        setattr(clients, attr, _with_fault_hook(client))
    clients._stack = stack


async def close_cloud_clients(clients: CloudClients) -> None:
    if clients.gemini is not None:  # (releases before close() and aclose() free their connections when collected)
        close = getattr(clients.gemini, "close", None)
        aclose = getattr(clients.gemini.aio, "aclose", None)
        if close is not None:
            close()
        if aclose is not None:
            await aclose()
    for client in (clients.bedrock, clients.bedrock_short):
        if client is not None:
            client.close()
    if clients._stack is not None:
        stack, clients._stack = clients._stack, None
        await stack.aclose()


def _server_fault(job: Job) -> str:
    return F.OK if job.fault in F.CALLER_FAULTS else job.fault


def _gemini_config(job: Job) -> dict[str, Any]:
    options: dict[str, Any] = {"headers": {FAULT_HEADER: _server_fault(job)}}
    if job.fault == F.NO_HEADERS:
        options["timeout"] = int(SHORT_TIMEOUT_S * 1000)
    return {"http_options": options}


def _bedrock_call(client: Any, job: Job) -> Any:
    if job.surface == names.CONVERSE:
        return client.converse_stream(modelId=job.model, messages=_MESSAGES)
    return client.invoke_model_with_response_stream(modelId=job.model, body=_INVOKE_BODY)


def _bedrock_stream(response: Any, job: Job) -> Any:
    return response["stream" if job.surface == names.CONVERSE else "body"]


def open_sync(clients: CloudClients, job: Job) -> tuple[Iterator[Any], Callable[[], None]]:
    """The stream of one sync job and how its caller closes it (after the end, a break or an error)."""
    if job.surface == names.GENERATE_CONTENT:
        stream = clients.gemini.models.generate_content_stream(model=job.model, contents=_PROMPT,
                                                               config=_gemini_config(job))  # fmt: skip
        return stream, stream.close
    _fault.set(_server_fault(job))
    client = clients.bedrock_short if job.fault == F.NO_HEADERS else clients.bedrock
    events = _bedrock_stream(_bedrock_call(client, job), job)
    return iter(events), events.close


async def open_async_stream(clients: CloudClients, job: Job) -> tuple[AsyncIterator[Any], Callable[[], Any]]:
    """The stream of one async job and how its caller closes it (the result may be awaitable)."""
    if job.surface == names.GENERATE_CONTENT:
        stream = await clients.gemini.aio.models.generate_content_stream(model=job.model, contents=_PROMPT,
                                                                         config=_gemini_config(job))  # fmt: skip
        return stream, stream.aclose
    await open_async(clients)
    _fault.set(_server_fault(job))
    client = clients.bedrock_async_short if job.fault == F.NO_HEADERS else clients.bedrock_async
    events = _bedrock_stream(await _bedrock_call(client, job), job)
    return events.__aiter__(), events.close


async def settle(result: Awaitable[Any] | Any) -> None:
    """Await a close that returned an awaitable (an async generator's ``aclose``), not one that did not."""
    if isinstance(result, Awaitable):
        await result


def is_cloud_delta(item: Any) -> bool:
    """Cheap client-side guess, only to know when an ``abandon`` or ``cancel`` caller acts."""
    if isinstance(item, dict):  # Bedrock: a converse event, or an invoke chunk holding a Messages event
        return "contentBlockDelta" in item or b'"content_block_delta"' in item.get("chunk", {}).get("bytes", b"")
    return bool(getattr(item, "candidates", None))
