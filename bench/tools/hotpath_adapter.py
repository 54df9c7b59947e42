"""``hotpath.py --adapter``: what the adapters add per event on the one observation path (the SDK's own generators,
our tap on ``_iter_events`` and our generator around ``__stream__``, ``tracker.event``), under callgrind, with a
listener that exports nothing (export is per stream); the same process uninstrumented is the reference.

    python bench/tools/hotpath.py --adapter [CELL ...] [--variant V]   # CELL: a surface, or surface/mode

Each cell (surface and mode) is one process: real SDK streams over MockTransport, short and long, first without
otelstream, then with it.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/tools/ -> the repo
if ROOT not in sys.path:
    sys.path.append(ROOT)

from bench import canned  # noqa: E402
from bench.tools.callgrind_dumps import dump_totals  # noqa: E402

ADAPTER_CELLS = ("responses", "chat", "messages")
_SHORT, _LONG, _STREAMS = 10, 110, 2


class _NullListener:
    def stream_started(self, start, tracker, parent=None):
        return None

    def activate(self, handle):
        return None

    def deactivate(self, token):
        pass

    def stream_finished(self, ended, handle):
        pass


# --adapter --variant: the same observation with one per-event part taken out, to measure what it costs (not a working
# configuration: what the part observes is lost)
VARIANTS = {
    "as-is": "",
    "no-comments": "the body's comment lines not counted (body_readers.py: read_sync, read_async)",
    "no-body-layer": "no generator around the body's chunks (body_readers.py: read_sync / read_async)",
}


def _take_out(variant: str) -> None:
    from otelstream.adapters import body_readers

    if variant == "no-comments":
        body_readers._BodyBase._otelstream_plain = False  # type: ignore[assignment]
    elif variant == "no-body-layer":
        body_readers._SyncBody.__iter__ = lambda self: iter(self._otelstream_body)  # type: ignore[method-assign]
        body_readers._AsyncBody.__aiter__ = lambda self: self._otelstream_body.__aiter__()  # type: ignore[method-assign]


def adapter_child(surface: str, mode: str, variant: str = "as-is") -> None:
    import asyncio

    from bench import configs
    from bench.workers import clients as worker_clients
    from otelstream import adapters

    _take_out(variant)

    setup = configs.Setup("baseline", anthropic_kwargs={"open_telemetry": False})
    try:
        worker_clients.make_client(surface, mode, setup, lambda r: [])
    except TypeError:  # an anthropic release without the open_telemetry option
        setup = configs.Setup("baseline")
    bodies = {n: canned.frames(surface, n) for n in (_SHORT, _LONG)}
    client = worker_clients.make_client(surface, mode, setup, lambda r: bodies[int(r.headers["x-deltas"])])
    loop = asyncio.new_event_loop() if mode == "async" else None

    def run(n: int) -> None:
        for _ in range(_STREAMS):
            s = worker_clients.open_stream(client, surface, {"x-deltas": str(n)})
            if loop is None:
                for _ in s:
                    pass
            else:
                async def drain(s=s):
                    async for _ in await s:
                        pass

                loop.run_until_complete(drain())

    for on in (False, True):
        if on:
            adapters.install(_NullListener())
        run(_SHORT)
        run(_LONG)
        os.getppid()  # dump: warm-up
        run(_SHORT)
        os.getppid()  # dump: short streams
        run(_LONG)
        os.getppid()  # dump: long streams
    if loop is not None:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def adapter(cells: list[str], variant: str) -> None:
    for surface in ADAPTER_CELLS:
        for mode in ("sync", "async"):
            if cells and f"{surface}/{mode}" not in cells and surface not in cells:
                continue
            tot = dump_totals([__file__, "--child", surface, mode, variant])
            events = (canned.expected_events(surface, _LONG) - canned.expected_events(surface, _SHORT)) * _STREAMS
            off = tot[3] - tot[2]
            on = tot[6] - tot[5]
            print(f"{surface} {mode}{'' if variant == 'as-is' else ' ' + variant}: "
                  f"{(on - off) / events:,.0f} Ir per event added (SDK alone {off / events:,.0f})")


def main(args: list[str]) -> None:
    """``args``: hotpath.py's, ``--adapter`` among them."""
    variant = args[args.index("--variant") + 1] if "--variant" in args else "as-is"
    if variant not in VARIANTS:
        raise SystemExit(f"--variant: one of {', '.join(VARIANTS)}")
    adapter([a for a in args if not a.startswith("-") and a != variant], variant)


if __name__ == "__main__":  # run by adapter() as the measured child: --child SURFACE MODE VARIANT
    adapter_child(*sys.argv[2:5])
