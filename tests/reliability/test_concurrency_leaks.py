"""Load: 32 threads and 1 000 asyncio tasks streaming at once while instrument()/uninstrument() race them, and
10 000 streams of every outcome; nothing lost, nothing counted twice, nothing left behind.

Ground truth for "sent while instrumented": the adapters put their call object into ``request.extensions`` at the
send, so the mock server counts exactly the requests that went out instrumented.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from prometheus_client import CollectorRegistry

import otelstream
from otelstream import instrumentation, names
from tests.reliability.harness import FIGURES, scaled
from tests.support.sdk_features import OPENAI_HTTP, http_of

CALL_KEY = "_otelstream_call"
CHUNK = (b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
         b'"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n')  # fmt: skip
STOP = (b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
        b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')  # fmt: skip
BODY = [CHUNK] * 5 + [STOP]


class Counting:
    """Mock server: counts requests sent while instrumented (the adapters' call in request.extensions)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = 0
        self.instrumented = 0

    def note(self, request: Any) -> None:
        with self.lock:
            self.sent += 1
            if CALL_KEY in request.extensions:
                self.instrumented += 1


def _sample(registry: CollectorRegistry, family: str, **labels: str) -> float:
    return sum(s.value for m in registry.collect() for s in m.samples
               if s.name == family and all(s.labels.get(k) == v for k, v in labels.items()))  # fmt: skip




class _Started(SpanProcessor):
    def __init__(self) -> None:
        self.n = 0
        self._lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        with self._lock:
            self.n += 1


def _racer(stop: threading.Event, tp: TracerProvider, registry: CollectorRegistry, toggles: list[int]) -> None:
    while not stop.is_set():
        otelstream.instrument(tracer_provider=tp, registry=registry)
        time.sleep(0.003)
        otelstream.uninstrument()
        toggles[0] += 1
        time.sleep(0.002)


@pytest.mark.slow
def test_threads_and_tasks_race_instrument_uninstrument() -> None:
    otelstream.uninstrument()
    server = Counting()
    tp = TracerProvider()
    started = _Started()
    tp.add_span_processor(started)  # a span starts exactly when a stream starts instrumented (stream_started)
    registry = CollectorRegistry()
    threads_n, per_thread, tasks_n = 32, scaled(15), scaled(1000)
    errors: list[BaseException] = []
    items_seen: list[int] = []

    def handler(request: Any) -> Any:
        server.note(request)
        return OPENAI_HTTP.Response(200, headers={"content-type": "text/event-stream"}, content=iter(BODY))

    def worker() -> None:
        http = OPENAI_HTTP.Client(transport=OPENAI_HTTP.MockTransport(handler))
        client = openai.OpenAI(api_key="sk-test", base_url="http://mock.test/v1", max_retries=0, http_client=http)
        for _ in range(per_thread):
            try:
                with client.chat.completions.create(model="m", messages=[], stream=True) as s:
                    items_seen.append(sum(1 for _ in s))
            except BaseException as exc:
                errors.append(exc)

    async def ahandler(request: Any) -> Any:
        server.note(request)

        async def body() -> AsyncIterator[bytes]:
            for chunk in BODY:
                await asyncio.sleep(0)
                yield chunk

        return http_of(request).Response(200, headers={"content-type": "text/event-stream"}, content=body())

    async def tasks() -> None:
        client = anthropic.AsyncAnthropic(
            api_key="sk-test",
            base_url="http://mock.test",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(ahandler)),
        )
        oa_http = OPENAI_HTTP.AsyncClient(transport=OPENAI_HTTP.MockTransport(ahandler))
        oa = openai.AsyncOpenAI(api_key="sk-test", base_url="http://mock.test/v1", max_retries=0, http_client=oa_http)
        del client

        async def one() -> None:
            try:
                stream = await oa.chat.completions.create(model="m", messages=[], stream=True)
                async with stream:
                    items_seen.append(sum([1 async for _ in stream]))
            except BaseException as exc:
                errors.append(exc)

        await asyncio.gather(*(one() for _ in range(tasks_n)))

    stop = threading.Event()
    toggles = [0]
    racer = threading.Thread(target=_racer, args=(stop, tp, registry, toggles))
    racer.start()
    pool = [threading.Thread(target=worker) for _ in range(threads_n)]
    try:
        for t in pool:
            t.start()
        asyncio.run(tasks())
        for t in pool:
            t.join(60)
    finally:  # a failure above must not leave the racer toggling instrumentation under the tests that follow
        stop.set()
        racer.join(10)
    assert not any(t.is_alive() for t in pool) and not racer.is_alive(), "deadlock"
    otelstream.uninstrument()
    total = threads_n * per_thread + tasks_n
    FIGURES["concurrency: streams (32 threads + asyncio tasks) under instrument/uninstrument races"] += total
    assert not errors, errors[:3]
    assert items_seen == [len(BODY)] * total  # the caller always got every chunk
    assert server.sent == total
    # the race really happened: instrumentation went off at least once and some streams ran with it, some without
    # (on a loaded machine the racer thread gets the GIL rarely, so only a few toggles are guaranteed)
    assert toggles[0] >= 1 and 0 < started.n < total, (toggles, started.n)
    counted = _sample(registry, "otelstream_streams_total")
    dropped = _sample(registry, "otelstream_reports_dropped_total")
    FIGURES["concurrency: streams started while instrumented"] = started.n
    FIGURES["concurrency: of those, counted in otelstream_streams_total"] = counted
    FIGURES["concurrency: of those, counted as dropped"] = dropped
    assert counted + dropped <= started.n, "a stream counted twice"
    # every stream started while instrumented is counted exactly once, and none dropped
    assert (counted, dropped) == (started.n, 0), (started.n, counted, dropped)


