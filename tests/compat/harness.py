"""The compat suite's method: a framework streams a scripted body from 127.0.0.1 twice, once with otelstream off and
once on; what the framework yielded, returned and raised must be the same both times, and the instrumented run must
leave exactly one otelstream span (and one ``otelstream_streams_total`` sample) with the outcome the script makes.

A framework under test is a function ``run(base_url, early_break) -> Seen`` that does what its users do (build the
framework's client on ``base_url``, stream, collect) and hands back plain data (``plain``) without the values that
differ between two identical calls (random run ids, wall-clock stamps: ``volatile``).
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import importlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

import otelstream
from otelstream import names
from tests.support import bodies
from tests.support.scripted_server import Pause, ScriptedServer, Step

SKIP_REASON = "the compat suite needs the pinned frameworks: run `bash .ci/compat.sh` (its own venv)"
REQUIRED = "OTELSTREAM_COMPAT_REQUIRED"  # set by .ci/compat.sh: there a framework that fails to import fails the run
PAUSE_S = 0.4  # the scripted wait before the first delta (the TTFD case)
BREAK_PAUSE_S = 0.2  # after the first delta of the early-break case: the caller stops before the terminal event


def need(module: str) -> Any:
    """The framework module, or skip the test module (the main venv has no frameworks); under ``.ci/compat.sh``
    an import error is an error, not a skip that would leave the framework untested."""
    if os.environ.get(REQUIRED):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"no {module}: {SKIP_REASON}")


# the wire shape a framework speaks -> the canned bodies of that surface
KINDS: dict[str, Callable[[str], list[bytes]]] = {
    names.CHAT_COMPLETIONS: bodies.chat,
    names.MESSAGES: bodies.messages,
    names.RESPONSES: bodies.responses,
}


@dataclass(frozen=True)
class Case:
    name: str
    outcome: str  # what otelstream must report


CASES = [
    Case("complete", names.COMPLETED),
    Case("cut", names.CUT),
    Case("in_band_error", names.ERROR),
    Case("http_500", names.HTTP_ERROR),
    Case("early_break", names.ABANDONED),
    Case("ttfd_pause", names.COMPLETED),
]
CASE_IDS = [c.name for c in CASES]
HTTP_500_BODY = b'{"error": {"message": "boom", "type": "server_error", "code": "server_error"}}'


def script(server: ScriptedServer, surface: str, case: Case) -> str:
    """Register the case's script; returns the base URL that selects it (``ScriptedServer.url_for``)."""
    frames = KINDS[surface]
    steps: list[Step]
    if case.name == "http_500":
        # x-should-retry: false makes the SDKs give up at once (their retries are not what is under test)
        key = server.add([HTTP_500_BODY], status=500,
                         headers={"content-type": "application/json", "x-should-retry": "false"})  # fmt: skip
        return server.url_for(key)
    if case.name == "cut":
        steps = list(frames("cut"))
    elif case.name == "in_band_error":
        steps = list(frames("error"))
    else:
        steps = list(frames("ok"))
        first = next(i for i, f in enumerate(steps) if b'"Hel"' in f)
        if case.name == "early_break":
            steps.insert(first + 1, Pause(BREAK_PAUSE_S))
        elif case.name == "ttfd_pause":
            steps.insert(first, Pause(PAUSE_S))
    return server.url_for(server.add(steps))


@dataclass
class Seen:
    """What the caller saw: the items yielded, the value returned, the exception raised (all as ``plain`` data)."""

    items: list[Any] = dataclasses.field(default_factory=list)
    result: Any = None
    raised: Any = None


def plain(obj: Any, volatile: frozenset[str] = frozenset(), _depth: int = 0) -> Any:
    """``obj`` as comparable plain data: pydantic models and dataclasses by type name and fields, exceptions by
    type and message; keys named in ``volatile`` (values that differ between two identical calls) dropped."""
    if _depth > 40:
        return "<deep>"
    d = _depth + 1
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return obj
    if isinstance(obj, enum.Enum):
        return f"{type(obj).__name__}.{obj.name}"
    if isinstance(obj, BaseException):
        return (f"{type(obj).__module__}.{type(obj).__qualname__}", str(obj))
    if isinstance(obj, dict):
        return {str(k): plain(v, volatile, d) for k, v in obj.items() if str(k) not in volatile}
    if isinstance(obj, (list, tuple)):
        return [plain(v, volatile, d) for v in obj]
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return (type(obj).__name__, plain(dump(), volatile, d))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return (type(obj).__name__, plain(fields, volatile, d))
    return type(obj).__name__  # anything else (clients, agents, callables): only its type is comparable


