"""A stand-in load: writes exactly the docs/telemetry.md series into a prometheus_client registry and serves it.

It is not otelstream — it is the contract written down a second time, from ``otelstream.names`` — and serves two
purposes in the end-to-end test: the source of the one series the real load cannot produce on demand
(``otelstream_reports_dropped_total`` needs a full export queue), and, with ``OTELSTREAM_E2E_STAND_IN=1``, the
whole load when working on the dashboards without the SDKs.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from otelstream import names

# (provider, surface, model) traffic mix
_STREAMS = (
    (names.PROVIDER_OPENAI, names.RESPONSES, "gpt-demo"),
    (names.PROVIDER_OPENAI, names.CHAT_COMPLETIONS, "gpt-demo"),
    (names.PROVIDER_ANTHROPIC, names.MESSAGES, "claude-demo"),
)
# outcome weights: a fault mix that trips every alert (cut and failed streams, incompletes and abandons above 10 %)
_OUTCOMES = {
    names.COMPLETED: 55,
    names.INCOMPLETE: 15,
    names.FAILED: 6,
    names.ERROR: 5,
    names.CUT: 8,
    names.TRANSPORT_ERROR: 4,
    names.HTTP_ERROR: 8,
    names.ABANDONED: 15,
}
# the error class of each bad outcome: enough rate limiting and outage for both class alerts
_CLASS = {
    names.FAILED: names.EC_SERVER_ERROR,
    names.ERROR: names.EC_OVERLOADED,
    names.CUT: names.EC_CUT,
    names.TRANSPORT_ERROR: names.EC_CONNECTION,
    names.HTTP_ERROR: names.EC_RATE_LIMITED,
}
_COMMON = (names.LABEL_PROVIDER, names.LABEL_OPERATION, names.LABEL_MODEL)


class DesignLoad:
    """Finishes a synthetic stream every ``period`` seconds on a background thread; serves /metrics."""

    def __init__(self, *, only_dropped: bool = False, period: float = 0.02, seed: int = 7) -> None:
        self.registry = CollectorRegistry()
        self.only_dropped = only_dropped
        self.period = period
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="design-load", daemon=True)
        self._server: Any = None
        r = self.registry
        self.dropped = Counter(names.PROM_REPORTS_DROPPED, "dropped", _COMMON, registry=r)
        if only_dropped:
            return
        self.duration = Histogram(
            names.PROM_OPERATION_DURATION, "d", (*_COMMON, names.LABEL_ERROR_TYPE), registry=r,
            buckets=names.DURATION_BUCKETS,
        )  # fmt: skip
        self.tokens = Histogram(
            names.PROM_TOKEN_USAGE, "t", (*_COMMON, names.LABEL_TOKEN_TYPE), registry=r, buckets=names.TOKEN_BUCKETS
        )
        self.ttfd = Histogram(names.PROM_TIME_TO_FIRST_CHUNK, "f", _COMMON, registry=r, buckets=names.DURATION_BUCKETS)
        self.tpoc = Histogram(
            names.PROM_TIME_PER_OUTPUT_CHUNK, "c", _COMMON, registry=r, buckets=names.TIME_PER_CHUNK_BUCKETS
        )
        with_surface = (*_COMMON, names.LABEL_SURFACE)
        self.streams = Counter(
            names.PROM_STREAMS, "s", (*with_surface, names.LABEL_OUTCOME, names.LABEL_ERROR_TYPE, names.LABEL_PHASE),
            registry=r,
        )
        self.ttfe = Histogram(
            names.PROM_TIME_TO_FIRST_EVENT, "e", with_surface, registry=r, buckets=names.DURATION_BUCKETS
        )
        self.ttfo = Histogram(
            names.PROM_TIME_TO_FIRST_OUTPUT, "a", with_surface, registry=r, buckets=names.TTFD_BUCKETS
        )
        self.max_wait = Histogram(names.PROM_MAX_WAIT, "w", with_surface, registry=r, buckets=names.DURATION_BUCKETS)
        self.seq = Counter(names.PROM_SEQUENCE_ANOMALIES, "q", (*with_surface, names.LABEL_KIND), registry=r)
        self.anom = Counter(names.PROM_ANOMALIES, "a", (*with_surface, names.LABEL_KIND), registry=r)
        self.active = Gauge(names.PROM_STREAMS_ACTIVE, "o", with_surface, registry=r)
        self.stalled = Gauge(names.PROM_STREAMS_STALLED, "l", with_surface, registry=r)
        # the runtime self-check ran once and every cell held
        Gauge(names.PROM_SELF_CHECK_FAILURES, "k", registry=r).set(0)

    def serve(self) -> int:
        """Start the metrics endpoint on a free 127.0.0.1 port and the load thread; returns the port."""
        self._server, _ = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self._thread.start()
        port: int = self._server.server_port
        return port

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            if self.only_dropped:
                provider, surface, model = self._rng.choice(_STREAMS)
                self.dropped.labels(provider, names.OPERATION_BY_SURFACE[surface], model).inc()
            else:
                self.finish_one()

    def finish_one(self) -> None:
        rng = self._rng
        provider, surface, model = rng.choice(_STREAMS)
        common = (provider, names.OPERATION_BY_SURFACE[surface], model)
        outcome = rng.choices(list(_OUTCOMES), weights=list(_OUTCOMES.values()))[0]
        error_class = _CLASS.get(outcome, "")
        phase = ""  # a bad outcome's: an http_error never had output, the others broke before or during it
        if error_class:
            phase = names.PHASE_BEFORE_OUTPUT if outcome == names.HTTP_ERROR else rng.choice(names.FAILURE_PHASES)
        self.streams.labels(*common, surface, outcome, error_class, phase).inc()
        self.duration.labels(*common, error_class).observe(rng.uniform(0.5, 12.0))
        if outcome != names.HTTP_ERROR:
            self.ttfe.labels(*common, surface).observe(rng.uniform(0.05, 0.6))
            # every fifth first delta is slower than the 2.56 s SLO boundary
            ttfd = rng.uniform(3.0, 4.0) if rng.random() < 0.2 else rng.uniform(0.2, 1.0)
            self.ttfd.labels(*common).observe(ttfd)
            # the first answer: the first delta for one model, after some thinking for the other
            self.ttfo.labels(*common, surface).observe(ttfd + (rng.uniform(1.0, 5.0) if "gpt" in model else 0.0))
            chunks = rng.randint(5, 40)
            child = self.tpoc.labels(*common)
            for _ in range(chunks):
                child.observe(rng.uniform(0.005, 0.08))
            self.max_wait.labels(*common, surface).observe(rng.uniform(0.05, 2.0))
        if outcome in (names.COMPLETED, names.INCOMPLETE):
            self.tokens.labels(*common, names.TOKEN_TYPE_INPUT).observe(rng.randint(10, 2000))
            self.tokens.labels(*common, names.TOKEN_TYPE_OUTPUT).observe(rng.randint(5, 800))
        if surface == names.RESPONSES and rng.random() < 0.3:
            self.seq.labels(*common, surface, rng.choice(names.SEQUENCE_KINDS)).inc()
        if rng.random() < 0.2:
            self.anom.labels(*common, surface, rng.choice(names.PROTOCOL_ANOMALY_KINDS)).inc()
        if rng.random() < 0.05:
            self.dropped.labels(*common).inc()
        for p, s, m in _STREAMS:
            labels = (p, names.OPERATION_BY_SURFACE[s], m, s)
            self.active.labels(*labels).set(rng.randint(1, 20))
            self.stalled.labels(*labels).set(rng.randint(1, 3))


def families() -> Iterable[str]:
    """The metric family names the stand-in exposes (for the contract check)."""
    load = DesignLoad()
    return sorted({m.name for m in load.registry.collect()})
