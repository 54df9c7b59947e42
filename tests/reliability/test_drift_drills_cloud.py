"""The drift drills on the Gemini and Bedrock surfaces: the installed SDK is reshaped, at start-up, before
``instrument()``, the way a minor release could ship, and a compact fault matrix runs under each reshaping, sync and
async where it applies. None may move an outcome, an error class, an error type or an abandonment reason from what
the healthy live tests (tests/integration/test_gemini_live.py, tests/adapters/test_bedrock_live.py) assert; each
stream gives exactly one report; a caller's close reads ``close`` as the close returns.

Bedrock (botocore / aiobotocore):

- ``read-ahead``: the raw body is read ahead into a queue by a background thread (sync) or task (async) before the
  caller pulls; the event stream decodes from that queue;
- ``foreign-close``: ``EventStream.close()`` closes the raw body on a helper thread;
- ``close-keeps-body``: ``EventStream.close()`` no longer closes the raw body.

Gemini (google-genai):

- ``read-ahead``: the response's segments are read ahead into a queue by a background thread (sync) or task (async);
- ``lookahead``: the public stream generator reads one item ahead before it yields the current one.

Each reshaping counts its own runs (``HITS``): a cell whose reshaping never ran would prove nothing.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("google.genai")
pytest.importorskip("boto3")
pytest.importorskip("aiobotocore")

import aiobotocore.eventstream
import botocore.eventstream
from botocore.eventstream import EventStreamBuffer
from google.genai import _api_client, models

from otelstream import adapters, names
from tests.adapters.bedrock_driver import run as bedrock_run
from tests.adapters.test_bedrock_live import ACTIONS as BEDROCK_ACTIONS
from tests.adapters.test_bedrock_live import CONVERSE
from tests.integration.test_gemini_live import EXPECT, client_for
from tests.support.bedrock_server import BedrockServer
from tests.support.gemini_server import GeminiServer
from tests.support.recording import RecordingListener

HITS: collections.Counter[str] = collections.Counter()
Patches = list[tuple[Any, str, Callable[..., Any]]]
_END = object()


def _pumped(source: Iterator[Any], name: str) -> Iterator[Any]:
    """``source`` read to its end (or its error) on a thread of the library's own; its items handed over in order."""
    HITS[name] += 1
    items: queue.Queue[tuple[object, Any]] = queue.Queue()

    def pump() -> None:
        try:
            for item in source:
                items.put((None, item))
            items.put((_END, None))
        except BaseException as exc:  # handed to the puller, as the library would
            items.put((_END, exc))

    threading.Thread(target=pump, daemon=True).start()
    while True:
        end, value = items.get()
        if end is _END:
            if value is not None:
                raise value
            return
        yield value


async def _apumped(source: AsyncIterator[Any], name: str) -> AsyncIterator[Any]:
    """``_pumped`` for an async source: read ahead in a task of the library's own."""
    HITS[name] += 1
    items: asyncio.Queue[tuple[object, Any]] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in source:
                items.put_nowait((None, item))
            items.put_nowait((_END, None))
        except Exception as exc:
            items.put_nowait((_END, exc))

    pumping = asyncio.ensure_future(pump())
    try:
        while True:
            end, value = await items.get()
            if end is _END:
                if value is not None:
                    raise value
                return
            yield value
    finally:
        pumping.cancel()


# --- Bedrock reshapings ------------------------------------------------------------------------------------------
def _bedrock_read_ahead() -> Patches:
    def raw_events(self: Any) -> Iterator[Any]:
        buffer = EventStreamBuffer()
        for chunk in _pumped(self._raw_stream.stream(), "read-ahead"):  # the pump holds the body, not the stream
            buffer.add_data(chunk)
            yield from buffer

    async def araw_events(self: Any) -> AsyncIterator[Any]:
        async def chunks() -> AsyncIterator[bytes]:
            async for chunk, _ in self._raw_stream.content.iter_chunks():
                yield chunk

        buffer = EventStreamBuffer()
        async for chunk in _apumped(chunks(), "read-ahead"):
            buffer.add_data(chunk)
            for event in buffer:
                yield event

    return [(botocore.eventstream.EventStream, "_create_raw_event_generator", raw_events),
            (aiobotocore.eventstream.AioEventStream, "_create_raw_event_generator", araw_events)]  # fmt: skip


