"""pydantic-ai's ``Agent.run_stream`` on its Google (Gemini API) and Bedrock (Converse) models, against the Gemini
and Bedrock stand-ins: the text deltas, the result (output, usage, messages) and the exception are the same with
otelstream on, and each model request is one span with its outcome.

What they stream through (pydantic-ai 2.x): GoogleModel, google-genai's ``aio.models.generate_content_stream`` over
the httpx2 ``AsyncClient`` pydantic-ai's GoogleProvider hands it; BedrockConverseModel, the sync boto3 client's
``converse_stream``, each event a ``next()`` on a worker thread (``anyio.to_thread``), the stream closed with
``EventStream.close()`` when the run ends early — sync botocore, not aiobotocore."""

from __future__ import annotations

from typing import Any

import pytest

from otelstream import names
from tests.compat.cloud_harness import BEDROCK, CLOUD_CASES, CLOUD_IDS, GEMINI, CloudCase, Stand, check_cloud
from tests.compat.harness import Seen, agent_seen, beside_pydantic_ai_instrumentation, need
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
        return agent_seen(pydantic_ai.Agent(_model(provider, base_url, model)), early_break, VOLATILE)

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
    server = gemini if provider == "google" else bedrock
    run = beside_pydantic_ai_instrumentation(lambda: pydantic_ai.Agent(_model(provider, server.base_url, "completed")))
    assert run.texts == ["Hel", "lo"] + (["!"] if provider == "google" else [])
    assert dict(run.ours.attributes or {})[names.ATTR_SURFACE] == stand.surface
    assert run.ttfd_count == 1, run.ttfd_count
