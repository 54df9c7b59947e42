"""Every message that tells a user to install something names what works today: otelstream is not on the public
package index, so a hint must name a checkout or the wheel a checkout builds, with the extra. Each message is made
the way a user meets it (the demo's refusal, the probe's, ``otelstream.auto``'s warning, the instrumentor's)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from typing import Any

import pytest

from otelstream import names, otel_env
from otelstream.probe import requests
from otelstream.probe.config import ProbeError, Target
from tests.support.paths import REPO

_COMMAND = re.compile(r"pip install([^\n&;,()]*)")


def _from_the_index(text: str) -> bool:
    """A ``pip install`` whose arguments name otelstream by its bare name (``'otelstream[x]'``, ``otelstream``),
    which the package index would resolve, rather than a checkout's path or a wheel file."""
    for command in _COMMAND.finditer(text):
        for word in command.group(1).split():
            word = word.strip("'\"`")
            if word == "otelstream" or word.startswith("otelstream["):
                return True
    return False


def _names_what_works(text: str, extra: str) -> None:
    assert not _from_the_index(text), text
    assert f"pip install '/path/to/otelstream[{extra}]'" in text, text
    assert re.search(rf"pip install 'dist/otelstream-[\w.]+-py3-none-any\.whl\[{re.escape(extra)}\]'", text), text


def test_the_pattern_tells_index_hints_from_checkout_and_wheel_ones() -> None:
    assert _from_the_index("run: pip install 'otelstream[demo]'")
    assert _from_the_index('sh -c "pip install -q \'otelstream[openai]\' && exec otelstream probe"')
    assert _from_the_index("pip install opentelemetry-distro otelstream")
    assert not _from_the_index("pip install '/path/to/otelstream[demo]'")
    assert not _from_the_index("pip install 'dist/otelstream-0.1.0-py3-none-any.whl[demo]'")
    assert not _from_the_index("pip install opentelemetry-distro, then otelstream")
    assert not _from_the_index("pip install -e '.[demo]' && otelstream demo")


def test_no_source_or_doc_sends_users_to_the_index() -> None:
    """The package, docs/ and the README but for its one sentence about a future release."""
    found = []
    for path in [*sorted((REPO / "otelstream").rglob("*.py")), *sorted((REPO / "docs").glob("*.md")),
                 REPO / "README.md"]:  # fmt: skip
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _from_the_index(line) and not line.startswith("Once a release is published"):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert not found, "\n".join(found)


def test_the_probe_names_the_extra_for_a_missing_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def without_anthropic(name: str, *args: Any) -> Any:
        if name == "anthropic":
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_anthropic)
    with pytest.raises(ProbeError) as raised:
        requests.require_sdk(Target("t", "http://127.0.0.1:1", names.MESSAGES, "m"))
    assert "needs the anthropic SDK" in str(raised.value)
    _names_what_works(str(raised.value), "anthropic")


def test_the_probe_names_the_extra_for_websocket_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.setattr(requests, "_has_websocket_mode", lambda: False)
    with pytest.raises(ProbeError) as raised:
        requests.require_sdk(Target("t", "ws://127.0.0.1:1", names.RESPONSES_WEBSOCKET, "m"))
    _names_what_works(str(raised.value), "openai")


@pytest.mark.parametrize(("exporter", "package", "extra"), [
    ("otlp_proto_http", "opentelemetry-exporter-otlp-proto-http", "otlp"),
    ("otlp_proto_grpc", "opentelemetry-exporter-otlp-proto-grpc", "otlp-grpc"),
    ("prometheus", "opentelemetry-exporter-prometheus", "prometheus-otel"),
])  # fmt: skip
def test_a_missing_exporter_names_its_package_and_extra(
    exporter: str, package: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``otelstream.auto`` logs when ``OTEL_*`` asks for an exporter whose package is not installed."""
    monkeypatch.setattr(metadata, "entry_points", lambda **_: [])
    missing: list[str] = []
    assert otel_env._load_exporters([exporter], "opentelemetry_traces_exporter", "trace", missing) == []
    assert len(missing) == 1 and missing[0].startswith(package), missing
    _names_what_works(missing[0], extra)


def test_an_exporter_without_an_extra_is_named_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "entry_points", lambda **_: [])
    missing: list[str] = []
    otel_env._load_exporters(["zipkin", "acme"], "opentelemetry_traces_exporter", "trace", missing)
    assert missing == ["opentelemetry-exporter-zipkin", "the package providing the 'acme' trace exporter"]


_NO_PROVIDER = textwrap.dedent(
    """
    import logging, sys
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from otelstream import OtelStreamInstrumentor
    OtelStreamInstrumentor().instrument()
    """
)


def test_the_instrumentor_without_a_tracer_provider_names_the_extra() -> None:
    out = subprocess.run([sys.executable, "-c", _NO_PROVIDER], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                              "OTELSTREAM_PROMETHEUS_METRICS": "false", "OTELSTREAM_SELF_CHECK": "false"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "no OpenTelemetry SDK TracerProvider" in out.stderr and "opentelemetry-distro" in out.stderr
    _names_what_works(out.stderr, "otlp")
