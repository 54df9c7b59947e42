"""import otelstream.auto never raises, instruments what is installed, warns once about what is missing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.sdk_features import OPENAI_HTTP, release_warning

SCRIPT = r"""
import logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
import otelstream.auto
from otelstream.adapters import PATCHER
from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor
import openai
print("patched" if PATCHER.applied() else "unpatched", HTTPX2ClientInstrumentor().is_instrumented_by_opentelemetry,
      HTTPXClientInstrumentor().is_instrumented_by_opentelemetry)
"""


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "OTELSTREAM_PROMETHEUS_METRICS": "false"}
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60,
                          env={**base, **env})  # fmt: skip


def test_auto_instruments_and_turns_on_http_spans() -> None:
    """HTTP spans from the library each installed SDK sends with: httpx2, and httpx too under openai 2.x."""
    out = _run({})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["patched", "True", str(OPENAI_HTTP.__name__ == "httpx")]


def test_auto_http_spans_off_and_kill_switch() -> None:
    assert _run({"OTELSTREAM_HTTP_SPANS": "false"}).stdout.split() == ["patched", "False", "False"]
    assert _run({"OTELSTREAM_ENABLED": "false"}).stdout.split() == ["unpatched", "False", "False"]


def test_auto_missing_exporter_warns_once_never_raises() -> None:
    out = _run({"OTEL_TRACES_EXPORTER": "zipkin"})
    assert out.returncode == 0
    assert out.stdout.split()[0] == "patched"
    assert out.stderr.count("otelstream.auto: missing") == 1 and "zipkin" in out.stderr


def test_auto_bad_setting_never_raises() -> None:
    out = _run({"OTELSTREAM_STALL_THRESHOLD_S": "banana", "OTELSTREAM_PROMETHEUS_PORT": "notaport"})
    assert out.returncode == 0 and out.stdout.split()[0] == "patched"


def test_an_invalid_setting_warns_exactly_once() -> None:
    """otelstream.auto loads the settings and instrument() loads them again: each once logged the same warning."""
    out = _run({"OTELSTREAM_QUEUE_SIZE": "lots", "OTELSTREAM_SPAN_EVENTS": "maybe"})
    assert out.returncode == 0 and out.stdout.split()[0] == "patched", out.stderr
    assert out.stderr.count("OTELSTREAM_QUEUE_SIZE='lots'") == 1, out.stderr
    assert out.stderr.count("OTELSTREAM_SPAN_EVENTS='maybe'") == 1, out.stderr


def test_auto_non_finite_or_zero_durations_keep_their_defaults() -> None:
    """`inf` once passed the check and overflowed into integer nanoseconds, leaving nothing instrumented; a zero
    watchdog interval would be a busy loop."""
    env = {"OTELSTREAM_ABANDON_AFTER_S": "inf", "OTELSTREAM_STALL_THRESHOLD_S": "-inf",
           "OTELSTREAM_WATCHDOG_INTERVAL_S": "0"}  # fmt: skip
    out = _run(env)
    assert out.returncode == 0 and out.stdout.split()[0] == "patched", out.stderr
    assert all(f"OTELSTREAM_{name}" in out.stderr for name in ("ABANDON_AFTER_S", "STALL_THRESHOLD_S", "WATCHDOG"))


NAMES = r"""
import json, os
from importlib.metadata import entry_points
from otelstream.otel_env import _exporter_names
cases = [{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
         {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
         {"OTEL_TRACES_EXPORTER": "otlp,console", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
          "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
         {"OTEL_TRACES_EXPORTER": "none"}]
grpc = bool(list(entry_points(group="opentelemetry_traces_exporter", name="otlp_proto_grpc")))
print(json.dumps([grpc, [_exporter_names(c) for c in cases]]))
"""


def test_otlp_names_the_exporter_the_protocol_picks() -> None:
    """`otlp` (also implied by an OTLP endpoint alone) is no exporter package: the protocol picks one, as in the OTel
    SDK's own configuration; without a protocol, gRPC when installed, else HTTP (what `otelstream[otlp]` installs)."""
    out = subprocess.run([sys.executable, "-c", NAMES], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "OTELSTREAM_PROMETHEUS_METRICS": "false"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    grpc, names = json.loads(out.stdout)
    assert names == [["otlp_proto_grpc" if grpc else "otlp_proto_http"], ["otlp_proto_http"],
                     ["otlp_proto_grpc", "console"], []]  # fmt: skip


def test_auto_with_only_an_otlp_endpoint_installs_a_provider() -> None:
    out = _run({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    assert out.returncode == 0 and out.stdout.split()[0] == "patched"
    unexpected = [line for line in out.stderr.splitlines() if not release_warning(line)]
    assert "missing" not in "\n".join(unexpected), out.stderr


OTLP_APP = r"""
import os
import otelstream.auto  # first, as the README says
import openai

client = openai.OpenAI(base_url=os.environ["PROVIDER_URL"], api_key="sk-test", max_retries=0)
for _ in client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True):
    pass
# no flush, no shutdown: the provider auto installed exports at exit
"""


def _otlp_run(endpoint: str, provider_url: str, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "OTEL_SERVICE_NAME": "checkout", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "PROVIDER_URL": provider_url, **extra}  # fmt: skip
    return subprocess.run([sys.executable, "-c", OTLP_APP], capture_output=True, text=True, timeout=90, env=env)


@pytest.mark.parametrize(
    "asked", [{"OTELSTREAM_OTEL_METRICS": "true"}, {"OTEL_METRICS_EXPORTER": "otlp"}], ids=["otelstream", "otel"]
)
def test_auto_delivers_metrics_over_otlp(asked: dict[str, str]) -> None:
    """An OTLP-only shop got spans and no metrics, without a word: auto installed no MeterProvider."""
    from otelstream.demo.provider import serve
    from tests.support.otlp_receiver import otlp_http

    with otlp_http() as (endpoint, received), serve(seed=5) as provider:
        out = _otlp_run(endpoint, provider.openai_base_url, asked)
        assert out.returncode == 0, out.stderr
        assert received.wait_for_metric("otelstream.streams"), (received.metric_names, out.stderr)
    assert {"gen_ai.client.operation.duration", "gen_ai.client.operation.time_to_first_chunk"} <= received.metric_names
    streams = next(m for m in received.metrics if m.name == "otelstream.streams")
    points = streams.sum.data_points
    assert sum(p.as_int for p in points) == 1
    attrs = {a.key: a.value.string_value for a in points[0].attributes}
    assert attrs["surface"] == "chat_completions" and attrs["gen_ai.request.model"] == "gpt-4o"
    assert received.service_names == {"checkout"}
    unexpected = [line for line in out.stderr.splitlines() if not release_warning(line)]
    assert [s.name for s in received.spans] and "missing" not in "\n".join(unexpected), out.stderr


def test_auto_sends_no_metrics_unless_asked() -> None:
    """An OTLP endpoint alone asks for spans: metrics stay on /metrics (Prometheus), not pushed."""
    from otelstream.demo.provider import serve
    from tests.support.otlp_receiver import otlp_http

    with otlp_http() as (endpoint, received), serve(seed=5) as provider:
        out = _otlp_run(endpoint, provider.openai_base_url, {})
        assert out.returncode == 0, out.stderr
    assert received.spans and received.metric_names == set()
