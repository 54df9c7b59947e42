"""The telemetry tests' harness: the pipeline under test, the streams the real SDKs consume (clients from
tests/support/clients.py), exact expectations."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Tracer
from prometheus_client import CollectorRegistry

import otelstream
from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.exchange import FAULT_HEADER
from otelstream.demo.pacing import Pacing
from otelstream.demo.provider import FakeProvider
from tests.support.clients import client_for
from tests.support.surfaces import SSE_SURFACES

TOKENS = 6  # every stream carries exactly this many output words (deltas)
CUT_AT = TOKENS // 2  # a broken stream delivers this many deltas before it breaks (bodies._cut_at)
ABANDON_AFTER = 2  # the abandoning caller closes after this many deltas
PACING = Pacing(ttfd_s=0.004, gap_s=0.001, pause_s=0.2, no_headers_s=5.0)
MODELS = {
    names.RESPONSES: "gpt-4o-mini",
    names.RESPONSES_WEBSOCKET: "gpt-4o-mini",
    names.CHAT_COMPLETIONS: "gpt-4o",
    names.COMPLETIONS: "gpt-3.5-turbo-instruct",
    names.MESSAGES: "claude-sonnet-4-5",
}
# outcome -> the fault that produces it ("abandoned": a healthy stream the caller closes early)
FAULT_FOR = {
    names.COMPLETED: F.OK,
    names.INCOMPLETE: F.INCOMPLETE,
    names.FAILED: F.FAILED,
    names.ERROR: F.ERROR,
    names.CUT: F.CUT,
    names.ABANDONED: F.OK,
    names.TRANSPORT_ERROR: F.RESET,
    names.HTTP_ERROR: F.HTTP_500,
}


def supports(surface: str, outcome: str) -> bool:
    return outcome == names.ABANDONED or F.is_supported(FAULT_FOR[outcome], surface)


@dataclass
class Telemetry:
    exporter: InMemorySpanExporter
    tracer_provider: TracerProvider
    registry: CollectorRegistry

    @classmethod
    def new(cls) -> Telemetry:
        exporter = InMemorySpanExporter()
        tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(exporter))
        return cls(exporter, tp, CollectorRegistry())

    @property
    def tracer(self) -> Tracer:
        return self.tracer_provider.get_tracer("tests.telemetry")

    def flush(self) -> None:
        assert otelstream.flush(10.0), "otelstream.flush timed out"

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def ours(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.instrumentation_scope and s.instrumentation_scope.name == "otelstream"]

    def samples(self, *, keep_zero_gauges: bool = True) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """Counter samples, histogram ``_count`` samples, token-usage ``_sum`` samples and gauges: name+labels→value."""
        out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in self.registry.collect():
            for s in family.samples:
                keep = (
                    (family.type == "counter" and s.name.endswith("_total"))
                    or (family.type == "histogram" and s.name.endswith("_count"))
                    or s.name == "gen_ai_client_token_usage_sum"
                    or (family.type == "gauge" and (keep_zero_gauges or s.value))
                )
                if keep:
                    out[(s.name, frozenset(s.labels.items()))] = s.value
        return out

    def bucket(self, family: str, le: str, **labels: str) -> float:
        for fam in self.registry.collect():
            for s in fam.samples:
                wanted = s.name == family + "_bucket" and s.labels.get("le") == le
                if wanted and all(s.labels.get(k) == v for k, v in labels.items()):
                    return float(s.value)
        raise AssertionError(f"no {family}_bucket{{le={le!r}, {labels}}}")


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return (name, frozenset(labels.items()))


# --- driving the real SDKs ----------------------------------------------------------------------------------
@dataclass
class Seen:
    items: list[Any] = field(default_factory=list)
    deltas: int = 0
    exc: BaseException | None = None
    parent: Span | None = None


def is_delta(surface: str, item: Any) -> bool:
    if surface in (names.RESPONSES, names.RESPONSES_WEBSOCKET):
        return str(getattr(item, "type", "")).endswith(".delta")
    if surface == names.CHAT_COMPLETIONS:
        return any(c.delta.content for c in item.choices)
    if surface == names.COMPLETIONS:
        return any(c.text for c in item.choices)
    return getattr(item, "type", None) == "content_block_delta"


def request_kwargs(surface: str, fault: str, **headers: str) -> dict[str, Any]:
    extra = {FAULT_HEADER: fault, **headers}
    model = MODELS[surface]
    if surface == names.RESPONSES:
        return {"model": model, "input": "hi", "stream": True, "extra_headers": extra}
    if surface == names.CHAT_COMPLETIONS:
        return {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True,
                "stream_options": {"include_usage": True}, "extra_headers": extra}  # fmt: skip
    if surface == names.COMPLETIONS:
        return {"model": model, "prompt": "hi", "stream": True, "stream_options": {"include_usage": True},
                "extra_headers": extra}  # fmt: skip
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "extra_headers": extra}  # fmt: skip


def create_fn(client: Any, surface: str) -> Any:
    if surface == names.RESPONSES:
        return client.responses.create
    if surface == names.CHAT_COMPLETIONS:
        return client.chat.completions.create
    if surface == names.COMPLETIONS:
        return client.completions.create
    return client.messages.create


def consume_sync(client: Any, surface: str, outcome: str, tracer: Tracer | None = None, **headers: str) -> Seen:
    seen = Seen()
    kwargs = request_kwargs(surface, FAULT_FOR[outcome], **headers)
    with _parent(tracer) as parent:
        seen.parent = parent
        try:
            with create_fn(client, surface)(**kwargs) as stream:
                for item in stream:
                    seen.items.append(item)
                    if is_delta(surface, item):
                        seen.deltas += 1
                        if outcome == names.ABANDONED and seen.deltas == ABANDON_AFTER:
                            break  # the context exit closes the stream: abandoned (close)
        except Exception as exc:
            seen.exc = exc
    return seen


async def consume_async(client: Any, surface: str, outcome: str, tracer: Tracer | None = None) -> Seen:
    seen = Seen()
    kwargs = request_kwargs(surface, FAULT_FOR[outcome])
    with _parent(tracer) as parent:
        seen.parent = parent
        try:
            stream = await create_fn(client, surface)(**kwargs)
            async with stream:
                async for item in stream:
                    seen.items.append(item)
                    if is_delta(surface, item):
                        seen.deltas += 1
                        if outcome == names.ABANDONED and seen.deltas == ABANDON_AFTER:
                            break
        except Exception as exc:
            seen.exc = exc
    return seen


@contextlib.contextmanager
def _parent(tracer: Tracer | None) -> Iterator[Span | None]:
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span("caller") as span:
        yield span


def warm_up(provider: FakeProvider) -> None:
    """One uninstrumented stream per surface, sync and async (the SDKs build their models on first use)."""
    for surface in SSE_SURFACES:
        client = client_for(provider, surface)
        consume_sync(client, surface, names.COMPLETED)
        client.close()

        async def go(surface: str = surface) -> None:
            aclient = client_for(provider, surface, is_async=True)
            await consume_async(aclient, surface, names.COMPLETED)
            await aclient.close()

        asyncio.run(go())
