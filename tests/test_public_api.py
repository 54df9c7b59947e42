"""The public API, pinned: what ``import otelstream`` exports is what users rely on, so a name added, dropped or
renamed, or a documented argument changed, fails here first."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys

import pytest
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

import otelstream

EXPORTED = {
    "OtelStreamInstrumentor", "StreamReport", "__version__", "attributes", "flush", "instrument", "report_of",
    "start_metrics_server", "uninstrument",
}  # fmt: skip

# the names the design's public API section shows users (otelstream.auto is a module, pinned below)
DOCUMENTED = {
    "instrument", "uninstrument", "flush", "start_metrics_server", "OtelStreamInstrumentor", "attributes",
    "report_of", "StreamReport",
}  # fmt: skip


def test_all_is_exactly_the_public_api() -> None:
    assert sorted(otelstream.__all__) == sorted(EXPORTED)
    assert len(otelstream.__all__) == len(set(otelstream.__all__))


def test_every_documented_name_is_exported() -> None:
    assert set(otelstream.__all__) >= DOCUMENTED


def test_star_import_gives_the_public_api_and_nothing_else() -> None:
    namespace: dict[str, object] = {}
    exec("from otelstream import *", namespace)  # the user's own spelling of the import
    assert set(namespace) - {"__builtins__"} == EXPORTED


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_every_exported_name_resolves_in_a_fresh_interpreter(name: str) -> None:
    # resolved lazily: the first access in a process is what users meet, so each is tried in one of its own
    code = f"import otelstream; value = otelstream.{name}; print(type(value).__name__)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'instrumnet'"):
        otelstream.instrumnet  # type: ignore[attr-defined]  # noqa: B018


def test_the_kinds_of_what_is_exported() -> None:
    assert issubclass(otelstream.OtelStreamInstrumentor, BaseInstrumentor)
    assert inspect.isclass(otelstream.StreamReport)
    for name in ("instrument", "uninstrument", "flush", "start_metrics_server", "attributes", "report_of"):
        assert inspect.isfunction(getattr(otelstream, name)), name
    assert isinstance(otelstream.__version__, str) and otelstream.__version__


def _parameters(name: str) -> list[tuple[str, str, object]]:
    params = inspect.signature(getattr(otelstream, name)).parameters.values()
    return [(p.name, p.kind.name, p.default) for p in params]


EMPTY = inspect.Parameter.empty
SIGNATURES = {
    "instrument": [
        ("tracer_provider", "POSITIONAL_OR_KEYWORD", None),
        ("meter_provider", "POSITIONAL_OR_KEYWORD", None),
        ("registry", "POSITIONAL_OR_KEYWORD", None),
        ("settings", "VAR_KEYWORD", EMPTY),
    ],
    "uninstrument": [("timeout", "POSITIONAL_OR_KEYWORD", 5.0)],
    "flush": [("timeout", "POSITIONAL_OR_KEYWORD", 5.0)],
    "start_metrics_server": [
        ("port", "POSITIONAL_OR_KEYWORD", 9464),
        ("addr", "POSITIONAL_OR_KEYWORD", "127.0.0.1"),
        ("tls", "VAR_KEYWORD", EMPTY),
    ],
    "attributes": [("attrs", "POSITIONAL_ONLY", None), ("more", "VAR_KEYWORD", EMPTY)],
    "report_of": [("stream", "POSITIONAL_OR_KEYWORD", EMPTY)],
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_documented_signatures(name: str) -> None:
    assert _parameters(name) == SIGNATURES[name]


def test_stream_report_carries_the_documented_fields() -> None:
    fields = set(inspect.signature(otelstream.StreamReport).parameters)
    documented = {
        "outcome", "error_type", "error_class", "time_to_first_delta_ns", "max_wait_ns", "wait_ns", "usage",
        "surface", "provider", "attributes", "unobserved",
    }  # fmt: skip
    assert fields >= documented


def test_the_one_import_path_exists() -> None:
    # not imported here: importing it instruments the process
    assert importlib.util.find_spec("otelstream.auto") is not None
