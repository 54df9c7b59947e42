"""Every raw-stream surface × sync/async × scenario on the one observation path (the SDK's own generators, observed
from outside), real SDK clients over httpx2.MockTransport.

Each test asserts the one report the adapters produce: outcome, counts, usage, timing, and that what the caller
sees (items, exceptions, the SDK's own object types) is what the SDK gives without otelstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from otelstream import accelerator, names
from otelstream.offline.analysis import analyse
from tests.support import bodies
from tests.support.clients import anthropic_client, async_anthropic_client, async_openai_client, openai_client
from tests.support.recording import RecordingListener
from tests.support.sdk_features import CONNECTION_ERRORS, lacking

MSGS = [{"role": "user", "content": "x"}]


def iterator_kind(stream: object) -> str:
    """Which generator feeds an SDK stream: "observed" (ours around the SDK's), or "sdk" (not observed)."""
    it = stream.__dict__.get("_iterator")
    if accelerator.native is not None and type(it) is accelerator.native.Observe:  # the compiled observer
        return "observed"
    code = getattr(it, "gi_code", None) or getattr(it, "ag_code", None)
    name = getattr(code, "co_name", "")
    return "observed" if name.startswith("observe_") else "sdk"


@dataclass(frozen=True)
class Surface:
    id: str
    sdk: str  # openai / anthropic
    surface: str
    open: Callable[[Any, dict[str, str]], Any]  # (client, headers) -> the SDK stream (sync or awaitable)
    events: int
    deltas: int
    usage: tuple[int | None, int | None]
    error_raises: bool  # the in-band error reaches the caller as an exception
    resumed: bool = False


SURFACES = [
    Surface("responses.create", "openai", names.RESPONSES,
            lambda c, h: c.responses.create(model="gpt-test", input="x", stream=True, extra_headers=h),
            6, 2, (7, 2), False),
    Surface("beta.responses.create", "openai", names.RESPONSES,
            lambda c, h: c.beta.responses.create(model="gpt-test", input="x", stream=True, extra_headers=h),
            6, 2, (7, 2), False),
    Surface("responses.retrieve", "openai", names.RESPONSES,
            lambda c, h: c.responses.retrieve("resp_1", stream=True, starting_after=3, extra_headers=h),
            2, 1, (7, 2), False, resumed=True),
    Surface("chat.create", "openai", names.CHAT_COMPLETIONS,
            lambda c, h: c.chat.completions.create(model="gpt-test", messages=MSGS, stream=True,
                                                   stream_options={"include_usage": True}, extra_headers=h),
            5, 2, (5, 2), True),
    Surface("completions.create", "openai", names.COMPLETIONS,
            lambda c, h: c.completions.create(model="gpt-test", prompt="x", stream=True,
                                              stream_options={"include_usage": True}, extra_headers=h),
            4, 2, (5, 2), True),
    Surface("messages.create", "anthropic", names.MESSAGES,
            lambda c, h: c.messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True,
                                           extra_headers=h),
            7, 2, (16, 2), True),
    Surface("beta.messages.create", "anthropic", names.MESSAGES,
            lambda c, h: c.beta.messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True,
                                                extra_headers=h),
            7, 2, (16, 2), True),
]  # fmt: skip
IDS = [s.id for s in SURFACES]
PATH = {names.RESPONSES: "/v1/responses", names.CHAT_COMPLETIONS: "/v1/chat/completions",
        names.COMPLETIONS: "/v1/completions", names.MESSAGES: "/v1/messages"}  # fmt: skip


