"""Helper surfaces (``.stream()`` managers, ``text_stream``, ``until_done``, final-response getters), raw and
streaming responses, the client-side resume filter, and failure isolation."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from typing import Any

import httpx2
import openai
import pytest

from otelstream import _guard, names
from tests.support.clients import anthropic_client, async_anthropic_client, async_openai_client, openai_client
from tests.support.recording import RecordingListener
from tests.support.sdk_features import OPENAI_HTTP

MSGS = [{"role": "user", "content": "x"}]


def test_responses_stream_helper(rec: RecordingListener) -> None:
    with openai_client().responses.stream(model="gpt-test", input="x") as s:
        final = s.get_final_response()
    assert final.id == "resp_1"
    r = rec.one()
    assert (r.outcome, r.events, r.deltas, r.usage.output_tokens) == (names.COMPLETED, 6, 2, 2)


def test_responses_stream_helper_until_done_and_iteration(rec: RecordingListener) -> None:
    with openai_client().responses.stream(model="gpt-test", input="x") as s:
        types = [e.type for e in s]
    assert types[-1] == "response.completed"
    with openai_client().responses.stream(model="gpt-test", input="x") as s:
        s.until_done()
    assert [r.events for r in rec.reports] == [6, 6]  # each wire event once, helper events not counted


def test_responses_stream_helper_exit_early(rec: RecordingListener) -> None:
    with openai_client().responses.stream(model="gpt-test", input="x") as s:
        next(iter(s))
    r = rec.one()  # the manager's exit closes `_response` directly (research §1.4 #3)
    assert (r.outcome, r.abandoned_reason) == (names.ABANDONED, names.ABANDON_CLOSE)


def test_responses_resume_helper_filters_client_side(rec: RecordingListener) -> None:
    with openai_client().responses.stream(response_id="resp_1", starting_after=3) as s:
        seen = [e.sequence_number for e in s]
    assert seen == [4, 5]
    r = rec.one()
    assert r.resumed and r.events == 6  # the raw layer sees the replay from 0
    assert r.deltas == 1  # only the delta after starting_after counts
    assert r.sequence.first == 0 and not r.sequence.bad_start


def test_responses_retrieve_server_side_resume(rec: RecordingListener) -> None:
    list(openai_client().responses.retrieve("resp_1", stream=True, starting_after=3))
    r = rec.one()
    assert r.resumed and r.sequence.first == 4 and not r.sequence.bad_start


def test_chat_stream_helper(rec: RecordingListener) -> None:
    with openai_client().chat.completions.stream(model="gpt-test", messages=MSGS,
                                                 stream_options={"include_usage": True}) as s:  # fmt: skip
        events = [e.type for e in s]
        final = s.get_final_completion()
    assert len(events) > 5  # helper events outnumber wire chunks
    assert final.choices[0].message.content == "Hello"
    r = rec.one()
    assert (r.outcome, r.events, r.deltas, r.done_sentinel) == (names.COMPLETED, 5, 2, True)


def test_messages_stream_helpers(rec: RecordingListener) -> None:
    client = anthropic_client()
    with client.messages.stream(model="claude-test", max_tokens=5, messages=MSGS) as s:
        assert "".join(s.text_stream) == "Hello"
    with client.messages.stream(model="claude-test", max_tokens=5, messages=MSGS) as s:
        assert s.get_final_message().content[0].text == "Hello"  # type: ignore[union-attr]
    with client.messages.stream(model="claude-test", max_tokens=5, messages=MSGS) as s:
        s.until_done()
    with client.beta.messages.stream(model="claude-test", max_tokens=5, messages=MSGS) as s:
        s.until_done()
    assert [(r.outcome, r.events, r.deltas, r.usage.input_tokens) for r in rec.reports] == [
        (names.COMPLETED, 7, 2, 16)
    ] * 4


def test_messages_stream_exit_early(rec: RecordingListener) -> None:
    with anthropic_client().messages.stream(model="claude-test", max_tokens=5, messages=MSGS) as s:
        next(iter(s))
    assert rec.one().abandoned_reason == names.ABANDON_CLOSE


def test_async_helpers(rec: RecordingListener) -> None:
    async def go() -> None:
        oa, an = async_openai_client(), async_anthropic_client()
        async with oa.responses.stream(model="gpt-test", input="x") as s:
            await s.get_final_response()
        async with oa.chat.completions.stream(model="gpt-test", messages=MSGS) as c:
            await c.get_final_completion()
        async with an.messages.stream(model="claude-test", max_tokens=5, messages=MSGS) as m:
            assert "".join([t async for t in m.text_stream]) == "Hello"
        async with oa.responses.stream(response_id="resp_1", starting_after=3) as s:
            assert [e.sequence_number async for e in s] == [4, 5]

    asyncio.run(go())
    assert [(r.surface, r.outcome, r.deltas) for r in rec.reports] == [
        (names.RESPONSES, names.COMPLETED, 2),
        (names.CHAT_COMPLETIONS, names.COMPLETED, 2),
        (names.MESSAGES, names.COMPLETED, 2),
        (names.RESPONSES, names.COMPLETED, 1),
    ]


def test_with_raw_response_parse(rec: RecordingListener) -> None:
    raw = openai_client().responses.with_raw_response.create(model="gpt-test", input="x", stream=True)
    assert rec.reports == []
    stream = raw.parse()
    assert type(stream) is openai.Stream
    assert len(list(stream)) == 6
    r = rec.one()
    assert (r.outcome, r.events, r.request_id) == (names.COMPLETED, 6, "req_123")
    araw = anthropic_client().messages.with_raw_response.create(model="c", max_tokens=5, messages=MSGS, stream=True)
    list(araw.parse())
    assert rec.reports[1].outcome == names.COMPLETED


def test_with_streaming_response(rec: RecordingListener) -> None:
    with openai_client().chat.completions.with_streaming_response.create(
        model="gpt-test", messages=MSGS, stream=True
    ) as resp:
        chunks = list(resp.parse())
    assert len(chunks) == 5
    assert rec.one().outcome == names.COMPLETED


def test_raw_response_never_parsed_is_reported_once(rec: RecordingListener) -> None:
    raw = openai_client().responses.with_raw_response.create(model="gpt-test", input="x", stream=True)
    del raw
    gc.collect()
    assert rec.one().outcome == names.ABANDONED


def test_unsupported_endpoint_untouched(rec: RecordingListener) -> None:
    # a stream=True request to an endpoint we do not observe: no report, no state, same result
    client = openai_client()
    stream = client.post("/images/generations", body={"prompt": "x"}, cast_to=object, stream=True,
                         stream_cls=openai.Stream[object])  # fmt: skip
    stream.close()
    assert rec.started == [] and rec.reports == []


def test_listener_failures_never_reach_the_caller(rec: RecordingListener, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTELSTREAM_RAISE_INTERNAL_ERRORS", "0")
    rec.fail = True
    got = [e.type for e in openai_client().responses.create(model="gpt-test", input="x", stream=True)]
    assert got[-1] == "response.completed"
    with anthropic_client().messages.stream(model="claude-test", max_tokens=5, messages=MSGS) as s:
        assert "".join(s.text_stream) == "Hello"
    assert _guard.errors  # recorded, not raised
    _guard.errors.clear()


def test_tracker_failure_never_reaches_the_caller(rec: RecordingListener, monkeypatch: pytest.MonkeyPatch) -> None:
    from otelstream.core.tracker import StreamTracker

    def boom(self: StreamTracker, ev: object, name: str | None = None) -> None:
        raise RuntimeError("tracker bug (injected)")

    monkeypatch.setattr(StreamTracker, "event", boom)
    monkeypatch.setenv("OTELSTREAM_RAISE_INTERNAL_ERRORS", "0")
    chunks = list(openai_client().chat.completions.create(model="gpt-test", messages=MSGS, stream=True))
    assert len(chunks) == 5
    assert len(rec.reports) == 1
    _guard.errors.clear()


@pytest.mark.allow_internal_errors
def test_failures_surface_in_strict_mode(rec: RecordingListener) -> None:
    rec.fail = True
    with pytest.raises(RuntimeError, match="injected"):
        list(openai_client().responses.create(model="gpt-test", input="x", stream=True))


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_anthropic_request_preparation_is_not_in_ttfd(rec: RecordingListener, is_async: bool) -> None:
    """Vertex refreshes its token and Bedrock signs in `_prepare_request`, inside `_attempt_request`: t_request is
    when httpx2 sends, after that (0.3 s of preparation here, then the canned body at once)."""
    if not is_async:
        client = anthropic_client()

        def slow(request: object) -> None:
            time.sleep(0.3)

        client._prepare_request = slow  # type: ignore[method-assign]
        list(client.messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True))
    else:
        aclient = async_anthropic_client()

        async def aslow(request: object) -> None:
            await asyncio.sleep(0.3)

        aclient._prepare_request = aslow  # type: ignore[method-assign]

        async def go() -> None:
            async for _ in await aclient.messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True):
                pass

        asyncio.run(go())
    r = rec.one()
    assert r.outcome == names.COMPLETED
    assert r.time_to_first_delta_ns is not None and r.time_to_first_delta_ns < 250_000_000


def test_stopping_the_program_before_the_headers_is_a_cancel_not_an_http_error(rec: RecordingListener) -> None:
    """SystemExit (a shutdown handler) or Ctrl-C while create() waits for the headers: the caller stopped, the
    provider did not fail; the same as when it happens mid-stream."""

    for stop in (SystemExit, KeyboardInterrupt):

        def refuse(request: httpx2.Request, stop: type[BaseException] = stop) -> httpx2.Response:
            raise stop()

        client = openai.OpenAI(api_key="sk-test", base_url="http://mock.test/v1", max_retries=0,
                               http_client=OPENAI_HTTP.Client(transport=OPENAI_HTTP.MockTransport(refuse)))  # fmt: skip
        with pytest.raises(stop):
            client.chat.completions.create(model="gpt-test", messages=MSGS, stream=True)  # type: ignore[arg-type]
    assert [(r.outcome, r.abandoned_reason) for r in rec.reports] == [(names.ABANDONED, names.ABANDON_CANCEL)] * 2


def test_trio_cancellation_is_a_cancel() -> None:
    """anyio on trio (and trio itself) cancel with trio's Cancelled, not asyncio's CancelledError; trio is not a
    dependency, so it is recognised by name."""
    from otelstream.adapters.exceptions import classify_common

    trio_cancelled = type("Cancelled", (BaseException,), {"__module__": "trio._core._run"})
    assert classify_common(trio_cancelled()) == ("cancel", None)
    assert classify_common(asyncio.CancelledError()) == ("cancel", None)
    other = type("Cancelled", (Exception,), {"__module__": "myapp.jobs"})
    assert classify_common(other()) is None


def test_a_patch_module_the_release_lacks_is_told_apart_from_one_not_imported_yet() -> None:
    """``module_absent`` (the missing-patch-module check made at the SDK's import) finds a module the installed
    package does not have without importing anything, and never takes a module merely not imported yet for one."""
    import pkgutil
    import sys

    from otelstream.adapters._patch import module_absent

    assert module_absent("openai.no_such_module") and module_absent("openai.no_such_package.inner")
    assert module_absent("openai._streaming.inner")  # a plain module has no submodules
    assert not module_absent("openai._streaming")
    unimported = (f"openai.{m.name}" for m in pkgutil.iter_modules(openai.__path__))
    lazy = next(name for name in unimported if name not in sys.modules)
    assert not module_absent(lazy)
    assert lazy not in sys.modules  # looked up, not imported


def _sse_server(body: bytes, http: Any = httpx2) -> Any:
    """A MockTransport handler of the SDK's HTTP library answering every request with ``body``."""

    def serve(request: Any) -> Any:
        return http.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return serve


def test_frames_the_sdk_drops_are_read_once_even_last(rec: RecordingListener) -> None:
    """A frame the SDK builds no item from is read when the next frame comes, or at the end: a ping just before EOF
    is still counted, and `[DONE]` as openai's last frame still ends a chat stream."""
    start = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
             "content": [], "model": "claude-test", "usage": {"input_tokens": 3, "output_tokens": 0}}}  # fmt: skip
    body = b"".join(f"event: {k}\ndata: {json.dumps(v)}\n\n".encode() for k, v in (
        ("message_start", start), ("ping", {"type": "ping"}), ("ping", {"type": "ping"})))  # fmt: skip
    list(anthropic_client(_sse_server(body)).messages.create(model="claude-test", max_tokens=5, messages=MSGS,
                                                            stream=True))  # fmt: skip
    r = rec.one()
    assert (r.outcome, r.keepalives, r.events) == (names.CUT, 2, 1)

    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}  # fmt: skip
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
    client = openai_client(_sse_server(body, OPENAI_HTTP))
    list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True))
    r = rec.reports[-1]
    assert (r.outcome, r.done_sentinel, r.deltas) == (names.COMPLETED, True, 1)
    assert names.ANOM_MISSING_FINISH_REASON in {a.kind for a in r.anomalies}