def _leak_body(kind: str) -> Iterator[bytes]:
    yield CHUNK
    yield CHUNK
    if kind == "reset":
        raise OPENAI_HTTP.RemoteProtocolError("peer closed connection without sending complete message body")
    if kind == "error":
        yield b'data: {"error": {"code": "server_error", "message": "boom"}}\n\n'
    if kind in ("ok", "abandon", "gc"):
        yield STOP


OUTCOMES = [("ok", names.COMPLETED), ("cut", names.CUT), ("error", names.ERROR), ("reset", names.TRANSPORT_ERROR),
            ("http_500", names.HTTP_ERROR), ("abandon", names.ABANDONED), ("gc", names.ABANDONED)]  # fmt: skip


@pytest.mark.slow
def test_ten_thousand_streams_leave_nothing_behind() -> None:
    otelstream.uninstrument()

    def handler(request: Any) -> Any:
        kind = request.headers["x-kind"]
        if kind == "http_500":
            return OPENAI_HTTP.Response(500, json={"error": {"message": "down", "type": "server_error"}})
        return OPENAI_HTTP.Response(200, headers={"content-type": "text/event-stream"}, content=_leak_body(kind))

    client = openai.OpenAI(api_key="sk-test", base_url="http://mock.test/v1", max_retries=0,
                           http_client=OPENAI_HTTP.Client(transport=OPENAI_HTTP.MockTransport(handler)))  # fmt: skip

    def one(kind: str) -> None:
        try:
            stream: Any = client.chat.completions.create(model="m", messages=[], stream=True,
                                                         extra_headers={"x-kind": kind})  # fmt: skip
            if kind == "abandon":
                next(iter(stream))
                stream.close()
            elif kind == "gc":
                next(iter(stream))
                del stream  # dropped without close: the finalizer (at the next cyclic collection) reports it
            else:
                for _ in stream:
                    pass
        except (openai.APIError, OPENAI_HTTP.HTTPError):
            pass

    tp = TracerProvider()
    registry = CollectorRegistry()
    n, m = scaled(10_000), scaled(1_000)
    otelstream.instrument(tracer_provider=tp, registry=registry)
    try:
        pipeline = instrumentation._pipeline
        for i in range(len(OUTCOMES) * 20):  # warm-up: label children, caches, threads
            one(OUTCOMES[i % len(OUTCOMES)][0])
        gc.collect()
        otelstream.flush(10)
        threads_before = threading.active_count()
        objects_before = len(gc.get_objects())
        for i in range(n):
            one(OUTCOMES[i % len(OUTCOMES)][0])
            if i % 500 == 0:
                gc.collect()
        gc.collect()
        otelstream.flush(30)
        objects_grown = len(gc.get_objects()) - objects_before
        # retained bytes, traced over a shorter run (tracemalloc slows every allocation several-fold)
        tracemalloc.start()
        base, _ = tracemalloc.get_traced_memory()
        for i in range(m):
            one(OUTCOMES[i % len(OUTCOMES)][0])
        gc.collect()
        otelstream.flush(30)
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        live = len(pipeline.live)
        threads_after = threading.active_count()
    finally:
        otelstream.uninstrument()
    FIGURES["leaks: streams of every outcome (incl. abandoned and GC'd)"] += n + m
    FIGURES.peak("leaks: objects grown over 10 000 streams", objects_grown)
    FIGURES.peak("leaks: retained traced memory after 1 000 more streams (KiB)", (current - base) / 1024)
    FIGURES.peak("leaks: peak traced memory during 1 000 streams (KiB)", (peak - base) / 1024)
    assert live == 0, f"{live} streams still tracked"
    assert threads_after <= threads_before, (threads_before, threads_after)
    assert objects_grown < 2_000, f"{objects_grown} objects more after {n} streams"
    assert current - base < 256 * 1024, f"{(current - base) / 1024:.0f} KiB retained after {m} streams"
    warm = len(OUTCOMES) * 20
    n += m
    by_outcome = {o: _sample(registry, "otelstream_streams_total", outcome=o) for o in names.OUTCOMES}
    FIGURES["leaks: streams counted"] = sum(by_outcome.values())
    print("leak run outcomes:", by_outcome)
    kinds = [OUTCOMES[i % len(OUTCOMES)] for run in (warm, n - m, m) for i in range(run)]
    expected: dict[str, int] = {}
    for _, outcome in kinds:
        expected[outcome] = expected.get(outcome, 0) + 1
    assert {o: int(v) for o, v in by_outcome.items() if v} == expected
    assert _sample(registry, "otelstream_streams_total") == n + warm
    assert _sample(registry, "otelstream_reports_dropped_total") == 0
