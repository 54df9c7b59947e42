"""One benchmark configuration in one fresh process. Prints one JSON object on its last stdout line.

    python bench/workers/main.py time     CONFIG SURFACE MODE [--streams N --deltas D --warmup W]
    python bench/workers/main.py cg       CONFIG SURFACE MODE [...]   # run under valgrind: brackets the measured phase
    python bench/workers/main.py memory   CONFIG SURFACE [--open N --total N --tracing on|off]
    python bench/workers/main.py ttfd     CONFIG SURFACE [--pause S]
    python bench/workers/main.py serve    MODULE...                   # fork server: see serve()

The runner (``bench/run.py``) starts these; they can be run by hand the same way. Each command is a module of its own
(``bench/workers/timing.py``, ``callgrind.py``, ``memory.py``, ``ttfd.py``) over the streams of
``bench/workers/clients.py``; this one parses the command line, lays out the heap and serves forks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/workers/ -> the repo
if _ROOT not in sys.path:  # after $PYTHONPATH: the runner may put a committed snapshot of otelstream first
    sys.path.append(_ROOT)

from bench import canned, configs  # noqa: E402
from bench.workers.callgrind import cmd_cg  # noqa: E402
from bench.workers.memory import cmd_memory  # noqa: E402
from bench.workers.timing import cmd_time  # noqa: E402
from bench.workers.ttfd import cmd_ttfd  # noqa: E402


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
    """``workers/main.py serve MODULE…``: import the given modules once, then for every request line on stdin
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
