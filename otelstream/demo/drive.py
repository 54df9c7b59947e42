"""Driving the demo's streams: the real SDK clients against the fake provider, one job per stream (sync, async,
WebSocket; Gemini and Bedrock through ``cloud_drive``), each consumed the way its fault asks (read to the end,
abandoned after a few deltas, or its task cancelled at the first), with a progress bar on stderr."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from otelstream import names
from otelstream.demo import cloud_drive as C
from otelstream.demo import faults as F
from otelstream.demo.plan import BEDROCK_INVOKE, NO_CLOUD, Job, Lanes

ABANDON_AFTER_DELTAS: Final = 2
_TERMINAL_WS: Final = ("response.completed", "response.failed", "response.incomplete", "error")


@dataclass
class Progress:
    total: int
    enabled: bool = True
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _last_pct: int = -1

    def tick(self) -> None:
        with self._lock:
            self.done += 1

    def draw(self, final: bool = False) -> None:
        if not self.enabled:
            return
        done, total = self.done, max(1, self.total)
        pct = int(100 * done / total)
        elapsed = time.monotonic() - self.started
        width = 30
        bar = "#" * (width * done // total) + "-" * (width - width * done // total)
        line = f"  streams [{bar}] {done}/{self.total}  {pct:3d}%  {elapsed:5.1f} s"
        if sys.stderr.isatty():
            sys.stderr.write("\r" + line + ("\n" if final else ""))
        elif final or pct // 25 != self._last_pct // 25:  # a log file gets a line per quarter, not a spinner
            sys.stderr.write(line + "\n")
        self._last_pct = pct
        sys.stderr.flush()


# --- driving streams ----------------------------------------------------------------------------------


@dataclass
class Clients:
    openai: Any
    openai_async: Any
    anthropic: Any
    anthropic_async: Any
    cloud: C.CloudClients


def _request(job: Job) -> tuple[Callable[[Any], Any], dict[str, Any]]:
    from otelstream.demo.exchange import FAULT_HEADER

    fault = F.OK if job.fault in F.CALLER_FAULTS else job.fault
    headers = {FAULT_HEADER: fault}
    model = job.model
    if job.surface == names.RESPONSES:
        return (lambda c: c.responses.create), {"model": model, "input": "Say hello.", "stream": True,
                                               "extra_headers": headers}  # fmt: skip
    if job.surface == names.CHAT_COMPLETIONS:
        return (lambda c: c.chat.completions.create), {
            "model": model, "messages": [{"role": "user", "content": "Say hello."}], "stream": True,
            "stream_options": {"include_usage": True}, "extra_headers": headers,
        }  # fmt: skip
    if job.surface == names.COMPLETIONS:
        return (lambda c: c.completions.create), {"model": model, "prompt": "Say hello.", "stream": True,
                                                 "stream_options": {"include_usage": True},
                                                 "extra_headers": headers}  # fmt: skip
    return (lambda c: c.messages.create), {"model": model, "max_tokens": 256, "stream": True,
                                          "messages": [{"role": "user", "content": "Say hello."}],
                                          "extra_headers": headers}  # fmt: skip


def _is_delta(item: Any) -> bool:
    """Cheap client-side guess, only to know when an `abandon` caller should walk away."""
    kind = getattr(item, "type", None)
    if isinstance(kind, str):
        return kind.endswith(".delta") or kind == "content_block_delta"
    return bool(getattr(item, "choices", None)) or C.is_cloud_delta(item)


def _client_for(clients: Clients, job: Job) -> Any:
    anth = job.surface == names.MESSAGES
    client = (
        (clients.anthropic_async if job.is_async else clients.anthropic)
        if anth
        else (clients.openai_async if job.is_async else clients.openai)
    )
    if job.fault == F.NO_HEADERS:  # the provider never answers: a short read timeout makes it an http_error
        client = client.with_options(timeout=0.5)
    return client


def _consume(stream: Any, job: Job) -> None:
    deltas = 0
    for item in stream:
        if job.fault == F.ABANDON and _is_delta(item):
            deltas += 1
            if deltas >= ABANDON_AFTER_DELTAS:
                break  # the caller closes the stream next, before its end: abandoned


async def _consume_async(stream: Any, job: Job) -> None:
    deltas = 0
    async for item in stream:
        if job.fault == F.CANCEL and _is_delta(item):
            current = asyncio.current_task()
            assert current is not None
            current.cancel()  # the stream's next wait raises CancelledError: the caller's task was cancelled
        if job.fault == F.ABANDON and _is_delta(item):
            deltas += 1
            if deltas >= ABANDON_AFTER_DELTAS:
                break


def run_sync_job(clients: Clients, job: Job) -> str | None:
    """Run one stream on the caller's thread; returns the exception type name the SDK raised, if any."""
    try:
        if job.surface == names.RESPONSES_WEBSOCKET:
            _ws_sync(clients.openai, job)
            return None
        if C.is_cloud(job):
            stream, close = C.open_sync(clients.cloud, job)
            try:
                _consume(stream, job)
            finally:
                close()
            return None
        create, kwargs = _request(job)
        with create(_client_for(clients, job))(**kwargs) as stream:
            _consume(stream, job)
    except Exception as exc:  # the SDK raising is part of the show (in-band errors, resets, non-2xx)
        return type(exc).__name__
    return None