def _ours(span: ReadableSpan) -> bool:
    return span.instrumentation_scope is not None and span.instrumentation_scope.name == "otelstream"


@dataclass
class Telemetry:
    exporter: InMemorySpanExporter
    registry: CollectorRegistry

    def spans(self, collect: bool = False) -> list[ReadableSpan]:
        """otelstream's finished spans. ``collect``: a framework that does not close the SDK's stream when its caller
        stops leaves it to the collector (the SDK's Stream sits in a reference cycle), once the framework's own
        references are gone (litellm's logging threads hold the last one for a moment): collect until the span
        comes, as the process would later, for at most 5 s."""
        deadline = time.monotonic() + 5.0
        while True:
            assert otelstream.flush(10.0), "otelstream.flush timed out"
            found = [s for s in self.exporter.get_finished_spans() if _ours(s)]
            if found or not collect or time.monotonic() > deadline:
                return found
            time.sleep(0.05)
            gc.collect()

    def streams_total(self) -> dict[str, float]:
        """``otelstream_streams_total`` by outcome (non-zero samples only)."""
        out: dict[str, float] = {}
        for metric in self.registry.collect():
            for s in metric.samples:
                if s.name == "otelstream_streams_total" and s.value:
                    key = s.labels[names.LABEL_OUTCOME]
                    out[key] = out.get(key, 0.0) + s.value
        return out


@contextmanager
def instrumented() -> Iterator[Telemetry]:
    """otelstream on, through the public API, on private providers; off again afterwards."""
    otelstream.uninstrument()  # instrument() is idempotent: a pipeline left over would silently be reused
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    tel = Telemetry(exporter, CollectorRegistry())
    otelstream.instrument(tracer_provider=tp, registry=tel.registry)
    try:
        yield tel
    finally:
        otelstream.uninstrument()
        tp.shutdown()


Run = Callable[[str, bool], Seen]


def _scrub(obj: Any, url: str) -> Any:
    """``obj`` with the run's own base URL (each run has its script's) in any string replaced by one placeholder, and
    its path too (anthropic 2.17+ names the request's path in its error messages)."""
    if isinstance(obj, str):
        path = urlsplit(url).path.rstrip("/")
        obj = obj.replace(url, "<base_url>")
        return obj.replace(path, "<base_path>") if len(path) > 1 else obj
    if isinstance(obj, Seen):
        return Seen(_scrub(obj.items, url), _scrub(obj.result, url), _scrub(obj.raised, url))
    if isinstance(obj, dict):
        return {k: _scrub(v, url) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_scrub(v, url) for v in obj)
    return obj


def _first_difference(a: Any, b: Any, where: str = "") -> str:
    if isinstance(a, Seen) and isinstance(b, Seen):
        a, b = dataclasses.asdict(a), dataclasses.asdict(b)
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for k in a:
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{where}.{k}")
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]")
    return f"{where}: without {a!r:.300} / with {b!r:.300}"


def check(server: ScriptedServer, surface: str, case: Case, run: Run) -> ReadableSpan:
    """The suite's one assertion: identical with and without otelstream, one span with the case's outcome."""
    early_break = case.name == "early_break"
    first = script(server, surface, case)
    plain_run = _scrub(run(first, early_break), first)
    with instrumented() as tel:
        second = script(server, surface, case)
        observed = _scrub(run(second, early_break), second)
        spans = tel.spans(collect=early_break)
        totals = tel.streams_total()
    # the framework did what the case asks before otelstream was on (a broken setup would compare equal too)
    if case.name in ("complete", "ttfd_pause", "early_break"):
        assert plain_run.raised is None and plain_run.items, plain_run
    if case.name in ("in_band_error", "http_500"):
        assert plain_run.raised is not None, plain_run
    assert observed == plain_run, ("otelstream changed what the framework yielded, returned or raised",
                                   _first_difference(plain_run, observed))  # fmt: skip
    assert len(spans) == 1, [s.name for s in spans]
    span = spans[0]
    attrs = dict(span.attributes or {})
    assert attrs[names.ATTR_OUTCOME] == case.outcome, attrs
    assert totals == {case.outcome: 1.0}, totals
    assert attrs[names.ATTR_SURFACE] == surface
    if case.name == "ttfd_pause":
        assert attrs[names.ATTR_RESPONSE_TTFC] >= PAUSE_S, attrs
    if case.name in ("complete", "ttfd_pause"):
        assert attrs.get(names.ATTR_USAGE_OUTPUT) == 2, attrs  # every canned body reports 2 output tokens
    return span
