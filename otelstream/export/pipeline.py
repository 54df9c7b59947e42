"""The export pipeline: the ``StreamListener`` the adapters call, wired to the dispatcher, sinks and watchdog.

Caller's-thread cost per stream: ``stream_started`` (model label lookup, span start, two clock reads, one dict
insert) and ``stream_finished`` (one dict pop, one bounded queue put; the report is not assembled yet). Both are
guarded: an internal error is recorded and the caller's stream goes on.

Two export threads, so that metrics never wait on spans: the first assembles each ended stream's report (unless
``report_of`` did already) and records it into the metric sinks, then hands the span's end to the second (one more
bounded put), which runs the span processors and so possibly a collector that never answers. A hung span export
fills only the span queue: those spans are dropped and counted in ``otelstream_reports_dropped_total``, while every
stream is still counted and the error-ratio alerts keep working.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider
from prometheus_client import CollectorRegistry

from otelstream import _guard
from otelstream.config import Settings
from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.sanitize import clean_attributes, clean_text
from otelstream.core.stream_listener import Ended
from otelstream.export import prometheus as prom
from otelstream.export import self_check_gauge
from otelstream.export.dispatcher import Dispatcher
from otelstream.export.genai_peers import peer_records_metrics
from otelstream.export.handle import ConnectionHandle, StreamHandle, Tracked
from otelstream.export.labels import finished
from otelstream.export.metric_sinks import MetricSinks, default_registry
from otelstream.export.points import Measures
from otelstream.export.reports import ReportCallback
from otelstream.export.spans import SpanSink
from otelstream.export.watchdog import Counts, LiveStreams, Watchdog
from otelstream.names import EndReason

logger = logging.getLogger("otelstream")


class _Ended:
    """Metrics thread: a stream that ended; its report is assembled there (unless ``report_of`` asked first)."""

    __slots__ = ("ended", "handle")

    def __init__(self, ended: Ended, handle: StreamHandle) -> None:
        self.ended = ended
        self.handle = handle


class _SpanEnd:
    """Span thread: end a stream's span from its report."""

    __slots__ = ("handle", "report")

    def __init__(self, report: StreamReport, handle: StreamHandle) -> None:
        self.report = report
        self.handle = handle


class _Orphan:
    """Span thread: end the span of a stream whose report never came (its tracker vanished) as abandoned."""

    __slots__ = ("handle",)

    def __init__(self, handle: StreamHandle) -> None:
        self.handle = handle


class _ConnClosed:
    """Span thread: end a WebSocket connection's span."""

    __slots__ = ("end_ns", "error_type", "handle")

    def __init__(self, handle: ConnectionHandle, error_type: str | None, end_ns: int) -> None:
        self.handle = handle
        self.error_type = error_type
        self.end_ns = end_ns


_SpanItem = _SpanEnd | _Orphan | _ConnClosed
# What a failed stream_started/activate returns: adapters pass it back, every method ignores it.
_NO_HANDLE: object = None
_HANDLES = (StreamHandle, ConnectionHandle)
_DROP_WARNING_EVERY_S = 60.0  # one warning per minute at most: a full queue must not also flood the logs