class Driver:
    """Runs the same steps on a sync or an async client, so each scenario is written once."""

    def __init__(self, spec: Surface, is_async: bool, **client_kwargs: Any) -> None:
        if (reason := lacking(spec.id)) is not None:
            pytest.skip(reason)
        self.spec = spec
        self.is_async = is_async
        make = {
            ("openai", False): openai_client,
            ("openai", True): async_openai_client,
            ("anthropic", False): anthropic_client,
            ("anthropic", True): async_anthropic_client,
        }[(spec.sdk, is_async)]
        self.client = make(**client_kwargs)
        self.loop = asyncio.new_event_loop() if is_async else None

    def run(self, value: Any) -> Any:
        return self.loop.run_until_complete(value) if self.loop is not None else value

    def open(self, **headers: str) -> Any:
        return self.run(self.spec.open(self.client, headers))

    def drain(self, stream: Any) -> list[Any]:
        if not self.is_async:
            return list(stream)

        async def go() -> list[Any]:
            return [item async for item in stream]

        return self.run(go())  # type: ignore[no-any-return]

    def next(self, stream: Any) -> Any:
        return self.run(stream.__anext__()) if self.is_async else next(stream)

    def next_all(self, stream: Any) -> list[Any]:
        out = []
        while True:
            try:
                out.append(self.next(stream))
            except (StopIteration, StopAsyncIteration):
                return out

    def close(self, stream: Any) -> None:
        self.run(stream.close()) if self.is_async else stream.close()

    def finish(self) -> None:
        if self.loop is not None:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    @property
    def stream_type(self) -> type:
        sdk = openai if self.spec.sdk == "openai" else anthropic
        return sdk.AsyncStream if self.is_async else sdk.Stream  # type: ignore[no-any-return]


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def is_async(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture(params=SURFACES, ids=IDS)
def drv(request: pytest.FixtureRequest, is_async: bool) -> Any:
    d = Driver(request.param, is_async)
    yield d
    d.finish()


def _check_ok(rec: RecordingListener, d: Driver) -> None:
    r = rec.one()
    s = d.spec
    assert r.outcome == names.COMPLETED, r
    assert (r.surface, r.events, r.deltas) == (s.surface, s.events, s.deltas)
    assert (r.usage.input_tokens, r.usage.output_tokens) == s.usage
    assert r.time_to_first_delta_ns is not None and r.time_to_first_delta_ns > 0
    assert r.time_to_first_event_ns is not None and r.time_to_first_event_ns <= r.time_to_first_delta_ns
    assert r.request_id == "req_123"
    assert r.retries == 0
    assert r.resumed is s.resumed
    assert r.request_model == (None if s.resumed else ("claude-test" if s.sdk == "anthropic" else "gpt-test"))
    assert r.server_address == "mock.test"
    started = rec.started[0]
    assert started.start.surface == s.surface
    assert rec.finished_handles == [started.handle]
    assert rec.activations == 1 and rec.active == 0  # our span was current around the one send


def test_ok_for_loop(rec: RecordingListener, drv: Driver) -> None:
    stream = drv.open()
    assert type(stream) is drv.stream_type  # the SDK's own object reaches the caller
    items = drv.drain(stream)
    assert len(items) == drv.spec.events
    assert iterator_kind(stream) == "observed"
    _check_ok(rec, drv)


def test_ok_next(rec: RecordingListener, drv: Driver) -> None:
    stream = drv.open()
    items = drv.next_all(stream)
    assert len(items) == drv.spec.events
    _check_ok(rec, drv)


def test_ok_context_manager(rec: RecordingListener, drv: Driver) -> None:
    stream = drv.open()
    if drv.is_async:

        async def go() -> None:
            async with stream as s:
                assert [e async for e in s]

        drv.run(go())
    else:
        with stream as s:
            assert list(s)
    _check_ok(rec, drv)


def test_cut(rec: RecordingListener, drv: Driver) -> None:
    if drv.spec.resumed:
        pytest.skip("the resumed body starts after the cut point")
    drv.drain(drv.open(**{"x-variant": "cut"}))
    r = rec.one()
    assert (r.outcome, r.error_type, r.error_class) == (names.CUT, None, names.EC_CUT)
    assert r.deltas == 2


def test_inband_error(rec: RecordingListener, drv: Driver) -> None:
    if drv.spec.resumed:
        pytest.skip("covered by responses.create")
    stream = drv.open(**{"x-variant": "error"})
    if drv.spec.error_raises:
        exc_type = openai.APIError if drv.spec.sdk == "openai" else anthropic.APIStatusError
        with pytest.raises(exc_type) as info:
            drv.drain(stream)
        assert not isinstance(info.value, (openai.APIConnectionError, anthropic.APIConnectionError))
    else:
        items = drv.drain(stream)
        assert items[-1].type == "error"
    r = rec.one()
    assert r.outcome == names.ERROR
    assert r.error_type in ("server_error", "overloaded_error")
    assert r.error_class == (names.EC_OVERLOADED if r.error_type == "overloaded_error" else names.EC_SERVER_ERROR)


def test_keepalive(rec: RecordingListener, drv: Driver, tmp_path: Path) -> None:
    """Comment lines are counted live where the body's bytes pass (the SDKs' decoders drop them), pings where the SDK
    yields or drops them: the same count as ``otelstream check`` on the same body, and the largest gap between two."""
    items = drv.drain(drv.open(**{"x-variant": "keepalive"}))
    r = rec.one()
    assert r.outcome == names.COMPLETED
    served = bodies.frames_for(PATH[drv.spec.surface], "keepalive")
    if drv.spec.resumed:
        served = bodies.resume_filter(served, 3)
    (tmp_path / "body.sse").write_bytes(b"".join(served))
    offline = analyse(str(tmp_path / "body.sse"), drv.spec.surface).reports[0]
    assert r.keepalives == offline.keepalives
    assert r.keepalives == sum(f.startswith(b":") or b"event: ping" in f for f in served)
    assert (r.max_keepalive_gap_ns is not None) == (r.keepalives >= 2)
    assert offline.max_keepalive_gap_ns is None  # offline has no clock
    pings = sum(b"event: ping" in f for f in served)
    assert r.events == drv.spec.events
    assert len(items) == drv.spec.events + (pings if drv.spec.sdk == "openai" else 0)


def test_drop_mid_stream(rec: RecordingListener, drv: Driver) -> None:
    stream = drv.open(**{"x-variant": "drop"})
    with pytest.raises(CONNECTION_ERRORS):
        drv.drain(stream)
    r = rec.one()
    # the peer closed mid-body: no provider code; the class says the connection broke
    assert (r.outcome, r.error_type, r.error_class) == (names.TRANSPORT_ERROR, None, names.EC_CONNECTION)
    assert 0 < r.events < drv.spec.events


def test_slow_first_delta(rec: RecordingListener, drv: Driver) -> None:
    drv.drain(drv.open(**{"x-slow": "0.2"}))
    r = rec.one()
    assert r.outcome == names.COMPLETED
    assert r.time_to_first_delta_ns is not None and r.time_to_first_delta_ns >= 200_000_000
    assert r.max_wait_ns >= 200_000_000


def test_slow_consumer_is_not_wait(rec: RecordingListener, drv: Driver) -> None:
    import time

    stream = drv.open()
    first = drv.next(stream)
    assert first is not None
    time.sleep(0.15)
    drv.next_all(stream)
    r = rec.one()
    assert r.consumer_ns >= 150_000_000
    assert r.max_wait_ns < 150_000_000


def test_break_then_close(rec: RecordingListener, drv: Driver) -> None:
    stream = drv.open()
    drv.next(stream)
    assert rec.reports == []
    drv.close(stream)
    r = rec.one()
    assert (r.outcome, r.abandoned_reason) == (names.ABANDONED, names.ABANDON_CLOSE)
    assert r.events == 1
    # reading on after the close (a real socket raises, MockTransport may not): still the one report
    with contextlib.suppress(Exception):
        drv.next_all(stream)
    assert len(rec.reports) == 1 and rec.reports[0].abandoned_reason == names.ABANDON_CLOSE


def test_close_unread(rec: RecordingListener, drv: Driver) -> None:
    stream = drv.open()
    drv.close(stream)
    r = rec.one()
    assert (r.outcome, r.abandoned_reason, r.events) == (names.ABANDONED, names.ABANDON_CLOSE, 0)


def test_close_after_terminal_keeps_outcome(rec: RecordingListener, drv: Driver) -> None:
    stream = drv.open()
    items = [drv.next(stream) for _ in range(drv.spec.events)]
    assert len(items) == drv.spec.events
    drv.close(stream)
    assert rec.one().outcome == names.COMPLETED


def test_dropped_after_one_event(rec: RecordingListener, drv: Driver) -> None:
    stream = drv.open()
    drv.next(stream)
    del stream
    gc.collect()
    r = rec.one()
    assert (r.outcome, r.abandoned_reason) == (names.ABANDONED, names.ABANDON_GC)


def test_dropped_unread(rec: RecordingListener, drv: Driver) -> None:
    stream = drv.open()
    del stream
    gc.collect()
    r = rec.one()
    assert (r.outcome, r.abandoned_reason, r.events) == (names.ABANDONED, names.ABANDON_GC, 0)


def test_http_error(rec: RecordingListener, drv: Driver) -> None:
    sdk = openai if drv.spec.sdk == "openai" else anthropic
    with pytest.raises(sdk.APIStatusError):
        drv.open(**{"x-status": "429"})
    r = rec.one()
    assert r.outcome == names.HTTP_ERROR and r.events == 0
    # the code from the error body as sent (openai reads `code`, anthropic `error.type`), the class from it
    assert r.error_type == ("rate_limit_exceeded" if drv.spec.sdk == "openai" else "rate_limit_error")
    assert r.error_class == names.EC_RATE_LIMITED


def test_connection_error_before_headers(rec: RecordingListener, drv: Driver) -> None:
    sdk = openai if drv.spec.sdk == "openai" else anthropic
    with pytest.raises(sdk.APIConnectionError):
        drv.open(**{"x-connect-error": "1"})
    r = rec.one()
    assert (r.outcome, r.error_type, r.error_class) == (names.HTTP_ERROR, None, names.EC_CONNECTION)


@pytest.mark.parametrize("spec", [SURFACES[0], SURFACES[3], SURFACES[5]], ids=lambda s: s.id)
def test_retry_counts_last_attempt(rec: RecordingListener, spec: Surface, is_async: bool) -> None:
    d = Driver(spec, is_async, max_retries=2)
    try:
        d.drain(d.open(**{"x-fail-first": "1", "x-key": f"retry-{spec.id}-{is_async}", "x-slow": "0.05"}))
    finally:
        d.finish()
    r = rec.one()
    assert r.outcome == names.COMPLETED and r.retries == 1
    assert rec.activations == 2 and rec.active == 0
    # TTFD runs from the last attempt's send: the retry back-off is not in it
    assert r.time_to_first_delta_ns is not None and r.time_to_first_delta_ns < 400_000_000


@pytest.mark.parametrize("spec", [s for s in SURFACES if not s.resumed], ids=[s.id for s in SURFACES if not s.resumed])
def test_cancelled_async(rec: RecordingListener, spec: Surface) -> None:
    """A task cancelled while its pull waits for the server: abandoned (cancel), on every surface."""
    d = Driver(spec, True)
    before = bodies.first_delta_index(bodies.frames_for(PATH[spec.surface], "ok"))  # the server holds the rest
    try:
        stream = d.open(**{"x-slow": "5"})

        async def go() -> None:
            for _ in range(before):
                await stream.__anext__()
            task = asyncio.ensure_future(stream.__anext__())
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        d.run(go())
    finally:
        d.finish()
    r = rec.one()
    assert (r.outcome, r.abandoned_reason) == (names.ABANDONED, names.ABANDON_CANCEL)
