"""Where a stream's fixed cost goes: callgrind instructions per stream with one part of otelstream switched on or off.

    python bench/tools/ablate.py [--surface chat] [--streams 20] [--deltas 10] [--variants baseline,none,spans,...]

Each variant runs in its own process under ``valgrind --tool=callgrind`` (instrumentation switched on by
``callgrind_control`` after the warm-up and the measured streams dumped by it, as in ``run.py``): the real SDK client over ``MockTransport``, 30 uninstrumented warm-up streams, then
``--streams`` streams of ``--deltas`` deltas and a flush. Printed: Ir per stream and the difference to ``baseline``
(per stream, so the deltas' marginal cost is inside: about ``deltas`` x 4 000-7 000).

Variants (otelstream from the work tree):
  baseline   the SDK alone
  none       instrument() with no sink: no tracer provider (the no-op tracer), no Prometheus, no OTel metrics
  prom       Prometheus only         spans   spans only          otel   OTel metrics only
  default    spans + Prometheus      all     spans + Prometheus + OTel metrics
  none-stub-pipeline, none-stub-pipeline-report, none-stub-pipeline-report-events
             ``none`` with the pipeline's hooks, then also the tracker's report, then also ``tracker.event`` replaced
             by no-ops (diagnostics: what the adapters and the tracker cost without them; not a working
             configuration). Differences under ≈50 000 Ir per stream are within the layout noise of single runs.
"""

from __future__ import annotations

import argparse
import gc
import glob
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/tools/ -> the repo
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

VARIANTS = ("baseline", "none", "prom", "spans", "otel", "default", "all",
            "none-stub-pipeline", "none-stub-pipeline-report", "none-stub-pipeline-report-events")  # fmt: skip


def _install(variant: str, surface: str):  # type: ignore[no-untyped-def]
    from bench import configs

    if variant == "baseline":
        return configs.setup("baseline", surface)
    from prometheus_client import CollectorRegistry

    import otelstream

    base, _, stubbed = variant.partition("-stub-")
    stubs = set(stubbed.split("-")) if stubbed else set()
    setup = configs.Setup("otelstream-default", anthropic_kwargs={"open_telemetry": False})
    kw: dict[str, object] = {"prometheus_metrics": base in ("prom", "default", "all")}
    setup.registry = kw["registry"] = CollectorRegistry()
    if base in ("spans", "default", "all", "otel"):
        setup.spans, tp, setup.reader, mp = configs._otel(global_too=False)
        if base != "otel":
            kw["tracer_provider"] = setup.tracer_provider = tp
        if base in ("otel", "all"):
            kw["meter_provider"] = setup.meter_provider = mp
    otelstream.instrument(**kw)
    from otelstream.core import stream_end, tracker
    from otelstream.export import pipeline

    if "pipeline" in stubs:
        pipeline.Pipeline.stream_started = lambda self, start, tracker, parent=None: None  # type: ignore[method-assign]
        pipeline.Pipeline.stream_finished = lambda self, report, handle: None  # type: ignore[method-assign]
    if "report" in stubs:
        stream_end.build_report = lambda *a: None  # type: ignore[assignment]
    if "events" in stubs:
        tracker.StreamTracker.event = lambda self, ev, name=None: None  # type: ignore[method-assign]
    return setup


def child(variant: str, surface: str, streams: int, deltas: int) -> None:
    from bench import canned
    from bench.workers import callgrind as worker_cg
    from bench.workers import clients as worker_clients

    setup = _install(variant, surface)
    body = canned.frames(surface, deltas)
    client = worker_clients.make_client(surface, "sync", setup, lambda _r: body)
    for _ in range(30):
        worker_clients.run_sync(client, surface)
    setup.flush()
    gc.collect()
    cg = worker_cg.Callgrind(True)
    cg.instrument_on()
    cg.dump()  # closes dump 1: the control call's own tail
    for _ in range(streams):
        worker_clients.run_sync(client, surface)
    setup.flush()
    cg.dump()  # closes dump 2: the measured streams, every thread


def measure(variant: str, a: argparse.Namespace) -> float:
    out = tempfile.mkdtemp(prefix="otelstream-ablate-")
    try:
        env = {**os.environ, "PYTHONHASHSEED": "0", "OTELSTREAM_WATCHDOG_INTERVAL_S": "3600",
               "OTELSTREAM_SELF_CHECK": "false",  # once per process (bench/self_check.py), not per stream
               "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}  # fmt: skip
        subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                        f"--callgrind-out-file={out}/cg.%p", sys.executable, __file__, "--child", variant,
                        a.surface, str(a.streams), str(a.deltas)], check=True, capture_output=True, env=env)  # fmt: skip
        with open(glob.glob(f"{out}/cg.*.2")[0]) as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("totals:")) / a.streams
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--surface", default="chat")
    p.add_argument("--streams", type=int, default=20)
    p.add_argument("--deltas", type=int, default=10)
    p.add_argument("--variants", default="baseline,none,prom,spans,otel,default,all")
    a = p.parse_args()
    variants = a.variants.split(",")
    if "baseline" not in variants:
        variants.insert(0, "baseline")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variant(s): {', '.join(sorted(unknown))}")
    base = None
    print(f"{a.surface}, {a.streams} streams of {a.deltas} deltas, Ir per stream (difference to baseline)")
    for v in variants:
        ir = measure(v, a)
        base = ir if v == "baseline" else base
        print(f"  {v:20} {ir:12,.0f}  ({ir - base:+,.0f})" if base is not None else f"  {v:20} {ir:12,.0f}")


if __name__ == "__main__":
    main()
