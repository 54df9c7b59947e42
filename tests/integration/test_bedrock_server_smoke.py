"""The Bedrock stand-in (tests/support/bedrock_server.py) as the real boto3 and aiobotocore clients see it, with no
otelstream involved: ConverseStream and InvokeModelWithResponseStream, every script, sync and async. What the live
adapter tests of issue 36 rely on the server to do, checked once here, with when each client hands the first delta
of the pause script over (sync botocore reads a content-length body in 64 KiB blocks, a chunked one chunk by chunk;
aiobotocore hands each chunk over as it comes)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import boto3
import pytest
import urllib3.exceptions
from aiobotocore.session import get_session
from botocore.exceptions import ClientError, EventStreamError, ReadTimeoutError

from tests.support.bedrock_server import PAUSE_S, REQUEST_ID, SCRIPTS, BedrockServer

MSGS: Any = [{"role": "user", "content": [{"text": "hi"}]}]
READ_TIMEOUT_S = 0.8
BROKEN = (urllib3.exceptions.ProtocolError, aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError)
TIMEOUTS = (ReadTimeoutError, urllib3.exceptions.ReadTimeoutError, aiohttp.SocketTimeoutError, asyncio.TimeoutError)


@dataclass
class Seen:
    kinds: list[str] = field(default_factory=list)  # converse: event names; invoke: the Messages event types
    at: list[float] = field(default_factory=list)  # when each reached the caller, from the call
    error: BaseException | None = None
    request_id: str | None = None
    payloads: list[dict[str, Any]] = field(default_factory=list)


def _record(seen: Seen, event: dict[str, Any], t0: float) -> None:
    seen.at.append(time.monotonic() - t0)
    if "chunk" in event:
        payload = json.loads(event["chunk"]["bytes"])
        seen.payloads.append(payload)
        seen.kinds.append(payload.get("type") or "generation")
    else:
        seen.kinds.append(next(iter(event)))
        seen.payloads.append(event)


def _sync(client: Any, op: str, model: str) -> Seen:
    seen, t0 = Seen(), time.monotonic()
    try:
        if op == "converse":
            response = client.converse_stream(modelId=model, messages=MSGS)
            stream = response["stream"]
        else:
            response = client.invoke_model_with_response_stream(modelId=model, body=b"{}")
            stream = response["body"]
        seen.request_id = response["ResponseMetadata"]["RequestId"]
        for event in stream:
            _record(seen, event, t0)
    except Exception as e:  # the script's failure, judged below
        seen.error = e
    return seen


async def _async(client: Any, op: str, model: str) -> Seen:
    seen, t0 = Seen(), time.monotonic()
    try:
        if op == "converse":
            response = await client.converse_stream(modelId=model, messages=MSGS)
            stream = response["stream"]
        else:
            response = await client.invoke_model_with_response_stream(modelId=model, body=b"{}")
            stream = response["body"]
        seen.request_id = response["ResponseMetadata"]["RequestId"]
        async for event in stream:
            _record(seen, event, t0)
    except Exception as e:
        seen.error = e
    return seen


def _code(s: Seen, kind: type[Exception]) -> str | None:
    """The error code botocore parsed, when the script's failure is of ``kind``."""
    return s.error.response["Error"]["Code"] if isinstance(s.error, kind) else None  # type: ignore[attr-defined]


