"""No double counting with a real GenAI peer: OpenTelemetry's own OpenAI instrumentation
(``opentelemetry-instrumentation-genai-openai``) records the gen_ai.client.* metrics of the calls it wraps, so under
its CLIENT span otelstream records only its otelstream.* instruments in the MeterProvider the two share; a call the
peer does not wrap (Anthropic Messages) keeps otelstream's gen_ai.client.* instruments there too, and otelstream's
own Prometheus registry, which the peer does not write, keeps every series of every call. The peer is not in the
test extra: ``.ci/peers.sh`` installs it in a venv of its own and sets ``OTELSTREAM_PEERS_REQUIRED=1``, so there a
missing peer fails instead of skipping.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

import otelstream
from otelstream import names
from otelstream.demo.provider import FakeProvider
from tests.support.clients import client_for
from tests.telemetry.harness import Telemetry, consume_async, consume_sync

if os.environ.get("OTELSTREAM_PEERS_REQUIRED") == "1":
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
else:
    OpenAIInstrumentor = pytest.importorskip(
        "opentelemetry.instrumentation.genai.openai",
        reason="opentelemetry-instrumentation-genai-openai not installed (.ci/peers.sh installs it)",
    ).OpenAIInstrumentor

PEER_SCOPE = "opentelemetry.instrumentation.genai.openai"
PEER_SURFACES = (names.CHAT_COMPLETIONS, names.RESPONSES)  # what the peer wraps
DURATION = {names.SEMCONV_DEFAULT: names.OTEL_OPERATION_DURATION, names.SEMCONV_LATEST: names.OTEL_INFERENCE_DURATION}


class Peered:
    def __init__(self, tel: Telemetry, reader: InMemoryMetricReader, semconv: str) -> None:
        self.tel = tel
        self.reader = reader
        self.semconv = semconv

    def points(self) -> dict[tuple[str, str], list[Any]]:
        """(scope, instrument) -> data points, of the peer and of otelstream alike (one meter provider)."""
        data = self.reader.get_metrics_data()
        out: dict[tuple[str, str], list[Any]] = {}
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out[(sm.scope.name, m.name)] = list(m.data.data_points)  # type: ignore[union-attr]
        return out


@pytest.fixture(params=[names.SEMCONV_DEFAULT, names.SEMCONV_LATEST])
def peered(request: pytest.FixtureRequest) -> Iterator[Peered]:
    """The peer and otelstream on one TracerProvider and one MeterProvider (otelstream records both metric paths:
    its native registry and the OTel instruments)."""
    otelstream.uninstrument()
    tel = Telemetry.new()
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    peer = OpenAIInstrumentor()
    peer.instrument(tracer_provider=tel.tracer_provider, meter_provider=mp)
    otelstream.instrument(tracer_provider=tel.tracer_provider, meter_provider=mp, registry=tel.registry,
                          semconv=request.param)  # fmt: skip
    try:
        yield Peered(tel, reader, request.param)
    finally:
        otelstream.uninstrument()
        peer.uninstrument()
        mp.shutdown()
        tel.tracer_provider.shutdown()


def _call(provider: FakeProvider, surface: str, is_async: bool, tel: Telemetry) -> None:
    if not is_async:
        client = client_for(provider, surface)
        try:
            seen = consume_sync(client, surface, names.COMPLETED, tel.tracer)
        finally:
            client.close()
    else:

        async def go() -> Any:
            aclient = client_for(provider, surface, is_async=True)
            try:
                return await consume_async(aclient, surface, names.COMPLETED, tel.tracer)
            finally:
                await aclient.close()

        seen = asyncio.run(go())
    assert seen.exc is None and seen.deltas > 0, seen.exc


def _scope(span: ReadableSpan) -> str:
    return span.instrumentation_scope.name if span.instrumentation_scope else ""


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_gen_ai_metrics_once_per_call(peered: Peered, provider: FakeProvider, is_async: bool) -> None:
    tel = peered.tel
    for surface in (*PEER_SURFACES, names.MESSAGES):
        _call(provider, surface, is_async, tel)
    tel.flush()

    # spans: the peer's CLIENT span per call it wraps, otelstream's INTERNAL child under it; Messages: ours is CLIENT
    spans = tel.spans()
    peer_spans = [s for s in spans if _scope(s) == PEER_SCOPE and s.kind is SpanKind.CLIENT]
    assert len(peer_spans) == len(PEER_SURFACES)
    ours = {s.attributes[names.ATTR_SURFACE]: s for s in tel.ours()}  # type: ignore[index]
    assert set(ours) == {*PEER_SURFACES, names.MESSAGES}
    for surface in PEER_SURFACES:
        assert ours[surface].kind is SpanKind.INTERNAL
        assert ours[surface].parent is not None
        assert ours[surface].parent.span_id in {s.context.span_id for s in peer_spans}  # type: ignore[union-attr]
    assert ours[names.MESSAGES].kind is SpanKind.CLIENT

    points = peered.points()
    # the peer recorded its calls' duration; otelstream recorded only the call the peer did not wrap
    peer_calls = sum(p.count for p in points[(PEER_SCOPE, names.OTEL_OPERATION_DURATION)])
    assert peer_calls == len(PEER_SURFACES)
    ours_duration = points[(names.TRACER_NAME, DURATION[peered.semconv])]
    assert [dict(p.attributes)[names.ATTR_PROVIDER_NAME] for p in ours_duration] == [names.PROVIDER_ANTHROPIC]
    assert sum(p.count for p in ours_duration) == 1
    ours_ttfc = [k for k in points if k[0] == names.TRACER_NAME and "time_to_first_chunk" in k[1]]
    assert [sum(p.count for p in points[k]) for k in ours_ttfc] == [1]
    # otelstream's own series count every stream
    assert sum(p.value for p in points[(names.TRACER_NAME, names.OTEL_STREAMS)]) == 3

    # otelstream's own Prometheus registry, which the peer does not write: every series for every stream, the
    # gen_ai.client.* ones (TTFD included) too, so the shipped dashboards count the peer's calls
    samples = tel.samples()
    streams = {dict(k[1])["surface"]: v for k, v in samples.items() if k[0] == "otelstream_streams_total"}
    assert streams == {names.CHAT_COMPLETIONS: 1, names.RESPONSES: 1, names.MESSAGES: 1}
    ttfd = {names.SEMCONV_DEFAULT: names.PROM_TIME_TO_FIRST_CHUNK,
            names.SEMCONV_LATEST: names.PROM_INFERENCE_TIME_TO_FIRST_CHUNK}[peered.semconv]  # fmt: skip
    ttfd_by_provider: dict[str, float] = {}
    for k, v in samples.items():
        if k[0] == ttfd + "_count":
            provider_name = dict(k[1])[names.LABEL_PROVIDER]
            ttfd_by_provider[provider_name] = ttfd_by_provider.get(provider_name, 0) + v
    assert ttfd_by_provider == {names.PROVIDER_OPENAI: len(PEER_SURFACES), names.PROVIDER_ANTHROPIC: 1}
