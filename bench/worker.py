"""One benchmark configuration in one fresh process. Prints one JSON object on its last stdout line.

    python bench/worker.py time     CONFIG SURFACE MODE [--streams N --deltas D --warmup W]
    python bench/worker.py cg       CONFIG SURFACE MODE [...]   # run under valgrind: brackets the measured phase
    python bench/worker.py memory   CONFIG SURFACE [--open N --total N --tracing on|off]
    python bench/worker.py ttfd     CONFIG SURFACE [--pause S]
    python bench/worker.py serve    MODULE...                   # fork server: see serve()

The runner (``bench/run.py``) starts these; they can be run by hand the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:  # after $PYTHONPATH: the runner may put a committed snapshot of otelstream first
    sys.path.append(_ROOT)

from bench import canned, configs  # noqa: E402

PROMPT = [{"role": "user", "content": "Say something"}]


# --- clients over the HTTP library's MockTransport ------------------------------------------------------------
BASE = "http://bench.invalid"


def http_module(surface: str) -> ModuleType:
    """The HTTP client library the surface is read through: the SDK's own (httpx2; httpx for openai 2.x). The
    HTTP-level observer's surfaces take the one this SDK set's openai reads with: a plain client of the same library
    (httpx is also what litellm's own providers use)."""
    sdk = importlib.import_module("anthropic" if configs.lib_of(surface) == "anthropic" else "openai")
    for cls in sdk.DefaultHttpxClient.__mro__:
        root = cls.__module__.partition(".")[0]
        if root in ("httpx", "httpx2"):
            return importlib.import_module(root)
    raise SystemExit(f"{sdk.__name__} {sdk.__version__}: its client is neither httpx's nor httpx2's")


def make_client(surface: str, mode: str, setup: configs.Setup, frames_fn: Callable[[Any], Iterable[bytes]],
                **http_kwargs: Any) -> Any:  # fmt: skip
    """A real SDK client whose transport replays the canned body (``frames_fn(request)`` -> list of frames); for the
    HTTP-level observer's surfaces the plain HTTP client itself."""
    httpx = http_module(surface)
    headers = {"content-type": "text/event-stream", "x-request-id": "req_bench"}
    if surface in canned.HTTP_SURFACES:
        http_kwargs["base_url"] = BASE
    if mode == "sync":

        def handler(request):
            return httpx.Response(200, headers=headers, content=iter(frames_fn(request)))

        http = httpx.Client(transport=httpx.MockTransport(handler), **http_kwargs)
    else:

        def ahandler(request):
            frames = frames_fn(request)

            async def body():
                for f in frames:
                    yield f

            return httpx.Response(200, headers=headers, content=body())

        http = httpx.AsyncClient(transport=httpx.MockTransport(ahandler), **http_kwargs)
    if surface in canned.HTTP_SURFACES:
        return http
    return _sdk_client(surface, mode, setup, http)


def _sdk_client(surface: str, mode: str, setup: configs.Setup, http: Any) -> Any:
    if configs.lib_of(surface) == "anthropic":
        import anthropic

        cls = anthropic.Anthropic if mode == "sync" else anthropic.AsyncAnthropic
        options = setup.anthropic_kwargs
        if not configs.anthropic_traces():  # anthropic 1.x: no tracing of its own, no option to turn it off
            options = {k: v for k, v in options.items() if k != "open_telemetry"}
        return cls(api_key="sk-ant-bench", base_url=BASE, max_retries=0, http_client=http, **options)
    import openai

    cls = openai.OpenAI if mode == "sync" else openai.AsyncOpenAI
    return cls(api_key="sk-bench", base_url=BASE + "/v1", max_retries=0, http_client=http)


# the HTTP-level observer's surfaces: (path, JSON body, headers) of the request a caller sends without an SDK
_HTTP_REQUESTS = {
    "http-chat": ("/v1/chat/completions", {"model": canned.MODEL_OA, "messages": PROMPT, "stream": True,
                                           "stream_options": {"include_usage": True}}, {}),
    "http-messages": ("/v1/messages", {"model": canned.MODEL_AN, "max_tokens": 1024, "messages": PROMPT,
                                       "stream": True}, {"anthropic-version": "2023-06-01"}),
}  # fmt: skip


def _http_events(client: Any, surface: str, extra_headers: dict) -> Iterator[Any]:
    """A caller's own SSE reading over a plain client, as litellm's providers do: ``iter_lines()``, every ``data:``
    payload but ``[DONE]`` parsed, to the end of the body."""
    path, body, headers = _HTTP_REQUESTS[surface]
    with client.stream("POST", path, json=body, headers={**headers, **extra_headers}) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                yield json.loads(line[6:])


async def _http_aevents(client: Any, surface: str, extra_headers: dict) -> AsyncIterator[Any]:
    path, body, headers = _HTTP_REQUESTS[surface]
    async with client.stream("POST", path, json=body, headers={**headers, **extra_headers}) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                yield json.loads(line[6:])


async def _ready(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    return events


def open_stream(client: Any, surface: str, extra_headers: dict | None = None) -> Any:
    """The create(stream=True) call (a coroutine for async clients); on a plain HTTP client, the caller's own read."""
    eh = extra_headers or {}
    if surface in canned.HTTP_SURFACES:
        if isinstance(client, sys.modules[type(client).__module__.partition(".")[0]].AsyncClient):
            return _ready(_http_aevents(client, surface, eh))
        return _http_events(client, surface, eh)
    if surface == "responses":
        return client.responses.create(model=canned.MODEL_OA, input="Say something", stream=True, extra_headers=eh)
    if surface == "chat":
        return client.chat.completions.create(model=canned.MODEL_OA, messages=PROMPT, stream=True,
                                              stream_options={"include_usage": True}, extra_headers=eh)  # fmt: skip
    if surface == "completions":
        return client.completions.create(model="gpt-3.5-turbo-instruct", prompt="Say something", stream=True,
                                         stream_options={"include_usage": True}, extra_headers=eh)  # fmt: skip
    return client.messages.create(model=canned.MODEL_AN, max_tokens=1024, messages=PROMPT, stream=True,
                                  extra_headers=eh)  # fmt: skip


def run_sync(client, surface: str) -> int:
    n = 0
    for _ in open_stream(client, surface):
        n += 1
    return n


async def run_async(client, surface: str) -> int:
    n = 0
    stream = await open_stream(client, surface)
    async for _ in stream:
        n += 1
    return n


# --- time: wall-clock per event --------------------------------------------------------------------------
def cmd_time(a) -> dict:
    setup = configs.setup(a.config, a.surface)
    body = canned.frames(a.surface, a.deltas)
    client = make_client(a.surface, a.mode, setup, lambda _r: body)
    per_event: list[float] = []
    events = 0
    if a.mode == "sync":
        for _ in range(a.warmup):
            run_sync(client, a.surface)
        gc.collect()
        for _ in range(a.streams):
            t0 = time.perf_counter_ns()
            events = run_sync(client, a.surface)
            per_event.append((time.perf_counter_ns() - t0) / events)
    else:

        async def main() -> int:
            for _ in range(a.warmup):
                await run_async(client, a.surface)
            gc.collect()
            n = 0
            for _ in range(a.streams):
                t0 = time.perf_counter_ns()
                n = await run_async(client, a.surface)
                per_event.append((time.perf_counter_ns() - t0) / n)
            return n

        events = asyncio.run(main())
    tele = setup.check()
    return {"per_event_ns": statistics.median(per_event), "min_ns": min(per_event), "events": events,
            "streams": a.streams + a.warmup, "telemetry": tele}  # fmt: skip


# --- cg: instructions under callgrind ---------------------------------------------------------------------
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
    return {"phases": out, "telemetry": setup.check()}


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


# --- memory: tracemalloc per open stream and retained after the end ----------------------------------------
def cmd_memory(a) -> dict:
    import tracemalloc

    setup = configs.setup(a.config, a.surface, tracing=a.tracing == "on")
    body = canned.frames(a.surface, 4)
    client = make_client(a.surface, "sync", setup, lambda _r: body)
    for _ in range(20):  # warm every lazy cache: SDK parse paths, label sets, instruments
        run_sync(client, a.surface)
    setup.flush()
    gc.collect()
    tracemalloc.start()
    # 1) memory per open stream: open N streams, pull their first event, hold them open
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    held = []
    for _ in range(a.open):
        # what a caller suspended inside ``for event in stream:`` holds: the stream's iterator, one event pulled
        it = iter(open_stream(client, a.surface))
        next(it)
        held.append(it)
    gc.collect()
    open_bytes = tracemalloc.get_traced_memory()[0] - before
    for s in held:
        for _ in s:
            pass
    held.clear()
    setup.flush()
    gc.collect()
    # 2) retained after TOTAL streams ran to the end (200 more first: lazily created per-process state settles)
    for _ in range(200):
        run_sync(client, a.surface)
    setup.flush()
    if setup.spans is not None:
        setup.spans.clear()  # the in-memory exporter keeps spans by design: not otelstream's memory
    gc.collect()
    base2 = tracemalloc.get_traced_memory()[0]
    for _ in range(a.total):
        run_sync(client, a.surface)
    setup.flush()
    if setup.spans is not None:
        setup.spans.clear()
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - base2
    tracemalloc.stop()
    return {"open_streams": a.open, "open_bytes_per_stream": open_bytes / a.open, "total_streams": a.total,
            "retained_bytes": retained, "telemetry": setup.check()}  # fmt: skip


# --- ttfd: scripted pause before the first delta --------------------------------------------------------------
_FIRST_DELTA_INDEX = {"responses": 4, "chat": 1, "completions": 0, "messages": 3}


def _is_delta(surface: str, ev) -> bool:
    d = ev.__dict__
    if surface == "responses":
        return d.get("type") == "response.output_text.delta"
    if surface == "chat":
        ch = d.get("choices") or []
        return bool(ch and ch[0].delta.content)
    if surface == "completions":
        ch = d.get("choices") or []
        return bool(ch and ch[0].text)
    return d.get("type") == "content_block_delta"


def cmd_ttfd(a) -> dict:
    """One stream whose first frame arrives at once, then a pause of ``--pause`` s before the first delta.
    Truth = the caller's clock from just before ``create()`` to the first delta it receives."""
    setup = configs.setup(a.config, a.surface)
    frames = canned.frames(a.surface, 5)
    idx = _FIRST_DELTA_INDEX[a.surface]
    pause = {"on": False}

    def body(_r):
        def gen():
            for i, f in enumerate(frames):
                if i == idx and pause["on"]:
                    time.sleep(a.pause)
                yield f

        return gen()

    client = make_client(a.surface, "sync", setup, body)
    run_sync(client, a.surface)  # warm-up, no pause
    setup.flush()
    if setup.spans is not None:
        setup.spans.clear()
    if setup.reader is not None:
        setup.reader.get_metrics_data()  # (cumulative; we read the new sum below by difference)
    before = _ttft_metric(setup)
    pause["on"] = True
    t0 = time.perf_counter()
    truth = None
    for ev in open_stream(client, a.surface):
        if truth is None and _is_delta(a.surface, ev):
            truth = time.perf_counter() - t0
    setup.flush()
    measured, source = _measured_ttfd(a.config, setup, before)
    return {"truth_s": truth, "measured_s": measured, "source": source, "pause_s": a.pause,
            "telemetry": setup.check()}  # fmt: skip


_TTFT_METRICS = ("gen_ai.client.operation.time_to_first_chunk", "gen_ai.server.time_to_first_token",
                 "otelstream.stream.time_to_first_delta")  # fmt: skip


def _ttft_metric(setup) -> dict:
    out: dict = {}
    if setup.reader is None:
        return out
    data = setup.reader.get_metrics_data()
    for rm in getattr(data, "resource_metrics", ()) or ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name in _TTFT_METRICS or "first" in m.name:
                    for p in m.data.data_points:
                        c = out.setdefault(m.name, [0.0, 0])
                        c[0] += getattr(p, "sum", 0.0)
                        c[1] += getattr(p, "count", 0)
    return out


def _measured_ttfd(config: str, setup, before: dict):
    """What the instrumentation says: span attribute, else span event offset, else metric (new sum / new count)."""
    spans = setup.finished_spans()
    # the stream's own span is the root-most with a TTFT-ish attribute; anthropic/openai HTTP spans have none
    for key in ("otelstream.time_to_first_delta", "gen_ai.response.time_to_first_chunk"):
        for s in spans:
            v = (s.attributes or {}).get(key)
            if v is not None:
                return float(v), f"span attribute {key}"
    for s in spans:
        for e in s.events or ():
            if "first" in e.name.lower():
                return (e.timestamp - s.start_time) / 1e9, f"span event {e.name!r} - span start"
    after = _ttft_metric(setup)
    for name in _TTFT_METRICS + tuple(after):
        if name in after:
            s1, c1 = after[name]
            s0, c0 = before.get(name, [0.0, 0])
            if c1 > c0:
                v = (s1 - s0) / (c1 - c0)
                return (v / 1000.0 if v > 50 else v), f"metric {name}"
    return None, "none"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=("time", "cg", "memory", "ttfd"))
    p.add_argument("config", choices=configs.ALL)
    p.add_argument("surface", choices=canned.SURFACES)
    p.add_argument("mode", nargs="?", default="sync", choices=("sync", "async"))
    p.add_argument("--streams", type=int, default=40)
    p.add_argument("--deltas", type=int, default=200)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--open", type=int, default=1000)
    p.add_argument("--total", type=int, default=10_000)
    p.add_argument("--tracing", default="on", choices=("on", "off"))
    p.add_argument("--pause", type=float, default=0.5)
    p.add_argument("--phases", default="", help="cg: surface:mode,… measured one after another in this process")
    p.add_argument("--prewarm", type=int, default=10, help="cg: uninstrumented streams per surface and mode first")
    p.add_argument("--cg-control", action="store_true",
                   help="cg: under callgrind: dump each phase with callgrind_control -d")
    p.add_argument("--cg-instr-on", action="store_true",
                   help="cg: switch callgrind's instrumentation on after the pre-warm (callgrind_control -i on)")
    p.add_argument("--paired", action="store_true",
                   help="cg (otelstream): after each phase, the same phase uninstrumented in this process")
    p.add_argument("--watchdog-s", type=float, help="the watchdog's interval (default: OTELSTREAM_WATCHDOG_INTERVAL_S, 1)")
    p.add_argument("--layout", type=int, default=0,
                   help="cg: this many extra types and names before the SDK and otelstream are imported (pad_heap)")
    a = p.parse_args()
    pad_heap(a.layout)
    if a.watchdog_s is not None:
        os.environ["OTELSTREAM_WATCHDOG_INTERVAL_S"] = str(a.watchdog_s)
    os.environ.setdefault("OTELSTREAM_WATCHDOG_INTERVAL_S", "1")
    out = {"cmd": a.cmd, "config": a.config, "surface": a.surface, "mode": a.mode}
    out.update({"time": cmd_time, "cg": cmd_cg, "memory": cmd_memory, "ttfd": cmd_ttfd}[a.cmd](a))
    sys.stdout.flush()
    print(json.dumps(out))


_PAD: list[type] = []


def pad_heap(n: int) -> None:
    """Give everything imported later a different memory and type-cache layout. CPython 3.11's method cache is indexed
    by a type's version tag (a global counter, handed out in the order types are first looked up in) XOR the address
    of the interned name, so the same code can cost a few hundred instructions more or less per event depending only on
    which hot lookups collide there. ``n`` new types, each given its version tag, shift every later tag; ``n`` interned
    names of varied lengths shift later small objects in every size class. ``run.py`` takes the median over several
    layouts. Everything stays alive for the whole process."""
    for i in range(n):
        name = sys.intern(f"_otelstream_bench_layout_{'x' * (i % 48)}{i}")
        cls = type(name, (), {})
        getattr(cls, name, None)  # the lookup assigns the type its version tag
        _PAD.append(cls)


# --- fork server --------------------------------------------------------------------------------------------
def serve(preload: list[str]) -> None:
    """``worker.py serve MODULE…``: import the given modules once, then for every request line on stdin
    (``{"argv": […], "stdout": path, "stderr": path, "timeout": s}``) fork a child that runs ``main()`` with that
    argv and its stdout/stderr in the two files, wait for it, and answer ``{"rc": …}`` on stdout.

    The runner preloads only what every worker of the surface imports first thing anyway (``httpx2`` and the
    surface's SDK, openai or anthropic): no instrumentation, no OpenTelemetry, no client, no thread, no event loop.
    Everything configuration-specific still happens in the child, which is a new process like a worker started
    from scratch; it only skips the SDK import (≈0.45 s for openai, ≈1.2 s for anthropic of a ≈1.8 s worker)."""
    import importlib
    import signal
    import traceback

    for name in preload:
        importlib.import_module(name)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child: never returns into this loop
            code = 1
            try:
                out_flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["stdout"], out_flags),
                                        (2, req["stderr"], out_flags)):  # fmt: skip
                    f = os.open(path, flags, 0o600)
                    os.dup2(f, fd)
                    os.close(f)
                signal.alarm(max(1, int(req.get("timeout", 300))))  # default action: terminate
                sys.argv = [sys.argv[0], *req["argv"]]
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            except BaseException:
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2:])
    else:
        main()
