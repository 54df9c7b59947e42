"""The zero-code launcher platform teams use: ``opentelemetry-instrument`` with ``opentelemetry-distro``, over OTLP/HTTP
with the environment the README gives and over the distro's default protocol (gRPC, ``otelstream[otlp-grpc]``), to a
local receiver that decodes the protobuf. otelstream's spans
and its OTel instruments arrive (they once did not: only spans, and only with OTELSTREAM_OTEL_METRICS=true); with
OTELSTREAM_PROMETHEUS_PORT set, /metrics is served (it once was ignored there)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from otelstream.demo.provider import FakeProvider, serve
from tests.support.otlp_receiver import Received, otlp_grpc, otlp_http
from tests.support.paths import REPO

pytest.importorskip("opentelemetry.distro")

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


@pytest.fixture
def receiver() -> Iterator[Received]:
    with otlp_http() as (endpoint, received):
        received.endpoint = endpoint  # type: ignore[attr-defined]
        yield received


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    with serve(seed=3) as p:
        yield p


def _launch(tmp_path: Path, receiver: Received, provider: FakeProvider, **extra: str | None) -> str:
    launcher = Path(sys.executable).parent / "opentelemetry-instrument"
    if not launcher.exists() and shutil.which("opentelemetry-instrument") is None:
        pytest.skip("opentelemetry-instrument is not installed")
    (tmp_path / "app.py").write_text(APP)
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        # the README's environment, exactly
        "OTEL_SERVICE_NAME": "checkout",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,  # type: ignore[attr-defined]
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "PROVIDER_URL": provider.openai_base_url,
        **extra,
    }
    env = {k: v for k, v in env.items() if v is not None}  # None: leave the variable unset
    out = subprocess.run([str(launcher), sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_spans_and_otel_instruments_arrive_over_otlp(
    tmp_path: Path, receiver: Received, provider: FakeProvider
) -> None:
    _launch(tmp_path, receiver, provider)
    streams = [s for s in receiver.spans if s.name == "chat gpt-4o"]
    assert len(streams) == 2, [s.name for s in receiver.spans]
    assert receiver.service_names == {"checkout"}
    assert {"otelstream.streams", "gen_ai.client.operation.time_to_first_chunk"} <= receiver.metric_names, (
        receiver.metric_names
    )


def test_the_prometheus_port_is_served_under_the_launcher(
    tmp_path: Path, receiver: Received, provider: FakeProvider
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    text = _launch(tmp_path, receiver, provider, OTELSTREAM_PROMETHEUS_PORT=str(port))
    assert 'otelstream_streams_total{' in text and "gen_ai_client_operation_time_to_first_chunk_seconds_bucket" in text


def test_the_distro_default_protocol_works_with_the_grpc_extra(tmp_path: Path, provider: FakeProvider) -> None:
    """Without OTEL_EXPORTER_OTLP_PROTOCOL the distro picks gRPC; with only [otlp] installed the launcher's own
    configuration failed and nothing at all was on. The README names the extra that makes its default work."""
    import socket

    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc", reason="otelstream[otlp-grpc] not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with otlp_grpc() as (endpoint, received):
        received.endpoint = endpoint  # type: ignore[attr-defined]
        text = _launch(tmp_path, received, provider, OTEL_EXPORTER_OTLP_PROTOCOL=None,
                       OTELSTREAM_PROMETHEUS_PORT=str(port))  # fmt: skip
        assert received.wait_for_metric("otelstream.streams"), received.metric_names
    assert len([s for s in received.spans if s.name == "chat gpt-4o"]) == 2
    assert received.service_names == {"checkout"}
    assert "otelstream_streams_total{" in text


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