def _bedrock_foreign_close() -> Patches:
    def close(self: Any) -> None:
        HITS["foreign-close"] += 1
        helper = threading.Thread(target=self._raw_stream.close)
        helper.start()
        helper.join()

    return [(botocore.eventstream.EventStream, "close", close)]  # AioEventStream inherits it


def _bedrock_close_keeps_body() -> Patches:
    def close(self: Any) -> None:
        HITS["close-keeps-body"] += 1

    return [(botocore.eventstream.EventStream, "close", close)]


BEDROCK_SHAPES = {"read-ahead": _bedrock_read_ahead, "foreign-close": _bedrock_foreign_close,
                  "close-keeps-body": _bedrock_close_keeps_body}  # fmt: skip


# --- Gemini reshapings -------------------------------------------------------------------------------------------
def _gemini_read_ahead() -> Patches:
    segments, async_segments = _api_client.HttpResponse.segments, _api_client.HttpResponse.async_segments

    def ahead(self: Any) -> Iterator[Any]:
        return _pumped(segments(self), "read-ahead")

    def aahead(self: Any) -> AsyncIterator[Any]:
        return _apumped(async_segments(self), "read-ahead")

    return [(_api_client.HttpResponse, "segments", ahead), (_api_client.HttpResponse, "async_segments", aahead)]


