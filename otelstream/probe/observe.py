"""otelstream observing the probe's streams exactly as in a service: ``otelstream.instrument()`` with the export
pipeline, spans and metrics where the OTel environment says (as ``otelstream.auto`` does), every series labelled
``probe_name`` through ``metric_attributes``, and each stream's ``StreamReport`` handed back through ``on_report``.

A report finds its request by the ``probe.request`` attribute the request was sent under (``on_report`` runs on its
own thread, and a WebSocket response or a refused request has no stream object for ``report_of``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
from collections.abc import Sequence
from typing import Any

from otelstream import config, names
from otelstream.core.report import StreamReport
from otelstream.otel_env import meter_provider_from_env, tracer_provider_from_env
from otelstream.probe import requests
from otelstream.probe.config import ProbeError

logger = logging.getLogger("otelstream")


class Inbox:
    """Reports, from the export side's callback thread to the request waiting for each on the event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[StreamReport]]] = {}

    def expect(self) -> tuple[int, asyncio.Future[StreamReport]]:
        """A new request number and the future its report will complete (registered before the request is sent)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[StreamReport] = loop.create_future()
        with self._lock:
            key = next(self._ids)
            self._waiting[key] = (loop, future)
        return key, future

    def forget(self, key: int) -> None:
        with self._lock:
            self._waiting.pop(key, None)

    def deliver(self, report: StreamReport) -> None:
        """``on_report``: the one report of a stream; reports of no waiting request (late ones) are dropped."""
        key = report.attributes.get(names.PROBE_REQUEST_ATTRIBUTE)
        if type(key) is not int:
            return
        with self._lock:
            found = self._waiting.pop(key, None)
        if found is None:
            return
        loop, future = found
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, future, report)


def _settle(future: asyncio.Future[StreamReport], report: StreamReport) -> None:
    if not future.done():
        future.set_result(report)


class Session:
    """Instrumented for the probe from ``start()`` to ``close()``; ``/metrics`` served when ``serve`` is given.
    ``surfaces``: one per target (their number bounds the probe_name label's cap)."""

    def __init__(self, surfaces: Sequence[str], serve: int | None = None) -> None:
        self.inbox = Inbox()
        self._surfaces = tuple(surfaces)
        self._serve = serve
        self.registry: Any = None
        self.metrics_url: str | None = None
        self._server: Any = None
        self._providers: list[Any] = []
        self._log_levels: dict[str, int] = {}

    def start(self) -> None:
        from prometheus_client import CollectorRegistry

        from otelstream import instrumentation

        if instrumentation.is_instrumented():
            raise ProbeError("otelstream is already instrumented in this process: the probe instruments on its own "
                             "(do not run it under opentelemetry-instrument or with otelstream.auto)")  # fmt: skip
        settings = config.load()
        if not settings.enabled:
            raise ProbeError("otelstream is disabled (OTELSTREAM_ENABLED=false): the probe sees streams through it")
        self._log_levels = requests.quiet_sdk_loggers()
        asyncio.run(requests.warm_up(self._surfaces))  # before instrumenting: none of it is observed
        missing: list[str] = []
        tracer_provider = tracer_provider_from_env(missing)
        meter_provider = meter_provider_from_env(missing, settings.otel_metrics)
        self._providers = [p for p in (tracer_provider, meter_provider) if p is not None]
        if missing:
            logger.warning("otelstream probe: missing %s", "; ".join(missing))
        # the application's metric attributes stay labels; probe_name joins them, with room for every target's name
        keys = tuple(dict.fromkeys((*settings.metric_attributes, names.PROBE_NAME_ATTRIBUTE)))
        self.registry = CollectorRegistry()
        # A patch point missing from the installed SDK is logged once at install, whichever surface it concerns; the
        # rows say it where it matters instead (their unobserved measures), so the log keeps to errors meanwhile.
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            instrumentation.instrument(
                tracer_provider=tracer_provider, meter_provider=meter_provider, registry=self.registry,
                on_report=self.inbox.deliver, metric_attributes=keys,
                model_label_cap=max(settings.model_label_cap, len(self._surfaces)),
            )  # fmt: skip
        finally:
            logger.setLevel(level)
        if self._serve is not None:
            addr = settings.prometheus_addr
            try:
                self._server = instrumentation.start_metrics_server(self._serve, addr)
            except OSError as exc:
                self.close()
                raise ProbeError(f"cannot serve /metrics on {addr}:{self._serve}: {exc.strerror or exc}") from None
            port = self._server[0].server_port if isinstance(self._server, tuple) else self._serve
            self.metrics_url = f"http://{addr}:{port}/metrics"

    def close(self) -> None:
        from otelstream import instrumentation

        instrumentation.flush(5.0)
        if isinstance(self._server, tuple) and hasattr(self._server[0], "shutdown"):
            self._server[0].shutdown()
            self._server[0].server_close()
        self._server = None
        instrumentation.uninstrument(5.0)
        for provider in self._providers:  # ours: the last spans and metric points go out before the process ends
            try:
                provider.shutdown()
            except Exception as exc:  # an exporter failing at exit is said, never raised
                logger.warning("otelstream probe: exporter shutdown failed: %r", exc)
        self._providers = []
        requests.restore_loggers(self._log_levels)
        self._log_levels = {}
