"""The zero-code launcher platform teams use: ``opentelemetry-instrument`` with ``opentelemetry-distro`` and OTLP
over HTTP, with the environment the README gives, to a local receiver that decodes the protobuf. otelstream's spans
and its OTel instruments arrive (they once did not: only spans, and only with OTELSTREAM_OTEL_METRICS=true); with
OTELSTREAM_PROMETHEUS_PORT set, /metrics is served (it once was ignored there)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from otelstream.demo.provider import FakeProvider, serve
from tests.support.paths import REPO

pytest.importorskip("opentelemetry.distro")
trace_pb2 = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
metrics_pb2 = pytest.importorskip("opentelemetry.proto.collector.metrics.v1.metrics_service_pb2")

APP = textwrap.dedent(
    """
    import os, sys, urllib.request
    import openai
    import otelstream

    client = openai.OpenAI(base_url=os.environ["PROVIDER_URL"], api_key="sk-test", max_retries=0)
    for _ in range(2):
        for _ in client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}],
                                                stream=True):
            pass
    otelstream.flush()
    port = os.environ.get("OTELSTREAM_PROMETHEUS_PORT")
    if port:
        print(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode())
    """
)


class _Receiver(ThreadingHTTPServer):
    daemon_threads = True
    spans: list[Any]
    metric_names: set[str]
    service_names: set[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/v1/traces":
            req = trace_pb2.ExportTraceServiceRequest.FromString(body)
            for rs in req.resource_spans:
                self.server.service_names.update(
                    a.value.string_value for a in rs.resource.attributes if a.key == "service.name"
                )
                for ss in rs.scope_spans:
                    self.server.spans.extend(ss.spans)
        elif self.path == "/v1/metrics":
            req = metrics_pb2.ExportMetricsServiceRequest.FromString(body)
            for rm in req.resource_metrics:
                for sm in rm.scope_metrics:
                    self.server.metric_names.update(m.name for m in sm.metrics)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver(("127.0.0.1", 0), _Handler)
    server.spans, server.metric_names, server.service_names = [], set(), set()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    with serve(seed=3) as p:
        yield p


def _launch(tmp_path: Path, receiver: _Receiver, provider: FakeProvider, **extra: str) -> str:
    launcher = Path(sys.executable).parent / "opentelemetry-instrument"
    if not launcher.exists() and shutil.which("opentelemetry-instrument") is None:
        pytest.skip("opentelemetry-instrument is not installed")
    (tmp_path / "app.py").write_text(APP)
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        # the README's environment, exactly
        "OTEL_SERVICE_NAME": "checkout",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_address[1]}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "PROVIDER_URL": provider.openai_base_url,
        **extra,
    }
    out = subprocess.run([str(launcher), sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_spans_and_otel_instruments_arrive_over_otlp(
    tmp_path: Path, receiver: _Receiver, provider: FakeProvider
) -> None:
    _launch(tmp_path, receiver, provider)
    streams = [s for s in receiver.spans if s.name == "chat gpt-4o"]
    assert len(streams) == 2, [s.name for s in receiver.spans]
    assert receiver.service_names == {"checkout"}
    assert {"otelstream.streams", "gen_ai.client.operation.time_to_first_chunk"} <= receiver.metric_names, (
        receiver.metric_names
    )


def test_the_prometheus_port_is_served_under_the_launcher(
    tmp_path: Path, receiver: _Receiver, provider: FakeProvider
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    text = _launch(tmp_path, receiver, provider, OTELSTREAM_PROMETHEUS_PORT=str(port))
    assert 'otelstream_streams_total{' in text and "gen_ai_client_operation_time_to_first_chunk_seconds_bucket" in text


NO_PROVIDER = textwrap.dedent(
    """
    import logging, sys
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from otelstream import OtelStreamInstrumentor
    inst = OtelStreamInstrumentor()
    for _ in range(2):
        inst.instrument()
        inst.uninstrument()
    """
)


def test_no_sdk_tracer_provider_is_said_once_with_what_to_set() -> None:
    """Without opentelemetry-distro nothing exported the spans, and nothing said so."""
    out = subprocess.run([sys.executable, "-c", NO_PROVIDER], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                              "OTELSTREAM_PROMETHEUS_METRICS": "false"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("no OpenTelemetry SDK TracerProvider") == 1, out.stderr
    assert "opentelemetry-distro" in out.stderr and "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf" in out.stderr
