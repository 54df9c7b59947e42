"""The fault matrix again, under reshapings a minor release of an SDK or of the HTTP library could ship, each applied
at start-up, before ``instrument()``: who ended a stream is decided from the order of what otelstream's own wrappers
saw, so none may move an outcome, an error class or an abandonment reason, sync or async, on the four SSE surfaces.

- ``foreign-close``: the response's close runs on a thread of the library's own (sync), in a task of its own behind
  ``asyncio.shield`` (async);
- ``read-ahead``: the raw body is read ahead into a queue by a background thread (sync) or task (async), with the
  library's own raw iteration, which closes the response there at its end;
- ``lookahead``: the SDK's stream loop reads one SSE frame ahead before it builds an item;
- ``close-closes-generator``: ``Stream.close()`` also closes the SDK's own generator;
- ``close-keeps-response``: ``Stream.close()`` no longer closes the response.
"""

from __future__ import annotations

import asyncio
import collections
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anthropic._streaming
import httpx2
import openai._streaming
import pytest

from otelstream import adapters, names
from otelstream.offline.analysis import analyse
from tests.adapters.test_matrix import (  # noqa: F401 (the matrix's tests, collected here again)
    PATH,
    SURFACES,
    Driver,
    is_async,
    test_break_then_close,
    test_close_after_terminal_keeps_outcome,
    test_close_unread,
    test_cut,
    test_drop_mid_stream,
    test_dropped_after_one_event,
    test_inband_error,
    test_keepalive,
    test_ok_context_manager,
    test_ok_for_loop,
)
from tests.support import bodies
from tests.support.recording import RecordingListener
from tests.support.sdk_features import OPENAI_HTTP

FOUR = [s for s in SURFACES if s.id in ("responses.create", "chat.create", "completions.create", "messages.create")]
SDK_STREAMS = (openai._streaming, anthropic._streaming)
HITS: collections.Counter[str] = collections.Counter()  # each reshaping counts its own runs: it must have run
Patches = list[tuple[Any, str, Callable[..., Any]]]


# --- the reshapings: each returns (owner, attribute, replacement) triples --------------------------------------
def _foreign_close(lib: ModuleType) -> Patches:
    close, aclose = lib.Response.close, lib.Response.aclose

    def on_thread(self: Any) -> None:
        HITS["foreign-close"] += 1
        failed: list[BaseException] = []

        def run() -> None:
            try:
                close(self)
            except BaseException as exc:
                failed.append(exc)

        helper = threading.Thread(target=run)
        helper.start()
        helper.join()
        if failed:
            raise failed[0]

    async def in_task(self: Any) -> None:
        HITS["foreign-close"] += 1
        await asyncio.shield(asyncio.ensure_future(aclose(self)))

    return [(lib.Response, "close", on_thread), (lib.Response, "aclose", in_task)]


