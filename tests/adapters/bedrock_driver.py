"""Drives the real boto3 (sync) and aiobotocore (async) clients against the Bedrock stand-in the way a caller does,
and records what the caller received: the events, the exception, when each event arrived. The tests compare it run
instrumented and uninstrumented, and read the one report otelstream made of it."""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass, field
from typing import Any

import boto3

from tests.support.bedrock_server import PAUSE_S, BedrockServer

MSGS: Any = [{"role": "user", "content": [{"text": "hi"}]}]
READ_TIMEOUT_S = 0.8
ANTHROPIC_BODY = b'{"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64, "messages": []}'
META_BODY = b'{"prompt": "hi", "max_gen_len": 64}'

# what the caller does: read it all; break after the first delta then close(); close() before reading; break and
# drop it (collected); cancel its task at the first event (async); break after the first delta then read on
ACTIONS = ("drain", "break_close", "close_unread", "drop", "cancel", "break_resume")


@dataclass
class Seen:
    events: list[Any] = field(default_factory=list)
    at: list[float] = field(default_factory=list)
    error: str | None = None  # the exception's type, and its code for botocore's ClientError
    request_id: str | None = None

    def caller_view(self) -> tuple[list[Any], str | None]:
        return self.events, self.error


def _describe(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return f"{type(exc).__name__}:{code}" if code else type(exc).__name__


def _is_delta(event: dict[str, Any]) -> bool:
    return "contentBlockDelta" in event or b"_delta" in event.get("chunk", {}).get("bytes", b"")


def _call(client: Any, op: str, model: str) -> Any:
    if op == "converse":
        return client.converse_stream(modelId=model, messages=MSGS, inferenceConfig={"maxTokens": 64})
    body = META_BODY if model.startswith("meta.") else ANTHROPIC_BODY
    return client.invoke_model_with_response_stream(modelId=model, body=body)


def _stream_of(response: Any, op: str) -> Any:
    return response["stream" if op == "converse" else "body"]


def run_sync(client: Any, op: str, model: str, action: str = "drain") -> Seen:
    seen, t0 = Seen(), time.monotonic()
    try:
        response = _call(client, op, model)
        seen.request_id = response["ResponseMetadata"]["RequestId"]
        stream = _stream_of(response, op)
        del response
        if action == "close_unread":
            stream.close()
            return seen
        for event in stream:
            seen.events.append(event)
            seen.at.append(time.monotonic() - t0)
            if action != "drain" and _is_delta(event):
                break
        if action == "break_close":
            stream.close()
        elif action == "drop":
            del stream
            gc.collect()
        elif action == "break_resume":
            for event in stream:
                seen.events.append(event)
    except Exception as e:  # the script's failure: compared, not judged, here
        seen.error = _describe(e)
    return seen


async def _run_async(client: Any, op: str, model: str, action: str, seen: Seen, first: asyncio.Event) -> None:
    t0 = time.monotonic()
    response = await _call(client, op, model)
    seen.request_id = response["ResponseMetadata"]["RequestId"]
    stream = _stream_of(response, op)
    del response
    if action == "close_unread":
        stream.close()
        return
    async for event in stream:
        seen.events.append(event)
        seen.at.append(time.monotonic() - t0)
        first.set()
        if action in ("break_close", "drop", "break_resume") and _is_delta(event):
            break
    if action == "break_close":
        stream.close()
    elif action == "drop":
        del stream
        gc.collect()
    elif action == "break_resume":
        async for event in stream:
            seen.events.append(event)


def run_async(server: BedrockServer, op: str, model: str, action: str = "drain") -> Seen:
    from aiobotocore.session import get_session  # here: a sync-only run (an old botocore) never imports it

    async def go() -> Seen:
        seen = Seen()
        first = asyncio.Event()
        async with get_session().create_client(**server.client_kwargs(read_timeout=READ_TIMEOUT_S)) as client:
            task = asyncio.ensure_future(_run_async(client, op, model, action, seen, first))
            if action == "cancel":
                # into the script's pause: what came before it is read whatever the TCP segments, then the cancel
                await first.wait()
                await asyncio.sleep(PAUSE_S / 4)
                task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                seen.error = "CancelledError"
            except Exception as e:
                seen.error = _describe(e)
        return seen

    return asyncio.run(go())


def sync_client(server: BedrockServer) -> Any:
    return boto3.client(**server.client_kwargs(read_timeout=READ_TIMEOUT_S))


def run(server: BedrockServer, mode: str, op: str, model: str, action: str = "drain") -> Seen:
    """Each run on a client of its own, sync or async: a connection a cut body left in a pool is not the next run's."""
    return run_sync(sync_client(server), op, model, action) if mode == "sync" else run_async(server, op, model, action)
