"""The adapters' fault matrix again, with the HTTP library's byte iterators reshaped as a minor release may reshape
them: who ended a stream is decided from otelstream's own observations, so no reshaping may move an outcome, an error
class or an abandonment reason.

The shapes (each applied to httpx2's ``Response`` and, where openai reads through it, httpx's):

- ``read-direct``: ``iter_bytes`` / ``aiter_bytes`` read the body themselves and close the response in their own
  ``finally`` (httpx2 2.17.0 did this to ``aiter_bytes``, and every async cut read as abandoned);
- ``close-helper``: the raw iterators close through a helper function;
- ``close-elsewhere``: the close runs from an exit-stack callback, a frame of another library entirely.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any

import httpx2
import pytest

from tests.adapters.test_matrix import (  # noqa: F401 (the matrix's tests and fixtures, collected here again)
    drv,
    is_async,
    test_break_then_close,
    test_cancelled_async,
    test_close_after_terminal_keeps_outcome,
    test_close_unread,
    test_cut,
    test_drop_mid_stream,
    test_dropped_after_one_event,
    test_http_error,
    test_inband_error,
    test_keepalive,
    test_ok_for_loop,
)
from tests.support.sdk_features import OPENAI_HTTP


def _release(response: Any) -> None:
    response.close()


async def _arelease(response: Any) -> None:
    await response.aclose()


def _read_direct(lib: ModuleType) -> dict[str, Callable[..., Any]]:
    def iter_bytes(self: Any, chunk_size: int | None = None) -> Iterator[bytes]:
        if self.is_stream_consumed:
            raise lib.StreamConsumed()
        self.is_stream_consumed = True
        try:
            for chunk in self.stream:
                if chunk:
                    yield chunk
        finally:
            self.close()

    async def aiter_bytes(self: Any, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        if self.is_stream_consumed:
            raise lib.StreamConsumed()
        self.is_stream_consumed = True
        chunks = self.stream.__aiter__()
        try:
            async for chunk in chunks:
                if chunk:
                    yield chunk
        finally:
            if hasattr(chunks, "aclose"):
                await chunks.aclose()
            await self.aclose()

    return {"iter_bytes": iter_bytes, "aiter_bytes": aiter_bytes}


def _close_helper(lib: ModuleType) -> dict[str, Callable[..., Any]]:
    def iter_raw(self: Any, chunk_size: int | None = None) -> Iterator[bytes]:
        self.is_stream_consumed = True
        try:
            yield from self.stream
        finally:
            _release(self)

    async def aiter_raw(self: Any, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        self.is_stream_consumed = True
        try:
            async for chunk in self.stream:
                yield chunk
        finally:
            await _arelease(self)

    def iter_bytes(self: Any, chunk_size: int | None = None) -> Iterator[bytes]:
        yield from self.iter_raw()

    async def aiter_bytes(self: Any, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        async for chunk in self.aiter_raw():
            yield chunk

    return {"iter_raw": iter_raw, "aiter_raw": aiter_raw, "iter_bytes": iter_bytes, "aiter_bytes": aiter_bytes}


def _close_elsewhere(lib: ModuleType) -> dict[str, Callable[..., Any]]:
    def iter_bytes(self: Any, chunk_size: int | None = None) -> Iterator[bytes]:
        self.is_stream_consumed = True
        with contextlib.ExitStack() as stack:
            stack.callback(self.close)
            yield from self.stream

    async def aiter_bytes(self: Any, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        self.is_stream_consumed = True
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(self.aclose)
            async for chunk in self.stream:
                yield chunk

    return {"iter_bytes": iter_bytes, "aiter_bytes": aiter_bytes}


SHAPES = {"read-direct": _read_direct, "close-helper": _close_helper, "close-elsewhere": _close_elsewhere}


@pytest.fixture(autouse=True, params=sorted(SHAPES))
def reshaped(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    for lib in {httpx2, OPENAI_HTTP}:
        for name, func in SHAPES[request.param](lib).items():
            monkeypatch.setattr(lib.Response, name, func)
    return str(request.param)


def test_the_shapes_are_in_place(reshaped: str) -> None:
    """The reshaping reaches the responses the SDKs read (else the matrix above would prove nothing)."""
    response = httpx2.Response(200, stream=httpx2.ByteStream(b"data: x\n\n"))
    assert b"".join(response.iter_bytes()) == b"data: x\n\n"
    assert response.is_closed
    assert httpx2.Response.iter_bytes.__module__ == __name__