class Pipeline:
    """Implements ``otelstream.core.stream_listener.StreamListener``."""

    def __init__(
        self,
        settings: Settings,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry if registry is not None else default_registry()
        self.live = LiveStreams(settings.stall_threshold_s)
        self.spans = SpanSink(tracer_provider, span_events=settings.span_events, semconv=settings.semconv)
        self.semconv = settings.semconv  # which conventions' gen_ai.client.* metrics (read once, here)
        sinks = MetricSinks(settings, self.registry, meter_provider, self.live)
        self.prometheus, self.otel, self.labels, self.schema = sinks.prometheus, sinks.otel, sinks.labels, sinks.schema
        self.reports = ReportCallback(settings.on_report, settings.queue_size) if settings.on_report else None
        # the runtime self-check's gauge is shown wherever this pipeline records
        self_check_gauge.attach(
            self.registry if self.prometheus is not None else None, meter_provider, self.otel is not None
        )

        # the provider's force_flush runs on the span thread: it can block on a hung exporter itself (the SDK's
        # BatchSpanProcessor exports on the flushing thread, under the lock its stuck worker holds)
        self.span_dispatcher: Dispatcher[_SpanItem] = Dispatcher(
            self._handle_span, settings.queue_size, name="otelstream-spans", on_flush=self._flush_provider
        )
        self.dispatcher: Dispatcher[_Ended] = Dispatcher(
            self._handle, settings.queue_size, downstream=self.span_dispatcher
        )
        multiprocess_gauges = self.prometheus is not None and self.prometheus.families.multiprocess
        self.watchdog = Watchdog(
            self.live,
            interval_s=settings.watchdog_interval_s,
            abandon_after_s=settings.abandon_after_s,
            on_stall=self._on_stall,
            on_idle=self._on_idle,
            on_orphan=self._on_orphan,
            on_tick=self._on_tick if multiprocess_gauges else None,
        )
        self._shut = False
        self._abandon_after_s = settings.abandon_after_s
        self._interval_s = max(0.01, settings.watchdog_interval_s)
        self._last_drop_warning = -_DROP_WARNING_EVERY_S

    # --- StreamListener: caller's thread -------------------------------------------------------------------
    # Per stream, each guarded by a plain try: ``_guard.guarded``'s wrapper adds a frame and argument packing.
    def stream_started(self, start: StreamStart, tracker: Tracked, parent: object | None = None) -> object:
        try:
            labels = self.labels.at_start(start, self.schema.attribute_keys)
            handle = self.spans.start(start, tracker, labels, parent)
            if not self._shut:
                self.live.add(handle)
                self.watchdog.ensure_started()
            return handle
        except Exception as exc:
            _guard.report("export.stream_started", exc)
            return _NO_HANDLE

    def activate(self, handle: object) -> object:
        try:
            if not isinstance(handle, _HANDLES):
                return None
            return otel_context.attach(trace.set_span_in_context(handle.span))
        except Exception as exc:
            _guard.report("export.activate", exc)
            return _NO_HANDLE

    def deactivate(self, token: object) -> None:
        try:
            if token is not None:
                otel_context.detach(token)  # type: ignore[arg-type]
        except Exception as exc:
            _guard.report("export.deactivate", exc)

    def stream_finished(self, ended: Ended, handle: object) -> None:
        try:
            if not isinstance(handle, StreamHandle) or handle.finished or handle.inherited:
                # exactly one report per stream: a second call (or a foreign handle) is ignored; so is, in a forked
                # child, a stream of the parent's (the parent reports it)
                return
            handle.finished = True
            # queue first, then leave the live set: a retired pipeline shuts down once the live set is empty, and
            # its shutdown drains the queue, so the report must already be in it
            queued = self.dispatcher.submit(_Ended(ended, handle))
            self.live.discard(handle)
            if not queued:
                self._count_drop(handle)
        except Exception as exc:
            _guard.report("export.stream_finished", exc)

    @_guard.guarded("export.connection_opened", _NO_HANDLE)
    def connection_opened(self, server_address: str | None, server_port: int | None) -> object:
        return self.spans.connection_opened(server_address, server_port)

    @_guard.guarded("export.connection_event", None)
    def connection_event(self, handle: object, name: str, attributes: dict[str, str | int | float | bool]) -> None:
        if isinstance(handle, ConnectionHandle) and not handle.closed and not handle.inherited:
            attrs = dict(attributes)
            clean_attributes(attrs)
            handle.span.add_event(clean_text(name), attrs)

    @_guard.guarded("export.connection_closed", None)
    def connection_closed(self, handle: object, error_type: str | None) -> None:
        if not isinstance(handle, ConnectionHandle) or handle.closed or handle.inherited:
            return  # a forked child's copy of the parent's connection is the parent's to close
        handle.closed = True
        # Ending a span runs its processors (maybe a blocking exporter): that belongs on the span thread.
        self.span_dispatcher.submit(_ConnClosed(handle, error_type, time.time_ns()))

    # --- control ---------------------------------------------------------------------------------------------
    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every report finished so far is recorded (and spans handed to their exporters); returns
        within ``timeout`` overall."""
        return self.flush_until(time.monotonic() + max(0.0, timeout))

    def flush_until(self, deadline: float) -> bool:
        metrics = self.flush_metrics(deadline)
        return self.flush_spans(deadline) and metrics

    def flush_metrics(self, deadline: float) -> bool:
        """Every report finished so far recorded by the metric sinks (its span end handed to the span thread)."""
        # first the watchdog's hand-over in progress, if any: that stream is finished, its report not yet queued
        handed = self.watchdog.handed_over(deadline)
        return self.dispatcher.flush_until(deadline, downstream=False) and handed

    def flush_spans(self, deadline: float) -> bool:
        """Every span end handed over so far run, then the tracer provider flushed (on the span thread)."""
        return self.span_dispatcher.flush_until(deadline)

    def retire(self, timeout: float = 5.0) -> None:
        """``uninstrument()``: streams already started under this pipeline keep reporting to it. Shut down now when
        none is open, else from a daemon thread once the last one ends (its report, or the watchdog's idle fallback,
        which bounds the wait by ``abandon_after_s``)."""
        self.retire_until(time.monotonic() + max(0.0, timeout))

    def retire_until(self, deadline: float) -> None:
        if not len(self.live):
            self.shutdown_until(deadline)  # drains both queues first
            return
        self.flush_until(deadline)
        reap_deadline = time.monotonic() + self._abandon_after_s + 3 * self._interval_s

        def reap() -> None:  # off the caller's thread: its own default bound
            while len(self.live) and time.monotonic() < reap_deadline and not self._shut:
                time.sleep(min(self._interval_s, 0.1))
            self.shutdown()

        threading.Thread(target=reap, name="otelstream-retire", daemon=True).start()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Drain the queues, stop the threads, detach from shared gauges; within ``timeout`` overall. Idempotent."""
        self.shutdown_until(time.monotonic() + max(0.0, timeout))

    def shutdown_until(self, deadline: float) -> None:
        if self._shut:
            return
        self._shut = True
        self.watchdog.stop(min(1.0, _left(deadline)))
        self.dispatcher.shutdown_until(deadline)  # and the span dispatcher after it
        if self.reports is not None:
            self.reports.shutdown_until(deadline)
        self.live.clear()
        self.watchdog.tick()  # multiprocess: this live process's livesum gauges back to 0 (a no-op otherwise)
        for sink in (self.prometheus, self.otel):
            if sink is not None:
                sink.close()

    def start_metrics_server(self, port: int, addr: str = "127.0.0.1", **tls_kwargs: Any) -> Any:
        return prom.start_metrics_server(port, addr, registry=self.registry, **tls_kwargs)

    # --- export thread ---------------------------------------------------------------------------------------
    def _handle(self, item: _Ended) -> None:
        """Metrics thread: the report (assembled here unless report_of did), the metric sinks, then the span end to
        the span thread (never waited for)."""
        handle = item.handle
        report: StreamReport | None = None
        with _guard.guard("export.report"):
            report = item.ended.final_report()
        if report is None:  # its assembly failed (recorded): the span still ends, as a stream without a report's
            self.span_dispatcher.submit(_Orphan(handle))
            return
        # Each sink guarded on its own: a failing span exporter must not cost the metrics, nor the reverse.
        if self.prometheus is not None or self.otel is not None:
            common = handle.labels[:-1]
            with _guard.guard("export.labels"):
                common = finished(handle.labels, self.labels.response_model_value(report.response_model))
            measures = None
            with _guard.guard("export.measures"):
                measures = Measures(report, handle.labels[-1], self.semconv)  # once, for every metric sink
            if measures is not None and self.prometheus is not None:
                # otelstream's own registry, which no other instrumentation writes: every series, always
                with _guard.guard("export.prometheus"):
                    self.prometheus.record(measures, handle, common)
            if measures is not None and self.otel is not None:
                with _guard.guard("export.otel_metrics"):
                    # Under a GenAI peer's CLIENT span the peer records the call's gen_ai.client.* metrics through
                    # the MeterProvider the two share: not twice there.
                    shared = measures.own_only() if peer_records_metrics(handle.peer_scope) else measures
                    self.otel.record(shared, handle, common)
        if self.reports is not None:
            self.reports.submit(report)  # the application's callback, on its own thread: it cannot stall these
        if not handle.span.is_recording():
            return  # nothing to end (no tracer, not sampled): no second hop
        if not self.span_dispatcher.submit(_SpanEnd(report, handle)):
            self._count_drop(handle, "span export queue full: dropping spans (metrics are still recorded)")

    def _handle_span(self, item: _SpanItem) -> None:
        """Span thread: ending a span runs its processors, which may block for as long as the exporter does."""
        if type(item) is _SpanEnd:
            with _guard.guard("export.spans"):
                self.spans.finish(item.report, item.handle)
        elif type(item) is _Orphan:
            self.spans.finish_orphan(item.handle)
        elif type(item) is _ConnClosed:
            self.spans.connection_closed(item.handle, item.error_type, item.end_ns)

    def _flush_provider(self, deadline: float) -> bool:
        provider = self.spans.provider if self.spans.provider is not None else trace.get_tracer_provider()
        return _force_flush(provider, deadline)

    def _count_drop(self, handle: StreamHandle, what: str = "export queue full: dropping stream telemetry") -> None:
        now = time.monotonic()
        if now - self._last_drop_warning >= _DROP_WARNING_EVERY_S:  # caller's and metrics thread: at worst twice
            self._last_drop_warning = now
            logger.warning(
                "otelstream: %s (counted in otelstream_reports_dropped_total; raise OTELSTREAM_QUEUE_SIZE or check "
                "that the exporters keep up)",
                what,
            )
        common = handle.labels[:-1]
        if self.prometheus is not None:
            self.prometheus.count_drop(common)
        if self.otel is not None:
            self.otel.count_drop(common)

    # --- watchdog thread -------------------------------------------------------------------------------------
    def _on_stall(self, handle: StreamHandle, t_pull_ns: int, now_ns: int) -> None:
        self.spans.stall_began(handle, t_pull_ns, now_ns, self.live.stall_threshold_ns)

    def _on_idle(self, tracker: Tracked, handle: StreamHandle) -> None:
        # False: the stream ended on its own meanwhile; its report is on its way
        if tracker.conclude(EndReason.IDLE):
            self.stream_finished(tracker, handle)  # assembled on the metrics thread, as any other

    def _on_orphan(self, handle: StreamHandle) -> None:
        if not handle.finished:
            handle.finished = True
            self.span_dispatcher.submit(_Orphan(handle))

    def _on_tick(self, active: Counts, stalled: Counts) -> None:
        if self.prometheus is not None:
            self.prometheus.set_gauges(active, stalled)


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _force_flush(provider: Any, deadline: float) -> bool:
    flush = getattr(provider, "force_flush", None)
    if flush is None:
        return True
    remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
    try:
        return bool(flush(remaining_ms))
    except Exception as exc:  # a provider's flush failing is not the caller's problem
        logger.debug("otelstream: tracer provider force_flush failed: %r", exc)
        return False


def build_pipeline(
    settings: Settings,
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    registry: CollectorRegistry | None = None,
) -> Pipeline:
    return Pipeline(settings, tracer_provider=tracer_provider, meter_provider=meter_provider, registry=registry)