async def run_async_job(clients: Clients, job: Job) -> str | None:
    if job.fault != F.CANCEL:
        return await _async_job(clients, job)
    # the job's own task, so that cancelling it (at its first delta) is not cancelling the demo
    task = asyncio.ensure_future(_async_job(clients, job))
    try:
        await asyncio.wait({task})
    except asyncio.CancelledError:  # the demo itself is being stopped
        task.cancel()
        raise
    return "CancelledError" if task.cancelled() else task.result()


async def _async_job(clients: Clients, job: Job) -> str | None:
    try:
        if job.surface == names.RESPONSES_WEBSOCKET:
            await _ws_async(clients.openai_async, job)
            return None
        if C.is_cloud(job):
            stream, close = await C.open_async_stream(clients.cloud, job)
            try:
                await _consume_async(stream, job)
            finally:
                await C.settle(close())
            return None
        create, kwargs = _request(job)
        async with await create(_client_for(clients, job))(**kwargs) as stream:
            await _consume_async(stream, job)
    except Exception as exc:
        return type(exc).__name__
    return None


def _ws_create_kwargs(job: Job) -> dict[str, Any]:
    return {
        "model": job.model,
        "input": "Say hello.",
        "stream_id": f"lane-{job.index % 3}",
        "metadata": {"otelstream_fault": job.fault},
    }


def _ws_sync(client: Any, job: Job) -> None:
    with client.responses.connect() as conn:
        conn.response.create(**_ws_create_kwargs(job))
        for event in conn:
            if event.type in _TERMINAL_WS:
                break


async def _ws_async(client: Any, job: Job) -> None:
    async with client.responses.connect() as conn:
        await conn.response.create(**_ws_create_kwargs(job))
        async for event in conn:
            if event.type in _TERMINAL_WS:
                break


async def drive(jobs: list[Job], clients: Clients, concurrency: int, progress: Progress) -> dict[str, int]:
    """Run every job with at most ``concurrency`` open at once; sync jobs on a thread pool. Returns raised types."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(max(1, concurrency))
    raised: dict[str, int] = {}
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="otelstream-demo") as pool:

        async def one(job: Job) -> None:
            async with gate:
                if job.is_async:
                    name = await run_async_job(clients, job)
                else:
                    name = await loop.run_in_executor(pool, run_sync_job, clients, job)
            if name is not None:
                raised[name] = raised.get(name, 0) + 1
            progress.tick()

        async def ticker() -> None:
            while True:
                progress.draw()
                await asyncio.sleep(0.1)

        tick_task = asyncio.create_task(ticker())
        try:
            await asyncio.gather(*(one(job) for job in jobs))
        finally:
            tick_task.cancel()
            progress.draw(final=True)
    return raised


def make_clients(provider: Any, concurrency: int, lanes: Lanes = NO_CLOUD) -> Clients:
    import anthropic
    import httpx2
    import openai

    # enough pooled connections for every concurrent stream; no SDK retries so each fault is seen once
    limits = httpx2.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
    timeout = httpx2.Timeout(30.0, connect=5.0)
    return Clients(
        openai=openai.OpenAI(
            **provider.openai_kwargs(max_retries=0, timeout=timeout, http_client=httpx2.Client(limits=limits))
        ),
        openai_async=openai.AsyncOpenAI(
            **provider.openai_kwargs(max_retries=0, timeout=timeout, http_client=httpx2.AsyncClient(limits=limits))
        ),
        anthropic=anthropic.Anthropic(
            **provider.anthropic_kwargs(max_retries=0, timeout=timeout, http_client=httpx2.Client(limits=limits))
        ),
        anthropic_async=anthropic.AsyncAnthropic(
            **provider.anthropic_kwargs(max_retries=0, timeout=timeout, http_client=httpx2.AsyncClient(limits=limits))
        ),
        cloud=C.make_cloud_clients(provider.base_url, concurrency + 8, lanes),
    )


async def close_clients(clients: Clients) -> None:
    clients.openai.close()
    clients.anthropic.close()
    await clients.openai_async.close()
    await clients.anthropic_async.close()
    await C.close_cloud_clients(clients.cloud)


def warm_up(clients: Clients) -> None:
    """One uninstrumented stream per surface first: the SDKs' one-time parse setup (tens of ms on the first event)
    would otherwise show up as time to first delta."""
    lanes = clients.cloud.lanes
    for surface in names.SURFACES:
        if lanes.allows(surface, ""):
            run_sync_job(clients, Job(-1, surface, F.OK, False))
    if lanes.bedrock:
        run_sync_job(clients, Job(-1, names.MESSAGES, F.OK, False, BEDROCK_INVOKE))


# --- the run ------------------------------------------------------------------------------------------
