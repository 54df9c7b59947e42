"""Whose time is whose: a wait is the server's, from the pull to when the SSE frame is decoded; the SDK's
own work on an event (JSON, model building) is not wait; the gap between the stream being handed to the caller and
its first pull is the caller's, consumer time. Real clients against a scripted server on 127.0.0.1 that sends every
event at once, so any long wait would be a misattribution."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import anthropic
import openai
import pytest

from otelstream import names
from tests.support import bodies
from tests.support.paths import REPO
from tests.support.recording import RecordingListener
from tests.support.scripted_server import SCRIPT_HEADER, ScriptedServer

MSGS: Any = [{"role": "user", "content": "x"}]

# The first Responses stream of a process: the SDK builds its pydantic models on first use (the Response model, for
# response.created), which took 0.3-4 s and was reported as the wait for the first event.
FIRST_STREAM = """
import json
import openai
from otelstream import adapters
from tests.support import bodies
from tests.support.recording import RecordingListener
from tests.support.scripted_server import SCRIPT_HEADER, ScriptedServer

server = ScriptedServer().start()
key = server.add([b"".join(bodies.responses("ok"))])  # one chunk: every event is there at once
rec = RecordingListener()
adapters.install(rec)
client = openai.OpenAI(api_key="k", base_url=server.base_url + "/v1", max_retries=0)
items = list(client.responses.create(model="gpt-test", input="x", stream=True, extra_headers={SCRIPT_HEADER: key}))
(r,) = rec.reports
print(json.dumps({"outcome": r.outcome, "events": r.events, "items": len(items), "max_wait_s": r.max_wait_ns / 1e9,
                  "consumer_s": r.consumer_ns / 1e9}))
"""


def test_first_responses_stream_of_a_fresh_process_waits_for_nothing() -> None:
    out = subprocess.run([sys.executable, "-c", FIRST_STREAM], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["outcome"] == names.COMPLETED and r["events"] == r["items"] == 6
    assert r["max_wait_s"] < 0.1, r  # the SDK's model building is not the server's wait...
    assert r["consumer_s"] < 0.1, r  # ...nor the caller's


def _open(surface: str, server: ScriptedServer, is_async: bool) -> Any:
    key = server.add([b"".join(bodies.responses("ok") if surface == names.RESPONSES else bodies.messages("ok"))])
    headers = {SCRIPT_HEADER: key}
    if surface == names.MESSAGES:
        cls: Any = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        client = cls(api_key="k", base_url=server.base_url, max_retries=0)
        return client.messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True,
                                      extra_headers=headers)  # fmt: skip
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    client = cls(api_key="k", base_url=server.base_url + "/v1", max_retries=0)
    return client.responses.create(model="gpt-test", input="x", stream=True, extra_headers=headers)


@pytest.mark.parametrize("surface", [names.RESPONSES, names.MESSAGES])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_caller_that_sleeps_before_its_first_pull(
    rec: RecordingListener, scripted: ScriptedServer, surface: str, is_async: bool
) -> None:
    """``stream = create(...); time.sleep(1); for ev in stream: ...``: the second is the caller's (consumer time), not
    a wait; time to first delta stays what the caller experienced."""
    if is_async:

        async def go() -> int:
            stream = await _open(surface, scripted, True)
            await asyncio.sleep(1.0)
            return len([ev async for ev in stream])

        n = asyncio.run(go())
    else:
        stream = _open(surface, scripted, False)
        time.sleep(1.0)
        n = len(list(stream))
    r = rec.one()
    assert r.outcome == names.COMPLETED and n == r.events
    assert r.consumer_ns >= 1_000_000_000, r
    assert r.max_wait_ns < 100_000_000, r
    assert r.time_to_first_delta_ns is not None and r.time_to_first_delta_ns >= 1_000_000_000
