"""The fault matrix again, under reshapings a minor release of an SDK or of the HTTP library could ship, each applied
at start-up, before ``instrument()``: who ended a stream is decided from the order of what otelstream's own wrappers
saw, so none may move an outcome, an error class or an abandonment reason, sync or async, on the four SSE surfaces
(the reshapings, in tests/support/drift_shapes.py):

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from tests.support.drift_shapes import HITS, SHAPES, patches_for
from tests.support.recording import RecordingListener

FOUR = [s for s in SURFACES if s.id in ("responses.create", "chat.create", "completions.create", "messages.create")]


@pytest.fixture(params=SHAPES)
def reshaped(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name = str(request.param)
    for owner, attr, func in patches_for(name):
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
