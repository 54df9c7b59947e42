"""The real load for the end-to-end test, run as its own process: the demo's fake provider, the OpenAI and
Anthropic SDKs instrumented by ``otelstream.instrument()``, and otelstream's metrics endpoint.

    python instrumented_worker.py METRICS_PORT [faults|healthy]

prints ``ready <port>`` once serving, then streams a mix from several threads until killed; SIGUSR1 stops the
streams (the metrics endpoint stays up: a service whose traffic stopped). The ``faults`` mix trips every alert of
otelstream.rules.yml but the traffic one within seconds: per label set more than 5 % bad outcomes (cut, failed,
transport_error, http_error), more than 10 % incomplete and abandoned, more than 5 % first deltas later than
2.56 s, stalls longer than the stall threshold, and sequence gaps. The ``healthy`` mix completes every stream.
Spans go to an SDK TracerProvider without exporters, so the histograms carry exemplars. Streams carry the
application attribute ``tenant`` as a metric label (``acme`` or ``globex``; every third stream none), and every
fourth stream ``probe_name`` (``synthetic``), as ``otelstream probe`` labels its own: the dashboard's probe row.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import sys
import threading
from typing import Any

import anthropic
import openai
from opentelemetry.sdk.trace import TracerProvider

import otelstream
from otelstream.demo import faults as F
from otelstream.demo.exchange import FAULT_HEADER, PAUSE_HEADER, TTFD_HEADER
from otelstream.demo.provider import serve

STALL_THRESHOLD_S = 0.3
THREADS = {"faults": 12, "healthy": 3}
TENANTS = ("acme", "globex", "")  # "": a stream started outside any attributes() block
PROBES = ("synthetic", "", "", "")  # cycles apart from the tenants (3 and 4 are coprime)
# (surface, fault, extra headers): a round-robin plan, so every label set sees every fault it can have
PLAN: list[tuple[str, str, dict[str, str]]] = []
for surface in ("responses", "chat_completions", "messages"):
    PLAN += [(surface, F.OK, {})] * 6
    PLAN += [
        (surface, F.CUT, {}),
        (surface, F.INCOMPLETE, {}),
        (surface, F.INCOMPLETE, {}),
        (surface, F.INCOMPLETE, {}),
        (surface, F.SLOW_FIRST, {TTFD_HEADER: "3"}),
        (surface, F.SLOW_FIRST, {TTFD_HEADER: "3"}),
        (surface, F.STALL, {PAUSE_HEADER: "2"}),
        (surface, F.RESET, {}),
        (surface, F.ERROR, {}),
        (surface, F.KEEPALIVE, {}),
    ]
    # the caller gives up on 4 of ~24 streams: over OtelstreamAbandonedRatioHigh's 10 %
    PLAN += [(surface, F.ABANDON, {})] * 4
    if surface != "messages":
        PLAN.append((surface, F.HTTP_500, {}))
    # rate limiting (2 of ~21 streams: ~10 %, over OtelstreamRateLimited's 5 %) and an overload (outage alert)
    PLAN += [(surface, F.HTTP_429, {}), (surface, F.HTTP_429, {}), (surface, F.OVERLOADED, {})]
PLAN += [("responses", F.FAILED, {}), ("responses", F.SEQ_GAP, {}), ("responses", F.SEQ_DUP, {})]
PLAN += [("responses", F.TRAILING_DONE, {})]  # a protocol anomaly (trailing_done)
# every stream whole, on every surface: what a share or failure-rate panel shows when all is well
HEALTHY_PLAN: list[tuple[str, str, dict[str, str]]] = [
    (surface, F.OK, {}) for surface in ("responses", "chat_completions", "messages")
]


def stream_once(oa: openai.OpenAI, an: anthropic.Anthropic, surface: str, fault: str, extra: dict[str, str]) -> None:
    headers = dict(extra)
    if fault != F.ABANDON:
        headers[FAULT_HEADER] = fault
    events: Any
    if surface == "responses":
        events = oa.responses.create(model="gpt-demo", input="hi", stream=True, extra_headers=headers)
    elif surface == "chat_completions":
        events = oa.chat.completions.create(
            model="gpt-demo",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=headers,
        )
    else:
        events = an.messages.create(
            model="claude-demo",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            extra_headers=headers,
        )
    with events:
        for i, _ in enumerate(events):
            if fault == F.ABANDON and i >= 3:
                break


def main() -> None:
    port = int(sys.argv[1])
    mix = sys.argv[2] if len(sys.argv) > 2 else "faults"
    stopped = threading.Event()
    signal.signal(signal.SIGUSR1, lambda signum, frame: stopped.set())
    otelstream.instrument(
        tracer_provider=TracerProvider(), stall_threshold_s=STALL_THRESHOLD_S,
        metric_attributes=("tenant", "probe_name"),
    )
    otelstream.start_metrics_server(port=port, addr="127.0.0.1")
    with serve(websocket=False) as provider:
        oa = openai.OpenAI(**provider.openai_kwargs(max_retries=0, timeout=10.0))
        an = anthropic.Anthropic(**provider.anthropic_kwargs(max_retries=0, timeout=10.0))
        plan = itertools.cycle(HEALTHY_PLAN if mix == "healthy" else PLAN)
        tenants = itertools.cycle(TENANTS)
        probes = itertools.cycle(PROBES)
        lock = threading.Lock()

        def work() -> None:
            while not stopped.is_set():
                with lock:
                    surface, fault, extra = next(plan)
                    attrs = {k: v for k, v in (("tenant", next(tenants)), ("probe_name", next(probes))) if v}
                # the faults raise by design (in-band errors, resets, HTTP 500)
                with contextlib.suppress(Exception), otelstream.attributes(**attrs):
                    stream_once(oa, an, surface, fault, extra)

        for n in range(THREADS[mix]):
            threading.Thread(target=work, name=f"load-{n}", daemon=True).start()
        print(f"ready {port}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