def _gemini_lookahead() -> Patches:
    stream, astream = models.Models.generate_content_stream, models.AsyncModels.generate_content_stream

    def one_ahead(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        HITS["lookahead"] += 1
        it = stream(self, *args, **kwargs)
        try:
            current = next(it)
        except StopIteration:
            return
        for following in it:
            yield current
            current = following
        yield current

    async def aone_ahead(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        HITS["lookahead"] += 1
        it = await astream(self, *args, **kwargs)

        async def gen() -> AsyncIterator[Any]:
            try:
                current = await it.__anext__()
            except StopAsyncIteration:
                return
            async for following in it:
                yield current
                current = following
            yield current

        return gen()

    return [(models.Models, "generate_content_stream", one_ahead),
            (models.AsyncModels, "generate_content_stream", aone_ahead)]  # fmt: skip


GEMINI_SHAPES = {"read-ahead": _gemini_read_ahead, "lookahead": _gemini_lookahead}


def _reshape(monkeypatch: pytest.MonkeyPatch, patches: Patches) -> None:
    for owner, attr, func in patches:
        monkeypatch.setattr(owner, attr, func)
    HITS.clear()


def _runs_under(shape: str, action: str) -> bool:
    """Whether the reshaping acts in a cell: a close reshaping only in a caller's close; a read-ahead wherever the
    stream is pulled. (The other cells run under it too: nothing otelstream does there may call into it wrongly.)"""
    if shape in ("foreign-close", "close-keeps-body"):
        return action in ("break_close", "close_unread")
    return action != "close_unread"


# --- Bedrock matrix ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bedrock() -> Iterator[BedrockServer]:
    server = BedrockServer()
    with server:
        yield server


BEDROCK_CELLS = [*(("drain", s) for s in ("completed", "cut", "error", "reset")),
                 *((a, "completed") for a in ("break_close", "close_unread", "drop"))]  # fmt: skip


def _bedrock_cells() -> list[Any]:
    cells = []
    for shape in BEDROCK_SHAPES:
        for action, script in BEDROCK_CELLS:
            for mode in ("sync", "async"):
                cells.append(pytest.param(shape, mode, action, script, id=f"{shape}-{mode}-{action}-{script}"))
    return cells


@pytest.mark.parametrize(("shape", "mode", "action", "script"), _bedrock_cells())
def test_bedrock_cell(monkeypatch: pytest.MonkeyPatch, bedrock: BedrockServer, shape: str, mode: str,
                      action: str, script: str) -> None:  # fmt: skip
    _reshape(monkeypatch, BEDROCK_SHAPES[shape]())
    listener = RecordingListener()
    adapters.install(listener)
    try:
        seen = bedrock_run(bedrock, mode, "converse", script, action)
        if action == "close_unread" or action == "break_close":
            assert len(listener.reports) == 1, "a caller's close is reported as it returns"
        if action == "drop":
            gc.collect()
        r = listener.one()
    finally:
        adapters.uninstall()
    assert bool(HITS[shape]) == _runs_under(shape, action), f"the {shape} reshaping ran {HITS[shape]} times"
    if action == "drain":
        outcome, klass, error_type, reasons = CONVERSE[script]
        assert (r.outcome, r.error_class, r.error_type, r.abandoned_reason) == (outcome, klass, error_type, None), r
        assert r.finish_reasons == reasons
        assert r.events == len(seen.events)
    else:
        assert (r.outcome, r.abandoned_reason, r.error_class) == (*BEDROCK_ACTIONS[action], None), r
        assert seen.error is None
    gc.collect()
    assert len(listener.reports) == 1 and len(listener.started) == 1


# --- Gemini matrix -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gemini() -> Iterator[GeminiServer]:
    server = GeminiServer()
    with server:
        yield server


GEMINI_MODES = ("sync-httpx2", "async-aiohttp", "async-httpx2")
GEMINI_CELLS = [*(("drain", s) for s in ("completed", "cut", "error", "reset")),
                *((a, "completed") for a in ("break_close", "drop"))]  # fmt: skip


def _drain(client: Any, mode: str, script: str) -> tuple[int, BaseException | None]:
    if mode.startswith("sync"):
        got = 0
        try:
            for _ in client.models.generate_content_stream(model=script, contents="hi"):
                got += 1
        except Exception as exc:  # the script's failure: judged from the report
            return got, exc
        return got, None

    async def go() -> tuple[int, BaseException | None]:
        got = 0
        try:
            async for _ in await client.aio.models.generate_content_stream(model=script, contents="hi"):
                got += 1
        except Exception as exc:
            return got, exc
        return got, None

    return asyncio.run(go())


def _end_early(client: Any, mode: str, action: str, listener: RecordingListener) -> None:
    """One item, then the caller's close (reported as it returns) or the stream dropped."""
    if mode.startswith("sync"):
        stream = client.models.generate_content_stream(model="completed", contents="hi")
        next(stream)
        if action == "break_close":
            stream.close()
            assert len(listener.reports) == 1, "a caller's close is reported as it returns"
        del stream
        return

    async def go() -> None:
        stream = await client.aio.models.generate_content_stream(model="completed", contents="hi")
        await stream.__anext__()
        if action == "break_close":
            await stream.aclose()
            assert len(listener.reports) == 1, "a caller's close is reported as it returns"
        del stream
        gc.collect()
        await asyncio.sleep(0)  # the loop's finaliser of a dropped async generator runs here

    asyncio.run(go())


def _gemini_cells() -> list[Any]:
    """Every transport under the read-ahead (it sits on the transport's reads); the lookahead sits above them, so
    one async transport (the default) is enough there."""
    return [pytest.param(shape, mode, action, script, id=f"{shape}-{mode}-{action}-{script}")
            for shape in GEMINI_SHAPES for mode in GEMINI_MODES for action, script in GEMINI_CELLS
            if not (shape == "lookahead" and mode == "async-httpx2")]  # fmt: skip


@pytest.mark.parametrize(("shape", "mode", "action", "script"), _gemini_cells())
def test_gemini_cell(monkeypatch: pytest.MonkeyPatch, gemini: GeminiServer, shape: str, mode: str, action: str,
                     script: str) -> None:  # fmt: skip
    _reshape(monkeypatch, GEMINI_SHAPES[shape]())
    listener = RecordingListener()
    adapters.install(listener)
    try:
        client = client_for(gemini, mode)
        if action == "drain":
            got, error = _drain(client, mode, script)
        else:
            _end_early(client, mode, action, listener)
        gc.collect()
        r = listener.one()
    finally:
        adapters.uninstall()
    assert HITS[shape], f"the {shape} reshaping never ran"
    if action == "drain":
        want = EXPECT[script]
        assert (r.outcome, r.error_class, r.error_type, r.abandoned_reason) == (
            want.outcome, want.error_class, want.error_type, None), r  # fmt: skip
        assert r.finish_reasons == want.finish
        assert r.events == got
        assert (error is None) == (want.outcome in (names.COMPLETED, names.CUT, names.INCOMPLETE))  # the caller's view
        if shape == "read-ahead":  # a lookahead may raise before it hands over the item it holds
            assert r.deltas == want.deltas
    else:
        want_reason = names.ABANDON_CLOSE if action == "break_close" else names.ABANDON_GC
        assert (r.outcome, r.abandoned_reason, r.error_class) == (names.ABANDONED, want_reason, None), r
    gc.collect()
    assert len(listener.reports) == 1 and len(listener.started) == 1
