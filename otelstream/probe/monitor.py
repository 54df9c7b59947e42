"""``--every``: the synthetic monitor. Each target runs a round every ``every`` seconds (its own, else ``--every``),
rounds of different targets independent of each other, until SIGTERM or SIGINT: then each target finishes the round
in flight and the process exits 0. A second signal cancels the rounds in flight (their streams end ``abandoned``).

Each round prints one line per target (``--json``: one JSON object per line, rows included); the metrics are those
of any instrumented service, on ``/metrics`` with ``--serve``, and spans go where the OTel environment says.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import TextIO

from otelstream.probe import rendering, runner, verdict
from otelstream.probe.config import RunOptions, Target
from otelstream.probe.observe import Session

logger = logging.getLogger("otelstream")
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def run(targets: Sequence[Target], options: RunOptions, session: Session, every: float | None, as_json: bool,
        out: TextIO | None = None) -> int:  # fmt: skip
    out = out or sys.stdout
    schedule = ", ".join(f"{t.name} every {t.every or every:g} s" for t in targets)
    served = f"; metrics on {session.metrics_url}" if session.metrics_url else ""
    print(f"otelstream probe: monitoring {schedule}{served}", file=sys.stderr, flush=True)

    def emit(result: verdict.TargetResult) -> None:
        print(rendering.json_line(result) if as_json else rendering.one_line(result), file=out, flush=True)

    with suppress(asyncio.CancelledError):
        asyncio.run(_monitor(targets, options, session, every, emit))
    return 0


async def _monitor(targets: Sequence[Target], options: RunOptions, session: Session, every: float | None,
                   emit: Callable[[verdict.TargetResult], None]) -> None:  # fmt: skip
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    main = asyncio.current_task()

    def on_signal(signum: int) -> None:
        if stop.is_set():  # the second one: do not wait for the rounds in flight
            if main is not None:
                main.cancel()
            return
        stop.set()
        print(f"otelstream probe: {signal.Signals(signum).name}: stopping after the rounds in flight",
              file=sys.stderr, flush=True)  # fmt: skip

    installed = []
    for signum in _SIGNALS:
        try:
            loop.add_signal_handler(signum, on_signal, signum)
            installed.append(signum)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals on this platform
            pass
    try:
        await asyncio.gather(*(_target_loop(t, t.every or every or 0.0, options, session, stop, emit)
                               for t in targets))  # fmt: skip
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


async def _target_loop(target: Target, interval: float, options: RunOptions, session: Session, stop: asyncio.Event,
                       emit: Callable[[verdict.TargetResult], None]) -> None:  # fmt: skip
    loop = asyncio.get_running_loop()
    due = loop.time()
    number = 0
    while not stop.is_set():
        number += 1
        try:
            rows = await runner.run_round(target, options, session.inbox)
        except Exception as exc:  # a monitor keeps going; the type only: a message could quote the server
            logger.warning("otelstream probe: round %d of target %r did not run: %s", number, target.name,
                           type(exc).__name__)  # fmt: skip
        else:
            emit(verdict.evaluate(target, rows, options, number))
        # a round longer than the interval delays the next one; rounds never pile up
        due = max(due + interval, loop.time())
        with suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), due - loop.time())