DONE = ["messageStart", "contentBlockDelta", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"]
CONVERSE: dict[str, Callable[[Seen], bool]] = {
    "completed": lambda s: s.kinds == DONE and s.payloads[4]["messageStop"]["stopReason"] == "end_turn",
    "pause": lambda s: s.kinds == DONE and s.error is None,
    "reasoning": lambda s: "reasoningContent" in s.payloads[1]["contentBlockDelta"]["delta"]
    and s.kinds[-1] == "metadata",
    "cut": lambda s: s.kinds == DONE[:3] and s.error is None,
    "error": lambda s: _code(s, EventStreamError) == "modelStreamErrorException",
    "throttled": lambda s: _code(s, EventStreamError) == "throttlingException",
    "max_tokens": lambda s: s.payloads[4]["messageStop"]["stopReason"] == "max_tokens",
    "http_429": lambda s: _code(s, ClientError) == "ThrottlingException"
    and s.error.response["ResponseMetadata"]["HTTPStatusCode"] == 429,  # type: ignore[union-attr]
    "http_503": lambda s: _code(s, ClientError) == "ServiceUnavailableException",
    "stall": lambda s: isinstance(s.error, TIMEOUTS) and s.kinds == DONE[:2],
    "reset": lambda s: isinstance(s.error, BROKEN) and s.kinds == DONE[:2],
}  # fmt: skip
MSG_DONE = ["message_start", "content_block_start", "content_block_delta", "content_block_delta",
            "content_block_stop", "message_delta", "message_stop"]  # fmt: skip
INVOKE: dict[str, Callable[[Seen], bool]] = {
    "anthropic.completed": lambda s: s.kinds == MSG_DONE and "amazon-bedrock-invocationMetrics" in s.payloads[-1],
    "anthropic.cut": lambda s: s.kinds == MSG_DONE[:4] and s.error is None,
    "anthropic.error": lambda s: isinstance(s.error, EventStreamError) and s.kinds == MSG_DONE[:3],
    "anthropic.max_tokens": lambda s: s.payloads[5]["delta"]["stop_reason"] == "max_tokens",
    "meta.completed": lambda s: [p["generation"] for p in s.payloads] == ["Hel", "lo", "!"]
    and s.payloads[-1]["stop_reason"] == "stop" and "amazon-bedrock-invocationMetrics" in s.payloads[-1],
    "http_429": CONVERSE["http_429"],
}  # fmt: skip


def test_every_script_has_an_expectation() -> None:
    assert set(CONVERSE) == set(SCRIPTS)


@pytest.fixture(scope="module")
def server() -> Any:
    with BedrockServer() as s:
        yield s


@pytest.fixture(scope="module")
def client(server: BedrockServer) -> Any:
    return boto3.client(**server.client_kwargs(read_timeout=READ_TIMEOUT_S))


def _run_async(server: BedrockServer, op: str, model: str) -> Seen:
    async def go() -> Seen:
        async with get_session().create_client(**server.client_kwargs(read_timeout=READ_TIMEOUT_S)) as c:
            return await _async(c, op, model)

    return asyncio.run(go())


@pytest.mark.parametrize("script", SCRIPTS)
def test_converse_stream_sync(server: BedrockServer, client: Any, script: str) -> None:
    before = len(server.requests)
    seen = _sync(client, "converse", script)
    assert CONVERSE[script](seen), seen
    assert len(server.requests) == before + 1  # retries are off
    assert server.requests[-1].path == f"/model/{script}/converse-stream"
    if not script.startswith("http_"):
        assert seen.request_id == REQUEST_ID


@pytest.mark.parametrize("script", SCRIPTS)
def test_converse_stream_async(server: BedrockServer, script: str) -> None:
    before = len(server.requests)
    seen = _run_async(server, "converse", script)
    assert CONVERSE[script](seen), seen
    assert len(server.requests) == before + 1


@pytest.mark.parametrize("model", list(INVOKE))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_invoke_with_response_stream(server: BedrockServer, client: Any, model: str, mode: str) -> None:
    seen = _sync(client, "invoke", model) if mode == "sync" else _run_async(server, "invoke", model)
    assert INVOKE[model](seen), seen


@pytest.mark.parametrize(
    ("mode", "model", "message_start_waits"),
    [
        ("sync", "pause", False),
        ("sync", "sized.pause", True),
        ("async", "pause", False),
        ("async", "sized.pause", False),
    ],
)
def test_when_the_pause_reaches_the_caller(
    server: BedrockServer, client: Any, mode: str, model: str, message_start_waits: bool
) -> None:
    """The first delta always comes after the pause; ``messageStart`` comes at once except where sync botocore
    waits for a 64 KiB block of a content-length body (then it arrives with the deltas)."""
    seen = _sync(client, "converse", model) if mode == "sync" else _run_async(server, "converse", model)
    assert seen.kinds == DONE, seen
    assert seen.at[1] >= PAUSE_S
    assert (seen.at[0] >= PAUSE_S) == message_start_waits, seen.at