def _read_ahead(lib: ModuleType) -> Patches:
    def iter_bytes(self: Any, chunk_size: int | None = None) -> Iterator[bytes]:
        HITS["read-ahead"] += 1
        chunks: queue.Queue[tuple[str, Any]] = queue.Queue()

        def pump() -> None:  # the library's own raw iteration: it closes the response at the end, on this thread
            try:
                for chunk in self.iter_raw():
                    chunks.put(("chunk", chunk))
                chunks.put(("end", None))
            except BaseException as exc:
                chunks.put(("error", exc))

        threading.Thread(target=pump, daemon=True).start()
        try:
            while True:
                kind, value = chunks.get()
                if kind == "end":
                    return
                if kind == "error":
                    raise value
                if value:
                    yield value
        finally:
            self.close()

    async def aiter_bytes(self: Any, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        HITS["read-ahead"] += 1
        chunks: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        async def pump() -> None:  # in a task of its own, closing the response at the end
            try:
                async for chunk in self.aiter_raw():
                    chunks.put_nowait(("chunk", chunk))
                chunks.put_nowait(("end", None))
            except Exception as exc:
                chunks.put_nowait(("error", exc))

        pumping = asyncio.ensure_future(pump())
        try:
            while True:
                kind, value = await chunks.get()
                if kind == "end":
                    return
                if kind == "error":
                    raise value
                if value:
                    yield value
        finally:
            await self.aclose()
            pumping.cancel()

    return [(lib.Response, "iter_bytes", iter_bytes), (lib.Response, "aiter_bytes", aiter_bytes)]


def _lookahead(module: ModuleType) -> Patches:
    """The SDK's loop gets each frame only once the next one was decoded (the tap sees frame N+1 before item N)."""
    stream, astream = module.Stream.__stream__, module.AsyncStream.__stream__

    def sync_stream(self: Any) -> Iterator[Any]:
        events = self._iter_events  # the class's, as patched

        def ahead() -> Iterator[Any]:
            HITS["lookahead"] += 1
            it = events()
            prev = next(it, None)
            for sse in it:
                yield prev
                prev = sse
            if prev is not None:
                yield prev

        self._iter_events = ahead
        return stream(self)  # type: ignore[no-any-return]

    def async_stream(self: Any) -> AsyncIterator[Any]:
        events = self._iter_events

        async def ahead() -> AsyncIterator[Any]:
            HITS["lookahead"] += 1
            it = events().__aiter__()
            try:
                prev = await it.__anext__()
            except StopAsyncIteration:
                return
            async for sse in it:
                yield prev
                prev = sse
            yield prev

        self._iter_events = ahead
        return astream(self)  # type: ignore[no-any-return]

    return [(module.Stream, "__stream__", sync_stream), (module.AsyncStream, "__stream__", async_stream)]


def _close_closes_generator(module: ModuleType) -> Patches:
    close, aclose = module.Stream.close, module.AsyncStream.close

    def sync_close(self: Any) -> None:
        HITS["close-closes-generator"] += 1
        it = self.__dict__.get("_iterator")
        if it is not None:
            it.close()
        close(self)

    async def async_close(self: Any) -> None:
        HITS["close-closes-generator"] += 1
        it = self.__dict__.get("_iterator")
        if it is not None:
            await it.aclose()
        await aclose(self)

    return [(module.Stream, "close", sync_close), (module.AsyncStream, "close", async_close)]


def _close_keeps_response(module: ModuleType) -> Patches:
    def sync_close(self: Any) -> None:
        HITS["close-keeps-response"] += 1

    async def async_close(self: Any) -> None:
        HITS["close-keeps-response"] += 1

    return [(module.Stream, "close", sync_close), (module.AsyncStream, "close", async_close)]


HTTP_SHAPES = {"foreign-close": _foreign_close, "read-ahead": _read_ahead}
SDK_SHAPES = {"lookahead": _lookahead, "close-closes-generator": _close_closes_generator,
              "close-keeps-response": _close_keeps_response}  # fmt: skip
SHAPES = sorted((*HTTP_SHAPES, *SDK_SHAPES))


@pytest.fixture(params=SHAPES)
def reshaped(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name = str(request.param)
    if name in HTTP_SHAPES:
        owners = [HTTP_SHAPES[name](lib) for lib in {httpx2, OPENAI_HTTP}]
    else:
        owners = [SDK_SHAPES[name](module) for module in SDK_STREAMS]
    for patches in owners:
        for owner, attr, func in patches:
            monkeypatch.setattr(owner, attr, func)
    HITS.clear()
    return name


@pytest.fixture
def rec(reshaped: str) -> Iterator[RecordingListener]:
    """The adapters installed after the reshaping, as at a start-up on such a release (and removed before it)."""
    listener = RecordingListener()
    adapters.install(listener)
    try:
        yield listener
    finally:
        adapters.uninstall()


@pytest.fixture(params=FOUR, ids=[s.id for s in FOUR])
def drv(request: pytest.FixtureRequest, is_async: bool, reshaped: str) -> Iterator[Driver]:  # noqa: F811
    d = Driver(request.param, is_async)
    yield d
    d.finish()


@pytest.mark.parametrize("spec", FOUR, ids=lambda s: s.id)
def test_a_caller_close_is_reported_at_once(
    rec: RecordingListener, reshaped: str, spec: Any, is_async: bool  # noqa: F811
) -> None:
    """Whatever the release does inside ``close()``: one report, ``close``, as the close returns. (And the reshaping
    ran: else the matrix above would prove nothing.)"""
    d = Driver(spec, is_async)
    try:
        stream = d.open()
        d.next(stream)
        d.close(stream)
        r = rec.one()
        assert (r.abandoned_reason, r.events) == ("close", 1)
    finally:
        d.finish()
    assert HITS[reshaped], f"the {reshaped} reshaping never ran"


@pytest.mark.parametrize("spec", FOUR, ids=lambda s: s.id)
def test_cancelled_while_a_pull_waits(rec: RecordingListener, reshaped: str, spec: Any) -> None:
    """A task cancelled while its pull waits for the server (which holds the body after the first delta): abandoned
    (cancel). The task drains the stream, so it waits wherever the release reads ahead."""
    d = Driver(spec, True)
    try:
        stream = d.open(**{"x-slow": "5"})

        async def drain() -> list[Any]:
            return [item async for item in stream]

        async def go() -> None:
            task = asyncio.ensure_future(drain())
            await asyncio.sleep(0.3)
            assert not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        d.run(go())
    finally:
        d.finish()
    r = rec.one()
    assert (r.outcome, r.abandoned_reason) == (names.ABANDONED, names.ABANDON_CANCEL)


@pytest.mark.parametrize("variant", ["ok", "cut", "keepalive"])
def test_anomalies_as_check_reads_them(rec: RecordingListener, drv: Driver, variant: str, tmp_path: Path) -> None:
    """``[DONE]`` and the pings are seen wherever the release reads them: the protocol anomalies and the keepalive
    count are those ``otelstream check`` finds in the same body (no false ``missing_done``)."""
    drv.drain(drv.open(**{"x-variant": variant}))
    r = rec.one()
    (tmp_path / "body.sse").write_bytes(b"".join(bodies.frames_for(PATH[drv.spec.surface], variant)))
    offline = analyse(str(tmp_path / "body.sse"), drv.spec.surface).reports[0]
    assert (r.outcome, dict(r.anomaly_counts), r.keepalives) == (
        offline.outcome, dict(offline.anomaly_counts), offline.keepalives)
