"""``otelstream demo``: stream through a local fake provider with the real SDKs and show what otelstream measured.

Starts the fake provider and the ``/metrics`` endpoint, instruments with ``otelstream.instrument(registry=…)``,
drives ``--streams`` streams (mixed surfaces, sync and async, WebSocket included; Gemini and Bedrock when
google-genai and boto3 are installed) with a planned fault mix, then
prints per-surface tables read back from the same registry ``/metrics`` serves. The plan is a pure function of
``--seed``, so outcome counts repeat exactly; only timings vary.

Module import stays light (the CLI imports every subcommand to build its parser): SDKs, OTel and the provider are
imported inside ``run``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from otelstream.demo import faults as F
from otelstream.demo.cloud_drive import available_lanes, open_async
from otelstream.demo.drive import Clients, Progress, close_clients, drive, make_clients, warm_up
from otelstream.demo.plan import ALL_LANES, Job, Lanes, expected_by_surface, models_by_surface, plan, servable
from otelstream.demo.serving import Terminated, serve_forever, sigterm_as_ctrl_c
from otelstream.distribution import install_hint

DEFAULT_STREAMS: Final = 300
DEFAULT_CONCURRENCY: Final = 48
DEFAULT_METRICS_PORT: Final = 9464
STALL_THRESHOLD_S: Final = 1.0  # the demo's `stall` pauses 1.5 s: over this threshold, so the stall gauge moves


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535; 0: any free)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    presets = ", ".join(F.PRESETS)
    parser.add_argument(
        "--streams", type=_positive, default=DEFAULT_STREAMS, help="streams to run (default %(default)s)"
    )
    parser.add_argument(
        "--concurrency", type=_positive, default=DEFAULT_CONCURRENCY, help="streams open at once (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=1, help="plan seed: same seed, same outcome counts (default 1)")
    parser.add_argument(
        "--faults",
        default="default",
        metavar="MIX",
        help=f"fault mix: a preset ({presets}) or weights like ok=70,cut=5,stall=3 (faults: {', '.join(F.FAULTS)})",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="after the table, keep the fake provider and /metrics up (with light traffic) until Ctrl-C or SIGTERM",
    )
    parser.add_argument("--spans", choices=("none", "console"), default="none", help="print spans to stdout")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_METRICS_PORT, help="/metrics port (default %(default)s; 0 = any free)"
    )
    parser.add_argument("--provider-port", type=_port, default=0, help="fake provider port (default: any free)")
    parser.add_argument("--ws-port", type=_port, default=0,
                        help="fake provider's port for Responses WebSocket mode (default: any free)")  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


@dataclass
class DemoResult:
    jobs: list[Job]
    expected: dict[str, dict[str, int]]  # surface → outcome → streams the fault plan promises
    table: str  # what was printed
    stats: Mapping[str, Any]  # surface → table.SurfaceStats
    registry: Any  # the prometheus_client.CollectorRegistry /metrics served
    raised: dict[str, int]  # exception types the SDKs raised to the demo's callers
    elapsed_s: float
    metrics_url: str | None
    matches: bool
    lanes: Lanes = ALL_LANES
    left_out: tuple[str, ...] = ()  # faults of the mix no installed SDK can serve


DEMO_PACING_KW: Final = {"ttfd_s": 0.25, "gap_s": 0.02, "jitter": 0.5, "pause_s": 1.5, "no_headers_s": 10.0}


def _require_demo_openai() -> None:
    """The demo streams Responses WebSocket lanes and tables what otelstream observed of them: below openai 3.32 (the
    demo extra's floor, the first release whose WebSocket mode is observed) it would fail halfway or mismatch."""
    import importlib.util

    try:
        observed = importlib.util.find_spec("openai._websocket_connection") is not None
    except ModuleNotFoundError:  # no openai at all
        observed = False
    if not observed:
        raise RuntimeError(f"the demo needs openai >= 3.32: {install_hint('demo')}")


def execute(args: argparse.Namespace, *, out: Any = None, keep_serving: bool = False) -> DemoResult:
    """The whole demo; ``run`` prints its result. Tests call this to get the registry as well as the table."""
    out = out or sys.stdout
    quiet = bool(getattr(args, "quiet", False))

    def say(step: str) -> None:
        """One line per step of the set-up, flushed at once: it takes seconds on a cold machine."""
        if not quiet:
            print(f"  {step}", file=out, flush=True)

    lanes = available_lanes()
    say(f"loading the {_sdk_names(lanes)} SDKs, OpenTelemetry and prometheus_client …")
    t_load = time.monotonic()
    _require_demo_openai()  # (finding openai's WebSocket module imports openai)
    import anthropic  # noqa: F401  (the slow imports happen here, after saying so)
    import openai  # noqa: F401

    from otelstream.demo import table as T
    from otelstream.demo.pacing import Pacing
    from otelstream.demo.provider import FakeProvider
    from otelstream.instrumentation import flush, instrument, is_instrumented, uninstrument

    asked_mix = F.FaultMix.parse(args.faults)
    mix, left_out = servable(asked_mix, lanes)
    if mix is None:
        raise ValueError(f"no installed SDK serves the fault mix {args.faults!r} ({', '.join(left_out)})")
    if left_out:
        say(f"left out of the mix (no installed SDK serves them): {', '.join(left_out)}")
    jobs = plan(args.streams, mix, args.seed, lanes)
    expected = expected_by_surface(jobs)
    if is_instrumented():
        raise RuntimeError("otelstream is already instrumented in this process; the demo needs its own registry")

    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    tracer_provider = None
    if args.spans == "console":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))

    provider = FakeProvider(port=args.provider_port, ws_port=args.ws_port,
                            pacing=Pacing(**DEMO_PACING_KW), seed=args.seed, tokens=(8, 40), mix=mix)  # fmt: skip
    provider.start()
    say(f"loaded in {time.monotonic() - t_load:.1f} s; fake provider on {provider.base_url}")
    metrics_server: Any = None
    clients = make_clients(provider, args.concurrency, lanes)
    try:
        say("one uninstrumented warm-up stream per surface (the SDKs' first-use set-up stays out of the timings) …")
        warm_up(clients)
        instrument(tracer_provider=tracer_provider, registry=registry, enabled=True,
                              stall_threshold_s=STALL_THRESHOLD_S)  # fmt: skip
        metrics_server, metrics_url = _start_metrics(args.port, out)
        say(f"instrumented; streaming {len(jobs)} streams, {min(args.concurrency, len(jobs))} at a time")
        progress = Progress(len(jobs), enabled=not getattr(args, "quiet", False))
        t0 = time.monotonic()
        raised = asyncio.run(_drive_and_close(jobs, clients, args.concurrency, progress))
        elapsed = time.monotonic() - t0
        flush(timeout=10.0)
        exposition = generate_latest(registry).decode()
        stats = T.collect(T.parse_exposition(exposition), models_by_surface(lanes))
        text = T.render(stats)
        got = {s: {o: n for o, n in st.outcomes.items() if n} for s, st in stats.items()}
        result = DemoResult(jobs, expected, text, stats, registry, raised, elapsed, metrics_url, got == expected,
                            lanes, tuple(left_out))  # fmt: skip
        if keep_serving:
            _print_result(result, args, out)
            serve_forever(provider, metrics_url, args, mix, out)
        return result
    finally:
        uninstrument()
        if metrics_server is not None:
            _stop_metrics(metrics_server)
        provider.close()


