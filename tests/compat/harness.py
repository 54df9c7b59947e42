"""The compat suite's method: a framework streams a scripted body from 127.0.0.1 twice, once with otelstream off and
once on; what the framework yielded, returned and raised must be the same both times, and the instrumented run must
leave exactly one otelstream span (and one ``otelstream_streams_total`` sample) with the outcome the script makes.

A framework under test is a function ``run(base_url, early_break) -> Seen`` that does what its users do (build the
framework's client on ``base_url``, stream, collect) and hands back plain data (``plain``) without the values that
differ between two identical calls (random run ids, wall-clock stamps: ``volatile``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import gc
import importlib
import inspect
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


def stream_seen(
    chunks: Callable[[], Any], is_async: bool, early_break: bool, output: Callable[[Any], object],
    volatile: frozenset[str] = frozenset(),
) -> Seen:
    """What a caller of a framework's streaming method sees: each chunk (``plain``), up to the first with ``output``
    when ``early_break``, and the exception raised. ``chunks()`` starts the stream: an iterable, or when ``is_async``
    an async iterable or an awaitable of one (run on an event loop of its own)."""
    seen = Seen()

    def take(chunk: Any) -> bool:
        seen.items.append(plain(chunk, volatile))
        return early_break and bool(output(chunk))

    if not is_async:
        try:
            for chunk in chunks():
                if take(chunk):
                    break
        except Exception as exc:
            seen.raised = plain(exc)
        return seen

    async def go() -> None:
        try:
            stream = chunks()
            async for chunk in await stream if inspect.isawaitable(stream) else stream:
                if take(chunk):
                    break
        except Exception as exc:
            seen.raised = plain(exc)

    asyncio.run(go())
    return seen


def content(chunk: Any) -> object:
    """A LangChain message chunk's output (``stream_seen``'s ``output`` for the LangChain chat models)."""
    return chunk.content


@dataclass
class PeerRun:
    """One ``run_stream`` with pydantic-ai's own instrumentation on (``beside_pydantic_ai_instrumentation``)."""

    texts: list[str]  # the text deltas
    ours: ReadableSpan  # otelstream's one span
    parent: ReadableSpan  # the span it nests under
    ttfd_count: float  # the TTFD histogram's count in otelstream's own Prometheus registry


def beside_pydantic_ai_instrumentation(make_agent: Callable[[], Any]) -> PeerRun:
    """otelstream on, with its own Prometheus registry, and pydantic-ai's instrumentation on the agent ``make_agent``
    builds, both on the same tracer and meter providers: one ``run_stream``. otelstream's span must nest under
    pydantic-ai's."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from pydantic_ai.models.instrumented import InstrumentationSettings

    otelstream.uninstrument()
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()])
    registry = CollectorRegistry()
    otelstream.instrument(tracer_provider=tp, meter_provider=mp, registry=registry)
    try:
        agent = make_agent()
        agent.instrument = InstrumentationSettings(tracer_provider=tp, meter_provider=mp)

        async def go() -> list[str]:
            async with agent.run_stream("hi") as result:
                return [text async for text in result.stream_text(delta=True, debounce_by=None)]

        texts = asyncio.run(go())
        assert otelstream.flush(10.0)
        finished = exporter.get_finished_spans()
        ours = [s for s in finished if s.instrumentation_scope and s.instrumentation_scope.name == names.TRACER_NAME]
        assert len(ours) == 1 and ours[0].parent is not None, [s.name for s in finished]  # under pydantic-ai's span
        parent = {s.context.span_id: s for s in finished}[ours[0].parent.span_id]
        assert parent.instrumentation_scope is not None and parent.instrumentation_scope.name == "pydantic-ai"
        ttfd = [s.value for m in registry.collect() for s in m.samples
                if s.name == names.PROM_TIME_TO_FIRST_CHUNK + "_count"]  # fmt: skip
        return PeerRun(texts, ours[0], parent, sum(ttfd))
    finally:
        otelstream.uninstrument()
        mp.shutdown()
        tp.shutdown()


def agent_seen(agent: Any, early_break: bool, volatile: frozenset[str]) -> Seen:
    """pydantic-ai's ``Agent.run_stream`` as its users stream it: the text deltas, each as it comes
    (``debounce_by=None``: pydantic-ai groups those within 0.1 s by default, so what the caller gets would depend on
    the machine's load, not on the stream), the first only when ``early_break``; the result's usage and messages; the
    exception raised."""
    seen = Seen()

    async def go() -> None:
        try:
            async with agent.run_stream("hi") as result:
                async for text in result.stream_text(delta=True, debounce_by=None):
                    seen.items.append(text)
                    if early_break:
                        break
                seen.result = plain({"usage": result.usage, "messages": result.all_messages()}, volatile)
        except Exception as exc:
            seen.raised = plain(exc)

    asyncio.run(go())
    return seen


def with_and_without(run: Callable[[], Seen], outcome: str, collect: bool) -> tuple[Seen, dict[str, Any]]:
    """The suite's method: ``run`` once with otelstream off and once on. The framework must have done what the case
    asks before otelstream was on (a broken setup would compare equal too); what it yielded, returned and raised must
    be the same both times; the instrumented run must leave exactly one otelstream span and one
    ``otelstream_streams_total`` sample, of ``outcome``. ``collect``: see ``Telemetry.spans``. The run without
    otelstream and the span's attributes."""
    plain_run = run()
    with instrumented() as tel:
        observed = run()
        spans = tel.spans(collect=collect)
        totals = tel.streams_total()
    if outcome in (names.COMPLETED, names.ABANDONED):
        assert plain_run.raised is None and plain_run.items, plain_run
    if outcome in (names.ERROR, names.HTTP_ERROR):
        assert plain_run.raised is not None, plain_run
    assert observed == plain_run, ("otelstream changed what the framework yielded, returned or raised",
                                   _first_difference(plain_run, observed))  # fmt: skip
    assert len(spans) == 1, [s.name for s in spans]
    attrs = dict(spans[0].attributes or {})
    assert attrs[names.ATTR_OUTCOME] == outcome, attrs
    assert totals == {outcome: 1.0}, totals
    return plain_run, attrs


def check_span(attrs: dict[str, Any], case: str, surface: str, pause_s: float, output_tokens: int) -> None:
    """What a case's span carries besides its outcome: the surface; a TTFD past the pause script's ``pause_s`` wait;
    the stand-in's ``output_tokens`` for a completed stream."""
    assert attrs[names.ATTR_SURFACE] == surface, attrs
    if case == "ttfd_pause":
        assert attrs[names.ATTR_RESPONSE_TTFC] >= pause_s, attrs
    if case in ("complete", "ttfd_pause"):
        assert attrs.get(names.ATTR_USAGE_OUTPUT) == output_tokens, attrs


def check(server: ScriptedServer, surface: str, case: Case, run: Run) -> None:
    """The suite's one assertion: identical with and without otelstream, one span with the case's outcome."""
    early_break = case.name == "early_break"

    def once() -> Seen:
        url = script(server, surface, case)  # each run its own script
        seen: Seen = _scrub(run(url, early_break), url)
        return seen

    _, attrs = with_and_without(once, case.outcome, collect=early_break)
    check_span(attrs, case.name, surface, PAUSE_S, 2)  # every canned body reports 2 output tokens
