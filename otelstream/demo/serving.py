"""``otelstream demo --serve`` after the table: the provider and /metrics stay up with light traffic until Ctrl-C or
SIGTERM, and either ends it the same way (the traffic stopped, the provider and /metrics closed by the caller, a line
saying so, exit 0). A service manager stops with SIGTERM; without a handler the demo died of it without a word."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from otelstream.demo import faults as F
from otelstream.demo.cloud_drive import available_lanes, open_async
from otelstream.demo.drive import Progress, close_clients, drive, make_clients
from otelstream.demo.plan import servable, serve_plan

_STOPPING: dict[int, str] = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "Ctrl-C"}


class Terminated(KeyboardInterrupt):
    """SIGTERM before the serving loop, raised where Ctrl-C's KeyboardInterrupt would be."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # only it may set signal handlers


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """For the whole command: SIGTERM ends the run as Ctrl-C does (the ``finally`` blocks close what was opened)."""
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _StopSignals:
    """While serving, SIGTERM and SIGINT ask the loop to stop instead of raising wherever the main thread is (in the
    middle of starting the event loop, the interrupt left a half-built loop and a traceback behind)."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._wake: Callable[[], object] | None = None

    def handle(self, signum: int, frame: object) -> None:
        self.received = signum
        if self._wake is not None:
            self._wake()

    def wake_with(self, wake: Callable[[], object]) -> None:
        self._wake = wake
        if self.received is not None:  # a signal came before the loop was there to wake
            wake()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        previous = {signum: signal.signal(signum, self.handle) for signum in _STOPPING}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def serve_forever(provider: Any, metrics_url: str | None, args: argparse.Namespace, mix: F.FaultMix, out: Any) -> None:
    concurrency = max(1, args.concurrency // 4)
    if not _in_main_thread():  # no handlers to set: Ctrl-C's KeyboardInterrupt is the caller's
        _say_serving(provider, metrics_url, out)
        asyncio.run(serve_rounds(provider, mix, concurrency, args.seed))
        return
    stop = _StopSignals()
    with stop.installed():
        _say_serving(provider, metrics_url, out)
        asyncio.run(_serve_until(stop, serve_rounds(provider, mix, concurrency, args.seed)))
    if stop.received is not None:  # (the traffic only ends on a signal, or by raising)
        why = _STOPPING.get(stop.received, f"signal {stop.received}")
        print(f"\nstopped ({why}): the light traffic ended; closing the fake provider and /metrics", file=out,
              flush=True)  # fmt: skip


def _say_serving(provider: Any, metrics_url: str | None, out: Any) -> None:
    print("\nserving until Ctrl-C or SIGTERM:", file=out)
    print(f"  fake provider (OpenAI base_url):    {provider.openai_base_url}", file=out)
    print(f"  fake provider (Anthropic base_url): {provider.base_url}", file=out)
    print(f"  fake provider (websocket_base_url): {provider.ws_base_url}", file=out)
    print(f"  fake provider (Gemini base_url, Bedrock endpoint_url): {provider.base_url}", file=out)
    if metrics_url:
        print(f"  Prometheus scrape target:           {metrics_url}", file=out)
    print("  light traffic continues with the same fault mix so dashboards keep moving", file=out)
    out.flush()


async def _serve_until(stop: _StopSignals, traffic: Any) -> None:
    """Run ``traffic`` until a stop signal; then cancel it (its streams in flight end as abandoned, as on Ctrl-C)."""
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    stop.wake_with(lambda: loop.call_soon_threadsafe(stopped.set))
    rounds = asyncio.ensure_future(traffic)
    waiting = asyncio.ensure_future(stopped.wait())
    await asyncio.wait({rounds, waiting}, return_when=asyncio.FIRST_COMPLETED)
    for task in (rounds, waiting):
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await rounds
    await asyncio.gather(waiting, return_exceptions=True)


async def serve_rounds(
    provider: Any, mix: F.FaultMix, concurrency: int, seed: int, rounds: int | None = None
) -> dict[str, int]:
    """``--serve``'s light traffic: a round of streams every second, in one event loop (the async clients' pooled
    connections belong to the loop they were opened in: a loop per round failed every async stream after the first
    round as if the provider were down). Returns what the SDKs raised, by exception type."""
    lanes = available_lanes()
    usable, _ = servable(mix, lanes)
    if usable is None:
        return {}
    clients = make_clients(provider, concurrency, lanes)
    quiet = Progress(0, enabled=False)
    raised: dict[str, int] = {}
    done = 0
    try:
        await open_async(clients.cloud)
        while rounds is None or done < rounds:
            seed += 1
            jobs = serve_plan(max(4, concurrency), usable, seed, lanes)
            for name, n in (await drive(jobs, clients, concurrency, quiet)).items():
                raised[name] = raised.get(name, 0) + n
            done += 1
            await asyncio.sleep(1.0)
    finally:
        await close_clients(clients)
    return raised