async def _drive_and_close(jobs: list[Job], clients: Clients, concurrency: int, progress: Progress) -> dict[str, int]:
    try:
        await open_async(clients.cloud)  # aiobotocore's clients, in this event loop (before the clock starts)
        return await drive(jobs, clients, concurrency, progress)
    finally:
        await close_clients(clients)


def _start_metrics(port: int, out: Any) -> tuple[Any, str | None]:
    from otelstream.instrumentation import start_metrics_server

    try:
        server = start_metrics_server(port=port)
    except OSError as exc:
        if port == 0:
            raise
        print(f"note: port {port} is taken ({exc.strerror}); serving /metrics on a free port instead", file=out)
        server = start_metrics_server(port=0)
    if isinstance(server, tuple) and server and hasattr(server[0], "server_port"):
        return server, f"http://127.0.0.1:{server[0].server_port}/metrics"
    return server, None


def _stop_metrics(server: Any) -> None:
    if isinstance(server, tuple) and server and hasattr(server[0], "shutdown"):
        server[0].shutdown()
        server[0].server_close()


def _print_result(result: DemoResult, args: argparse.Namespace, out: Any) -> None:
    n = len(result.jobs)
    print(
        f"\n{n} streams through the real {_sdk_names(result.lanes)} clients against a local fake provider "
        f"in {result.elapsed_s:.1f} s (seed {args.seed}, concurrency {args.concurrency}, mix {args.faults!r})\n",
        file=out,
    )
    print(result.table, file=out)
    served: dict[str, int] = {}
    for job in result.jobs:
        served[job.fault] = served.get(job.fault, 0) + 1
    in_mix_order = [(f, served[f]) for f, _ in F.FaultMix.parse(args.faults).weights if served.get(f)]
    print(f"\nfaults served: {', '.join(f'{f} {c}' for f, c in in_mix_order)}", file=out)
    if result.left_out:
        print(f"left out (no installed SDK serves them): {', '.join(result.left_out)}", file=out)
    lanes = sorted({job.lane for job in result.jobs if job.via})
    if lanes:
        print(f"also driven: {', '.join(lanes)} (counted under its surface)", file=out)
    if result.matches:
        print("every outcome above is what the fault plan promised, read back from Prometheus", file=out)
    else:
        print("MISMATCH between the fault plan and what Prometheus counted:", file=out)
        for surface in sorted(set(result.expected) | set(result.stats)):
            got = {o: c for o, c in result.stats[surface].outcomes.items() if c} if surface in result.stats else {}
            if got != result.expected.get(surface, {}):
                print(f"  {surface}: expected {result.expected.get(surface, {})}, counted {got}", file=out)
    if result.metrics_url:
        print(f"metrics: {result.metrics_url}" + ("" if args.serve else " (stopped at exit; --serve keeps it up)"),
              file=out)  # fmt: skip
    print("models by surface (the TTFD and token series carry a model label, not a surface): "
          + ", ".join(f"{s}={'+'.join(m)}" for s, m in models_by_surface(result.lanes).items()), file=out)  # fmt: skip
    out.flush()


def _sdk_names(lanes: Lanes) -> str:
    sdks = ["openai", "anthropic"] + (["google-genai"] if lanes.gemini else [])
    sdks += (["boto3", "aiobotocore"] if lanes.bedrock_async else ["boto3"]) if lanes.bedrock else []
    return ", ".join(sdks[:-1]) + " and " + sdks[-1]


def run(args: argparse.Namespace) -> int:
    # Loading the SDKs, OTel and the provider and warming the clients up takes seconds on a cold machine: say what is
    # happening before any of it, not after a blank screen.
    print(f"otelstream demo: {args.streams} streams through the real SDK clients against a fake provider on "
          "127.0.0.1 (loading the SDKs first)", flush=True)  # fmt: skip
    try:
        with sigterm_as_ctrl_c():
            result = execute(args, keep_serving=bool(args.serve))
    except (RuntimeError, ValueError, OSError) as exc:  # OSError: e.g. --provider-port or --ws-port already in use
        print(f"otelstream demo: {exc}", file=sys.stderr)
        return 2
    except Terminated:  # before the table: nothing to show
        print("otelstream demo: stopped (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
    if not args.serve:
        _print_result(result, args, sys.stdout)
    return 0 if result.matches else 1
