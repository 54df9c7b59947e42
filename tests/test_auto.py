"""import otelstream.auto never raises, instruments what is installed, warns once about what is missing."""

from __future__ import annotations

import json
import subprocess
import sys

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
from otelstream.auto import _exporter_names  # (importing it instruments this throwaway process)
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
