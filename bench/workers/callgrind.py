"""``workers/main.py cg``: the measured phases of one callgrind process, each closed by a dump that the process asks of
callgrind itself; the runner's side (``bench/runner/callgrind.py``) starts valgrind and reads the dumps."""

from __future__ import annotations

import asyncio
import gc
import os

from bench import canned, configs
from bench.workers.clients import http_module, make_client, run_async, run_sync
from bench.workers.observed import stream_observed


class Callgrind:
    """Drives callgrind from inside the measured process with valgrind's own tool, ``callgrind_control`` (it sends
    the command to the valgrind core through ``vgdb``; this process waits in ``waitpid`` meanwhile):

    - ``instrument_on()``: ``callgrind_control -i on PID``. The runner starts callgrind with ``--instr-atstart=no``
      and the worker switches instrumentation on once, after start-up (imports, ``instrument()``, clients) and the
      pre-warm streams, which then run at plain valgrind speed, several times faster, and are never inside a dump;
    - ``dump()``: ``callgrind_control -d PID``: one dump of every thread's counts since the last one (with
      ``--separate-threads=yes`` one file per thread: the caller's thread is 1). ``--dump-before=<function>``
      would dump only the thread that called the function, so the export thread's work would go uncounted.

    What the call itself costs this process (fork, exec, ``waitpid``) is the same at every dump, so it cancels
    in every difference the runner takes (configuration − baseline, instrumented − its twin). ``enabled=False``
    (natively): both are no-ops."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _control(self, *args: str) -> None:
        if not self.enabled:
            return
        import subprocess

        # no pipes: reading them would loop a number of times that depends on timing, inside the counts
        rc = subprocess.call(["callgrind_control", *args, str(os.getpid())], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)  # fmt: skip
        if rc != 0:
            raise RuntimeError(f"callgrind_control {' '.join(args)} exited with {rc}")

    def instrument_on(self) -> None:
        self._control("-i", "on")

    def dump(self) -> None:
        self._control("-d")


def cmd_cg(a) -> dict:
    """Under ``valgrind --tool=callgrind --separate-threads=yes`` with ``--cg-control``: every ``Callgrind.dump()``
    closes one dump of every thread. Phases are given as ``--phases surface:mode,…``; phase k (from 0) is dump
    number 2k+2 (its warm-up 2k+1), every thread included (the export thread's work is inside because each phase
    ends with a flush).

    Before any phase, ``--prewarm`` streams (10 deltas) per surface and mode on a throwaway client: the SDKs' lazy
    imports and model building (≈2.4 G instructions for the first Responses stream) and every per-stream code path's
    first calls are over before anything is measured. With only the 2 warm-up streams per phase, the short phase ran
    per-stream code in its first calls (CPython 3.11 quickens a function only after 8), which added ≈0.25 M
    instructions, varying run to run, to otelstream-default's fixed cost per Chat stream; with 10, a Chat-only
    process's dumps repeat to ≈0.01 %.

    Instrumentation is switched on once, after the pre-warm (``--cg-instr-on``; ``Callgrind``): start-up (imports,
    ``instrument()``, clients) and the pre-warm run uninstrumented, several times faster. Neither was ever inside a
    dump, and each measured phase still follows its own instrumented warm-up.

    ``--paired`` (otelstream): after each phase, ``uninstrument()`` and the same phase again (its warm-up, then its
    dump: phase k is dump 4k+2, its uninstrumented twin 4k+4), then ``instrument()`` again with the same providers.
    The twin is the in-process baseline: the SDK's own cost per event moves by up to ≈0.5 % (≈4 000 instructions on
    an 800 000-instruction Chat event) between processes with different imports, which is the size of what is
    measured; within one process it does not. The pre-warm then runs both ways."""
    phases = []
    for p in a.phases.split(",") if a.phases else [f"{a.surface}:{a.mode}"]:
        parts = p.split(":")  # surface:mode[:deltas:streams]
        phases.append((parts[0], parts[1], int(parts[2]) if len(parts) > 2 else a.deltas,
                       int(parts[3]) if len(parts) > 3 else a.streams))  # fmt: skip
    setup = configs.setup(a.config, [p[0] for p in phases])
    cg = Callgrind(a.cg_control)
    for paired_off in (False, True) if a.paired else (False,):
        if paired_off:
            setup.uninstrument()
        for surface, mode in dict.fromkeys((p[0], p[1]) for p in phases):  # the uninstrumented pre-warm
            body = canned.frames(surface, 10)
            client = make_client(surface, mode, setup, lambda _r, body=body: body)
            if mode == "sync":
                for _ in range(a.prewarm):
                    run_sync(client, surface)
            else:

                async def prewarm(client=client, surface=surface) -> None:
                    for _ in range(a.prewarm):
                        await run_async(client, surface)

                asyncio.run(prewarm())
        setup.flush()
        if paired_off:
            setup.reinstrument()
    if a.cg_instr_on:
        cg.instrument_on()
    out = []
    for surface, mode, deltas, streams in phases:
        body = canned.frames(surface, deltas)
        client = make_client(surface, mode, setup, lambda _r, body=body: body)
        spans0 = len(setup.finished_spans())
        events = _cg_phase(cg, setup, client, surface, mode, a.warmup, streams)
        lib = http_module(surface)
        row = {"surface": surface, "mode": mode, "deltas": deltas, "streams": streams, "events": events,
               "spans": len(setup.finished_spans()) - spans0, "http": f"{lib.__name__} {lib.__version__}"}  # fmt: skip
        if a.paired:  # the same phase again in this process, uninstrumented: the in-process baseline
            setup.uninstrument()
            row["events_off"] = _cg_phase(cg, setup, client, surface, mode, a.warmup, streams)
            setup.reinstrument()
        out.append(row)
    # after the last dump: whether the configuration's span covers the stream or only the call (workers/observed.py)
    observed = {} if a.config == "baseline" else {
        f"{s}|{m}": stream_observed(setup, s, m) for s, m in dict.fromkeys((p[0], p[1]) for p in phases)}  # fmt: skip
    return {"phases": out, "telemetry": setup.check(), "observed": observed}


def _cg_phase(cg: Callgrind, setup: configs.Setup, client, surface: str, mode: str, warmup: int, streams: int) -> int:
    """``warmup`` streams, a dump, ``streams`` measured streams, a dump."""
    if mode == "sync":
        for _ in range(warmup):
            run_sync(client, surface)
        setup.flush()
        gc.collect()
        cg.dump()  # closes the warm-up's dump
        events = 0
        for _ in range(streams):
            events += run_sync(client, surface)
        setup.flush()
        cg.dump()  # closes the measured phase's dump
        return events

    async def main() -> int:
        for _ in range(warmup):
            await run_async(client, surface)
        setup.flush()
        gc.collect()
        cg.dump()
        n = 0
        for _ in range(streams):
            n += await run_async(client, surface)
        setup.flush()
        cg.dump()
        return n

    return asyncio.run(main())
