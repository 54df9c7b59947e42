"""Abandoned async streams over a real socket leave no task of theirs pending when the loop ends: asyncio's
``Task was destroyed but it is pending!`` (an ``async_generator_athrow`` task) would mean a close of one of the
generators around the SDK's was left to a task nobody waits for. Some HTTP library releases (httpx2 2.16) fail to
close their own body generators when a stream is dropped, with otelstream or without: the same program runs without
otelstream first, and only where it too met them are such errors of the library's own generators let pass."""

from __future__ import annotations

import asyncio
import gc
import os
from typing import Any

import anthropic
import openai

import otelstream
from otelstream import adapters
from tests.support import bodies
from tests.support.recording import RecordingListener
from tests.support.scripted_server import Pause, ScriptedServer

MSGS: Any = [{"role": "user", "content": "x"}]
_OURS = os.path.dirname(otelstream.__file__)


def test_abandoned_async_streams_leave_no_pending_task(rec: RecordingListener, scripted: ScriptedServer) -> None:
    chat = bodies.frames_for("/v1/chat/completions", "ok")
    messages = bodies.frames_for("/v1/messages", "ok")
    chat_key = scripted.add([*chat[:3], Pause(1.0), *chat[3:]])
    messages_key = scripted.add([*messages[:4], Pause(1.0), *messages[4:]])
    problems: list[str] = []
    held: list[Any] = []

    async def one(oa: openai.AsyncOpenAI, an: anthropic.AsyncAnthropic, i: int) -> None:
        if i % 2:
            stream: Any = await oa.chat.completions.create(
                model="m", messages=MSGS, stream=True, extra_headers={"x-script": chat_key}
            )
        else:
            stream = await an.messages.create(
                model="m", max_tokens=5, messages=MSGS, stream=True, extra_headers={"x-script": messages_key}
            )
        await stream.__anext__()
        if i % 4 < 2:
            async with stream:  # the caller closes it mid-stream
                async for _ in stream:
                    break
        else:
            held.append(stream)  # dropped without a close, collected at the loop's end or after it

    foreign: list[str] = []  # close errors of generators that are not otelstream's

    def seen(ctx: dict[str, Any]) -> None:
        code = getattr(ctx.get("asyncgen"), "ag_code", None)
        ours = code is None or code.co_filename.startswith(_OURS)
        (problems if ours else foreign).append(str(ctx.get("message")))

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: seen(ctx))
        oa = openai.AsyncOpenAI(api_key="sk-test", base_url=scripted.base_url + "/v1", max_retries=0)
        an = anthropic.AsyncAnthropic(api_key="sk-test", base_url=scripted.base_url, max_retries=0)
        for _ in range(3):
            await asyncio.gather(*(one(oa, an, i) for i in range(8)))
            held[: len(held) // 2] = []
            gc.collect()

    adapters.uninstall()
    asyncio.run(main())
    held.clear()
    gc.collect()
    bare_foreign, problems[:], foreign[:] = bool(foreign), [], []
    assert not problems
    adapters.install(rec)
    asyncio.run(main())
    held.clear()
    gc.collect()
    assert not problems, problems
    assert bare_foreign or not foreign, foreign
    assert len(rec.reports) == 24
    assert {r.abandoned_reason for r in rec.reports} <= {"close", "gc"}
