"""instrument()/uninstrument(): idempotent, exactly undone (identity), import-order independent; the instrumentor."""

from __future__ import annotations

import subprocess
import sys

import anthropic._streaming
import openai._base_client
import openai._streaming
import pytest
import wrapt

import otelstream
from otelstream.adapters import PATCHER
from tests.support.sdk_features import OPENAI_HTTP


def _originals() -> dict[str, object]:
    return {
        "openai.Stream.__stream__": openai._streaming.Stream.__dict__["__stream__"],
        "openai.request": openai._base_client.SyncAPIClient.__dict__["request"],
        "anthropic.Stream.__init__": anthropic._streaming.Stream.__dict__["__init__"],
    }


def test_instrument_uninstrument_identity_and_one_layer() -> None:
    before = _originals()
    otelstream.instrument(registry=_registry())
    otelstream.instrument()  # idempotent
    applied = PATCHER.applied()
    assert applied and all(isinstance(h, wrapt.FunctionWrapper) for h in applied.values())
    patched = _originals()
    assert all(isinstance(v, wrapt.FunctionWrapper) for v in patched.values())
    otelstream.uninstrument()
    assert _originals() == before  # exact undo: the original function objects
    otelstream.instrument(registry=_registry())
    again = openai._streaming.Stream.__dict__["__stream__"]
    assert isinstance(again, wrapt.FunctionWrapper) and again.__wrapped__ is before["openai.Stream.__stream__"]
    otelstream.uninstrument()
    assert _originals() == before


def test_disabled_is_a_no_op() -> None:
    otelstream.instrument(enabled=False)
    assert not PATCHER.applied()


def _registry() -> object:
    from prometheus_client import CollectorRegistry

    return CollectorRegistry()


SCRIPT = r"""
import otelstream, sys
from prometheus_client import CollectorRegistry
otelstream.instrument(registry=CollectorRegistry())   # before the SDK is imported
assert "openai" not in sys.modules
import openai._streaming, wrapt
assert isinstance(openai._streaming.Stream.__dict__["__stream__"], wrapt.FunctionWrapper)
otelstream.uninstrument()
assert not isinstance(openai._streaming.Stream.__dict__["__stream__"], wrapt.FunctionWrapper)
print("ok")
"""


def test_instrument_before_sdk_import() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_instrumentor_any_of_dependencies() -> None:
    inst = otelstream.OtelStreamInstrumentor()
    deps = inst.instrumentation_dependencies()
    assert len(deps) == 1 and deps[0].split()[0] in ("openai", "anthropic")
    inst.instrument(registry=_registry())
    try:
        assert PATCHER.applied()
    finally:
        inst.uninstrument()
    assert not PATCHER.applied()


def test_instrumentor_and_the_functions_share_one_state() -> None:
    """The instrumentor and otelstream.instrument()/uninstrument() may be mixed (opentelemetry-instrument, then the
    application's own calls): each sees what the other did."""
    inst = otelstream.OtelStreamInstrumentor()
    inst.instrument(registry=_registry())
    otelstream.uninstrument()
    inst.instrument(registry=_registry())  # not "already instrumented": it was undone
    assert PATCHER.applied()
    otelstream.uninstrument()
    otelstream.instrument(registry=_registry())
    inst.uninstrument()  # undoes what instrument() did
    assert not PATCHER.applied() and not inst.is_instrumented_by_opentelemetry


def test_a_duration_argument_that_is_not_a_finite_number_is_refused_before_anything_is_patched() -> None:
    for bad in ({"abandon_after_s": float("inf")}, {"stall_threshold_s": -1.0}, {"watchdog_interval_s": 0},
                {"stall_threshold_s": "30"}):  # fmt: skip
        with pytest.raises(ValueError, match="finite number of seconds"):
            otelstream.instrument(registry=_registry(), **bad)  # type: ignore[arg-type]
        assert not PATCHER.applied()


FIRST_STREAM_OPEN_AT_EXIT = f"import {OPENAI_HTTP.__name__} as http\n" + """
import json, openai, otelstream
from prometheus_client import CollectorRegistry

chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
         "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
body = b"data: " + json.dumps(chunk).encode() + b"\\n\\n"
otelstream.instrument(registry=CollectorRegistry())
client = openai.OpenAI(api_key="k", base_url="http://mock.test/v1", http_client=http.Client(
    transport=http.MockTransport(lambda request: http.Response(200, content=body * 3,
                                                               headers={"content-type": "text/event-stream"}))))
stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
next(iter(stream))  # the process's first stream, still open at exit: its report comes while the interpreter exits
print("done", flush=True)
"""


def test_a_stream_still_open_at_exit_does_not_hang_the_exit() -> None:
    """CPython 3.11 does not refuse a thread started while the interpreter exits: it hangs. The export thread of a
    process whose first report comes only then must not be started."""
    out = subprocess.run([sys.executable, "-c", FIRST_STREAM_OPEN_AT_EXIT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr


def test_instrument_cycles_leave_no_exit_or_fork_hooks_behind() -> None:
    """Exit and fork hooks cannot be unregistered: they are registered once per process, not per pipeline (each
    instrument()/uninstrument() cycle used to leave three behind, ≈1 KB)."""
    import threading

    def cycle() -> None:
        otelstream.instrument(registry=_registry())
        otelstream.uninstrument()

    cycle()
    before = len(getattr(threading, "_threading_atexits", []))
    for _ in range(5):
        cycle()
    assert len(getattr(threading, "_threading_atexits", [])) == before
