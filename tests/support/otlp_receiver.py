"""A local OTLP receiver, as a Collector would be: OTLP/HTTP on one port (``/v1/traces``, ``/v1/metrics``,
protobuf) and, when grpcio is installed, OTLP/gRPC on another. It decodes what arrives and keeps the span names, the
metric names and data points, and the resources' ``service.name``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class Received:
    """What the receiver decoded so far (appended from the receiver's threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[Any] = []
        self.metrics: list[Any] = []  # opentelemetry.proto Metric messages, as they arrived
        self.service_names: set[str] = set()

    @property
    def metric_names(self) -> set[str]:
        with self.lock:
            return {m.name for m in self.metrics}

    def add_traces(self, request: Any) -> None:
        with self.lock:
            for rs in request.resource_spans:
                self.service_names.update(_service_names(rs.resource))
                for ss in rs.scope_spans:
                    self.spans.extend(ss.spans)

    def add_metrics(self, request: Any) -> None:
        with self.lock:
            for rm in request.resource_metrics:
                self.service_names.update(_service_names(rm.resource))
                for sm in rm.scope_metrics:
                    self.metrics.extend(sm.metrics)

    def wait_for_metric(self, name: str, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if name in self.metric_names:
                return True
            time.sleep(0.05)
        return name in self.metric_names


def _service_names(resource: Any) -> set[str]:
    return {a.value.string_value for a in resource.attributes if a.key == "service.name"}


def _protos() -> tuple[Any, Any]:
    trace_pb2 = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    metrics_pb2 = pytest.importorskip("opentelemetry.proto.collector.metrics.v1.metrics_service_pb2")
    return trace_pb2, metrics_pb2


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    received: Received


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        trace_pb2, metrics_pb2 = _protos()
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/v1/traces":
            self.server.received.add_traces(trace_pb2.ExportTraceServiceRequest.FromString(body))
        elif self.path == "/v1/metrics":
            self.server.received.add_metrics(metrics_pb2.ExportMetricsServiceRequest.FromString(body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()


@contextmanager
def otlp_http() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP receiver: (its base URL for ``OTEL_EXPORTER_OTLP_ENDPOINT``, what it received)."""
    _protos()
    server = _HTTPServer(("127.0.0.1", 0), _Handler)
    server.received = Received()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.received
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def otlp_grpc() -> Iterator[tuple[str, Received]]:
    """An OTLP/gRPC receiver (skips the test when grpcio is missing): (its ``http://host:port``, what it received)."""
    grpc = pytest.importorskip("grpc")
    trace_pb2, metrics_pb2 = _protos()
    from concurrent.futures import ThreadPoolExecutor

    trace_grpc = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc")
    metrics_grpc = pytest.importorskip("opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc")
    received = Received()

    class Traces(trace_grpc.TraceServiceServicer):  # type: ignore[misc,name-defined]
        def Export(self, request: Any, context: Any) -> Any:
            received.add_traces(request)
            return trace_pb2.ExportTraceServiceResponse()

    class Metrics(metrics_grpc.MetricsServiceServicer):  # type: ignore[misc,name-defined]
        def Export(self, request: Any, context: Any) -> Any:
            received.add_metrics(request)
            return metrics_pb2.ExportMetricsServiceResponse()

    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    trace_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.stop(grace=None)
