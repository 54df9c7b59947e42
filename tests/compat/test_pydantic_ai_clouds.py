"""pydantic-ai's ``Agent.run_stream`` on its Google (Gemini API) and Bedrock (Converse) models, against the Gemini
and Bedrock stand-ins: the text deltas, the result (output, usage, messages) and the exception are the same with
otelstream on, and each model request is one span with its outcome.

What they stream through (pydantic-ai 2.x): GoogleModel, google-genai's ``aio.models.generate_content_stream`` over
the httpx2 ``AsyncClient`` pydantic-ai's GoogleProvider hands it; BedrockConverseModel, the sync boto3 client's
``converse_stream``, each event a ``next()`` on a worker thread (``anyio.to_thread``), the stream closed with
``EventStream.close()`` when the run ends early — sync botocore, not aiobotocore."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.compat.cloud_harness import BEDROCK, CLOUD_CASES, CLOUD_IDS, GEMINI, CloudCase, Stand, check_cloud
from tests.compat.harness import Seen, need, plain
from tests.support.bedrock_server import BedrockServer
from tests.support.gemini_server import GeminiServer

pydantic_ai = need("pydantic_ai")
need("pydantic_ai.models.google")
need("pydantic_ai.models.bedrock")

from pydantic_ai.models.bedrock import BedrockConverseModel  # noqa: E402
from pydantic_ai.models.google import GoogleModel  # noqa: E402
from pydantic_ai.providers.bedrock import BedrockProvider  # noqa: E402
from pydantic_ai.providers.google import GoogleProvider  # noqa: E402

VOLATILE = frozenset({"timestamp", "run_id", "conversation_id"})  # wall-clock stamps, fresh ids per run


def _model(provider: str, base_url: str, model: str) -> Any:
    if provider == "google":
        return GoogleModel(model, provider=GoogleProvider(api_key="k", base_url=base_url))
    import boto3

    # the boto3 client a user hands the provider to choose its endpoint and retries (BedrockProvider's own client
    # keeps botocore's default retries): the stand-in's endpoint, dummy credentials, one attempt
    client = boto3.client("bedrock-runtime", endpoint_url=base_url, region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x", config=_no_retries())  # fmt: skip
    return BedrockConverseModel(model, provider=BedrockProvider(bedrock_client=client))


def _no_retries() -> Any:
    from botocore.config import Config

    return Config(retries={"total_max_attempts": 1})


def _runner(provider: str) -> Any:
    def run(base_url: str, model: str, early_break: bool) -> Seen:
        seen = Seen()
        agent = pydantic_ai.Agent(_model(provider, base_url, model))

        async def go() -> None:
            # debounce_by=None: each delta as it comes (see test_pydantic_ai.py)
            try:
                async with agent.run_stream("hi") as result:
                    async for text in result.stream_text(delta=True, debounce_by=None):
                        seen.items.append(text)
                        if early_break:
                            break
                    seen.result = plain(
                        {"usage": result.usage, "messages": result.all_messages()}, VOLATILE)  # fmt: skip
            except Exception as exc:
                seen.raised = plain(exc)

        asyncio.run(go())
        return seen

    return run


@pytest.mark.parametrize("case", CLOUD_CASES, ids=CLOUD_IDS)
@pytest.mark.parametrize(("provider", "stand"), [("google", GEMINI), ("bedrock", BEDROCK)], ids=["google", "bedrock"])
def test_pydantic_ai_run_stream_on_the_clouds(
    gemini: GeminiServer, bedrock: BedrockServer, provider: str, stand: Stand, case: CloudCase
) -> None:
    check_cloud(gemini if provider == "google" else bedrock, stand, case, _runner(provider))


@pytest.mark.parametrize(("provider", "stand"), [("google", GEMINI), ("bedrock", BEDROCK)], ids=["google", "bedrock"])
def test_ttfd_stays_in_prometheus_with_pydantic_ais_instrumentation(
    gemini: GeminiServer, bedrock: BedrockServer, provider: str, stand: Stand
) -> None:
    """pydantic-ai's own instrumentation on: otelstream's span of the Gemini / Bedrock stream sits under pydantic-ai's
    model-request span, and otelstream's Prometheus registry still counts the stream's TTFD once."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from prometheus_client import CollectorRegistry
    from pydantic_ai.models.instrumented import InstrumentationSettings

    import otelstream
    from otelstream import names

    server = gemini if provider == "google" else bedrock
    otelstream.uninstrument()
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()])
    registry = CollectorRegistry()
    otelstream.instrument(tracer_provider=tp, meter_provider=mp, registry=registry)
    try:
        agent = pydantic_ai.Agent(_model(provider, server.base_url, "completed"))
        agent.instrument = InstrumentationSettings(tracer_provider=tp, meter_provider=mp)

        async def go() -> list[str]:
            async with agent.run_stream("hi") as result:
                return [text async for text in result.stream_text(delta=True, debounce_by=None)]

        assert asyncio.run(go()) == ["Hel", "lo"] + (["!"] if provider == "google" else [])
        assert otelstream.flush(10.0)
        finished = exporter.get_finished_spans()
        ours = [s for s in finished if s.instrumentation_scope and s.instrumentation_scope.name == names.TRACER_NAME]
        assert len(ours) == 1 and ours[0].parent is not None, [s.name for s in finished]
        assert dict(ours[0].attributes or {})[names.ATTR_SURFACE] == stand.surface
        parent = {s.context.span_id: s for s in finished}[ours[0].parent.span_id]
        assert parent.instrumentation_scope is not None and parent.instrumentation_scope.name == "pydantic-ai"
        ttfd = [s.value for m in registry.collect() for s in m.samples
                if s.name == names.PROM_TIME_TO_FIRST_CHUNK + "_count"]  # fmt: skip
        assert sum(ttfd) == 1, ttfd
    finally:
        otelstream.uninstrument()
        mp.shutdown()
        tp.shutdown()
