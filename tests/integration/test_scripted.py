"""What the fake provider cannot script, from a tiny scripted server on 127.0.0.1 (``scripted.py``): ``event: ping``
on the OpenAI surfaces, a read timeout in the middle of a body, a half-written chunk, undecodable data, the
``{"error": …}`` envelope on Responses, untyped lifecycle events, a trailing ``[DONE]``. Real clients, sync and
async; the caller's exception and the one report are both checked."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest

from otelstream import names, offline
from tests.support import bodies
from tests.support.paths import FIXTURES
from tests.support.recording import RecordingListener
from tests.support.scripted_server import SCRIPT_HEADER, Half, Pause, ScriptedServer, Step
from tests.support.sdk_features import ANTHROPIC_HTTP, CONNECTION_ERRORS, OPENAI_HTTP, TIMEOUT_ERRORS

MSGS: Any = [{"role": "user", "content": "x"}]
PING = b'event: ping\ndata: {"type": "ping"}\n\n'

OPEN: dict[str, Callable[[Any, dict[str, str]], Any]] = {
    names.RESPONSES: lambda c, h: c.responses.create(model="gpt-test", input="x", stream=True, extra_headers=h),
    names.CHAT_COMPLETIONS: lambda c, h: c.chat.completions.create(
        model="gpt-test", messages=MSGS, stream=True, stream_options={"include_usage": True}, extra_headers=h),
    names.COMPLETIONS: lambda c, h: c.completions.create(
        model="gpt-test", prompt="x", stream=True, stream_options={"include_usage": True}, extra_headers=h),
    names.MESSAGES: lambda c, h: c.messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True,
                                                   extra_headers=h),
}  # fmt: skip
FRAMES = {
    names.RESPONSES: bodies.responses,
    names.CHAT_COMPLETIONS: bodies.chat,
    names.COMPLETIONS: bodies.completions,
    names.MESSAGES: bodies.messages,
}
ALL = list(OPEN)
OPENAI = [names.RESPONSES, names.CHAT_COMPLETIONS, names.COMPLETIONS]


@dataclass
class Seen:
    items: list[Any]
    exc: BaseException | None


def _client(server: ScriptedServer, surface: str, is_async: bool, timeout: float) -> Any:
    lib = ANTHROPIC_HTTP if surface == names.MESSAGES else OPENAI_HTTP
    http = lib.AsyncClient(verify=False) if is_async else lib.Client(verify=False)
    if surface == names.MESSAGES:
        cls: Any = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        return cls(api_key="k", base_url=server.base_url, max_retries=0, timeout=timeout, http_client=http)
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(api_key="k", base_url=server.base_url + "/v1", max_retries=0, timeout=timeout, http_client=http)


def play(server: ScriptedServer, surface: str, steps: list[Step], is_async: bool, timeout: float = 5.0) -> Seen:
    key = server.add(steps)
    c = _client(server, surface, is_async, timeout)
    headers = {SCRIPT_HEADER: key}
    items: list[Any] = []
    if not is_async:
        try:
            with OPEN[surface](c, headers) as stream:
                for item in stream:
                    items.append(item)
        except Exception as exc:
            return Seen(items, exc)
        return Seen(items, None)

    async def go() -> Seen:
        try:
            stream = await OPEN[surface](c, headers)
            async with stream:
                async for item in stream:
                    items.append(item)
        except Exception as exc:
            return Seen(items, exc)
        return Seen(items, None)

    return asyncio.run(go())


def _types(items: list[Any]) -> list[str | None]:
    return [getattr(i, "type", None) for i in items]


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def is_async(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.mark.parametrize("surface", OPENAI)
def test_event_ping_on_openai_surfaces(rec: RecordingListener, scripted: ScriptedServer, surface: str,
                                       is_async: bool) -> None:  # fmt: skip
    """openai yields an `event: ping` block to the caller as an item (its union's first member): it is a keepalive,
    not an event, and the stream still completes."""
    frames = FRAMES[surface]("ok")
    seen = play(scripted, surface, [frames[0], PING, *frames[1:2], PING, *frames[2:]], is_async)
    assert seen.exc is None
    r = rec.one()
    assert r.outcome == names.COMPLETED
    assert r.keepalives == 2
    assert len(seen.items) == r.events + 2  # the caller got the two pings as items; they are not counted as events
    assert r.deltas == 2


@pytest.mark.parametrize("surface", ALL)
def test_comment_keepalives_live_match_check(rec: RecordingListener, scripted: ScriptedServer, surface: str,
                                             is_async: bool, tmp_path: Any) -> None:  # fmt: skip
    """A server that sends `: keepalive` comment lines while it thinks (the seeds' compatible provider does, every
    ~12 s): the SDKs' decoders drop them, so they are counted where the body's bytes pass, as `check` counts them,
    with the largest gap between two (what a proxy's read timeout must exceed). One of them shares a chunk with an
    event, one is split from its line's end by a chunk boundary, one ends its line with a bare CR."""
    frames = FRAMES[surface]("ok")
    comment = b": keepalive\n\n"
    steps: list[Step] = [
        frames[0], comment, Pause(0.1), comment, Pause(0.4), comment + frames[1], b": keep", b"alive\n\n",
        b": cr\r\r", *frames[2:],
    ]  # fmt: skip
    seen = play(scripted, surface, steps, is_async)
    assert seen.exc is None
    r = rec.one()
    body = tmp_path / "body.sse"
    body.write_bytes(b"".join(s for s in steps if isinstance(s, bytes)))
    offline_report = offline.analyse(str(body), surface).reports[0]
    assert r.outcome == offline_report.outcome == names.COMPLETED
    assert r.keepalives == offline_report.keepalives == 5
    # the 0.4 s pause, as the client read it (the two reads each land within a few ms of their writes)
    assert r.max_keepalive_gap_ns is not None and 350_000_000 <= r.max_keepalive_gap_ns < 1_000_000_000


@pytest.mark.parametrize("surface", OPENAI)
def test_event_ping_without_data_on_openai(rec: RecordingListener, scripted: ScriptedServer, surface: str,
                                           is_async: bool) -> None:  # fmt: skip
    """A data-less `event: ping` reaches openai's `sse.json()` as empty data: JSONDecodeError, undecodable →
    transport_error (the caller gets the SDK's own exception)."""
    frames = FRAMES[surface]("ok")
    seen = play(scripted, surface, [frames[0], b"event: ping\n\n", *frames[1:]], is_async)
    assert isinstance(seen.exc, json.JSONDecodeError)
    r = rec.one()
    assert r.outcome == names.TRANSPORT_ERROR and r.events == 1


@pytest.mark.parametrize("surface", ALL)
def test_read_timeout_mid_body(rec: RecordingListener, scripted: ScriptedServer, surface: str,
                               is_async: bool) -> None:  # fmt: skip
    frames = FRAMES[surface]("ok")
    seen = play(scripted, surface, [*frames[:2], Pause(0.5), *frames[2:]], is_async, timeout=0.15)
    assert isinstance(seen.exc, TIMEOUT_ERRORS), repr(seen.exc)
    r = rec.one()
    assert (r.outcome, r.error_type, r.error_class) == (names.TRANSPORT_ERROR, None, names.EC_TIMEOUT)
    assert r.events == len(seen.items) == 2
    assert r.max_wait_ns >= 140_000_000  # the wait that timed out is in the stall measure


@pytest.mark.parametrize("surface", ALL)
def test_half_written_chunk(rec: RecordingListener, scripted: ScriptedServer, surface: str, is_async: bool) -> None:
    frames = FRAMES[surface]("ok")
    seen = play(scripted, surface, [*frames[:2], Half(frames[2])], is_async)
    assert isinstance(seen.exc, CONNECTION_ERRORS), repr(seen.exc)
    r = rec.one()
    assert (r.outcome, r.error_type, r.error_class) == (names.TRANSPORT_ERROR, None, names.EC_CONNECTION)
    assert r.events == len(seen.items) == 2


@pytest.mark.parametrize("surface", ALL)
def test_undecodable_data(rec: RecordingListener, scripted: ScriptedServer, surface: str, is_async: bool) -> None:
    frames = FRAMES[surface]("ok")
    name = b"event: content_block_delta\n" if surface == names.MESSAGES else b""
    seen = play(scripted, surface, [*frames[:2], name + b"data: {not json\n\n", *frames[2:]], is_async)
    assert isinstance(seen.exc, json.JSONDecodeError), repr(seen.exc)
    r = rec.one()
    assert r.outcome == names.TRANSPORT_ERROR and r.events == 2
    assert (r.error_type, r.error_class) == (None, names.EC_PROTOCOL)


def test_error_envelope_on_responses(rec: RecordingListener, scripted: ScriptedServer, is_async: bool) -> None:
    """`{"error": …}` in a Responses `data:` (a gateway's way) makes openai raise APIError: error, not transport."""
    frames = bodies.responses("ok")
    envelope = b'data: {"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}}\n\n'
    seen = play(scripted, names.RESPONSES, [*frames[:4], envelope], is_async)
    assert isinstance(seen.exc, openai.APIError) and not isinstance(seen.exc, openai.APIConnectionError)
    r = rec.one()
    assert (r.outcome, r.error_type, r.events) == (names.ERROR, "insufficient_quota", 4)
    assert r.error_class == names.EC_QUOTA_EXCEEDED


def test_untyped_lifecycle_events(rec: RecordingListener, scripted: ScriptedServer, is_async: bool) -> None:
    """A gateway that drops `type` from the payload: openai builds the union's first member with type=None; the
    SSE `event:` name (seen at `_iter_events`) still classifies it, so the stream completes, with an anomaly."""
    steps: list[Step] = []
    for frame in bodies.responses("ok"):
        head, _, data = frame.partition(b"data: ")
        payload = json.loads(data)
        if not payload["type"].endswith(".delta"):
            del payload["type"]
        steps.append(head + b"data: " + json.dumps(payload).encode() + b"\n\n")
    seen = play(scripted, names.RESPONSES, steps, is_async)
    assert seen.exc is None and _types(seen.items)[0] is None
    r = rec.one()
    assert (r.outcome, r.events, r.deltas) == (names.COMPLETED, 6, 2)
    assert dict(r.anomaly_counts).get(names.ANOM_UNTYPED_EVENT, 0) == 4


def test_untyped_terminal_carries_usage(rec: RecordingListener, scripted: ScriptedServer) -> None:
    steps: list[Step] = []
    for frame in bodies.responses("ok"):
        head, _, data = frame.partition(b"data: ")
        payload = json.loads(data)
        if payload["type"] == "response.completed":
            del payload["type"]
        steps.append(head + b"data: " + json.dumps(payload).encode() + b"\n\n")
    assert play(scripted, names.RESPONSES, steps, False).exc is None
    r = rec.one()
    assert (r.outcome, r.usage.output_tokens, r.response_id) == (names.COMPLETED, 2, "resp_1")


def test_trailing_done_on_responses(rec: RecordingListener, scripted: ScriptedServer, is_async: bool) -> None:
    seen = play(scripted, names.RESPONSES, [*bodies.responses("ok"), b"data: [DONE]\n\n"], is_async)
    assert seen.exc is None and len(seen.items) == 6
    r = rec.one()
    assert (r.outcome, r.events, r.done_sentinel) == (names.COMPLETED, 6, True)
    assert dict(r.anomaly_counts).get(names.ANOM_TRAILING_DONE) == 1


@pytest.mark.parametrize("surface", ALL)
def test_scripted_pause_before_first_delta(rec: RecordingListener, scripted: ScriptedServer, surface: str,
                                           is_async: bool) -> None:  # fmt: skip
    frames = FRAMES[surface]("ok")
    first = bodies.first_delta_index(frames)
    seen = play(scripted, surface, [*frames[:first], Pause(0.2), *frames[first:]], is_async)
    assert seen.exc is None
    r = rec.one()
    assert r.outcome == names.COMPLETED
    assert r.time_to_first_delta_ns is not None and r.time_to_first_delta_ns >= 200_000_000


@pytest.mark.parametrize("surface", ALL)
def test_close_from_elsewhere_while_a_pull_waits(rec: RecordingListener, scripted: ScriptedServer, surface: str,
                                                 is_async: bool) -> None:  # fmt: skip
    """A "stop generating" from another thread or task closes the stream while the consumer waits for the next event:
    the consumer then gets the SDK's connection error, but the stream was the caller's to stop (abandoned, close),
    not a transport failure."""
    frames = FRAMES[surface]("ok")
    key = scripted.add([*frames[:2], Pause(2.0), *frames[2:]])
    c = _client(scripted, surface, is_async, 5.0)
    headers = {SCRIPT_HEADER: key}
    if not is_async:
        stream = OPEN[surface](c, headers)
        closer = threading.Timer(0.2, stream.close)
        with pytest.raises(Exception):  # noqa: B017 (each SDK raises its own connection error)
            for i, _ in enumerate(stream):
                if i == 1:  # the next pull waits for the pause
                    closer.start()
        closer.join()
    else:

        async def go() -> None:
            stream = await OPEN[surface](c, headers)

            async def stop() -> None:
                await asyncio.sleep(0.2)
                await stream.close()

            tasks = []
            with pytest.raises(Exception):  # noqa: B017
                i = 0
                async for _ in stream:
                    if i == 1:
                        tasks.append(asyncio.create_task(stop()))
                    i += 1
            await asyncio.gather(*tasks)

        asyncio.run(go())
    r = rec.one()
    assert (r.outcome, r.abandoned_reason, r.events) == (names.ABANDONED, names.ABANDON_CLOSE, 2)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer (POSIX)")
@pytest.mark.parametrize("surface", ALL)
def test_close_from_a_signal_handler_while_a_pull_waits(rec: RecordingListener, scripted: ScriptedServer,
                                                        surface: str) -> None:  # fmt: skip
    """The sync timeout pattern: a SIGALRM handler closes the stream while the main thread waits in a pull. The
    handler runs on top of the stream's own iteration, yet the close is the caller's."""
    frames = FRAMES[surface]("ok")
    key = scripted.add([*frames[:2], Pause(2.0), *frames[2:]])
    stream = OPEN[surface](_client(scripted, surface, False, 5.0), {SCRIPT_HEADER: key})
    previous = signal.signal(signal.SIGALRM, lambda *_: stream.close())
    try:
        with pytest.raises(Exception):  # noqa: B017 (each SDK raises its own connection error)
            for i, _ in enumerate(stream):
                if i == 1:  # the next pull waits for the pause
                    signal.setitimer(signal.ITIMER_REAL, 0.2)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    r = rec.one()
    assert (r.outcome, r.abandoned_reason, r.events) == (names.ABANDONED, names.ABANDON_CLOSE, 2)


# --- what compatible servers send on chat (issue 17): live, and the same as `check` ---------------------------------
CHAT_SHAPES = ["chat-thinking-parts.sse", "chat-no-finish-done.sse", "chat-no-finish-no-done.sse",
               "chat-cache-write-details.sse", "chat-cache-write-top-level.sse"]  # fmt: skip


def _frames(name: str) -> list[bytes]:
    return [f + b"\n\n" for f in (FIXTURES / name).read_bytes().split(b"\n\n") if f.strip()]


@pytest.mark.parametrize("name", CHAT_SHAPES)
def test_chat_shapes_live_match_check(rec: RecordingListener, scripted: ScriptedServer, name: str,
                                      is_async: bool) -> None:  # fmt: skip
    seen = play(scripted, names.CHAT_COMPLETIONS, _frames(name), is_async)
    assert seen.exc is None
    r = rec.one()
    want = offline.analyse(str(FIXTURES / name)).reports[0]
    fields = ("outcome", "error_type", "error_class", "events", "deltas", "usage", "finish_reasons", "done_sentinel",
              "anomaly_counts")  # fmt: skip
    assert {f: getattr(r, f) for f in fields} == {f: getattr(want, f) for f in fields}


def test_thinking_parts_live_ttfd_is_the_first_thinking_part(rec: RecordingListener, scripted: ScriptedServer,
                                                             is_async: bool) -> None:  # fmt: skip
    """The answer comes after a pause; the first delta, the first thinking part, came before it."""
    frames = _frames("chat-thinking-parts.sse")
    seen = play(scripted, names.CHAT_COMPLETIONS, [*frames[:4], Pause(0.3), *frames[4:]], is_async)
    assert seen.exc is None
    r = rec.one()
    assert r.outcome == names.COMPLETED and r.deltas == 4
    assert r.time_to_first_delta_ns is not None and r.time_to_first_delta_ns < 300_000_000 <= r.duration_s * 1e9


def test_done_without_finish_reason_live(rec: RecordingListener, scripted: ScriptedServer,
                                         is_async: bool) -> None:  # fmt: skip
    """The same body with and without [DONE]: completed (missing_finish_reason) vs cut, and a cut has no error
    type but the class cut."""
    frames = _frames("chat-no-finish-done.sse")
    assert frames[-1] == b"data: [DONE]\n\n"
    play(scripted, names.CHAT_COMPLETIONS, frames, is_async)
    r = rec.one()
    assert (r.outcome, r.error_class) == (names.COMPLETED, None)
    assert dict(r.anomaly_counts) == {names.ANOM_MISSING_FINISH_REASON: 1}
    rec.reports.clear()
    play(scripted, names.CHAT_COMPLETIONS, frames[:-1], is_async)
    r = rec.one()
    assert (r.outcome, r.error_type, r.error_class) == (names.CUT, None, names.EC_CUT)
