"""langchain-aws's ChatBedrockConverse, ``stream`` and ``astream``, against the Bedrock stand-in (``endpoint_url``,
dummy credentials, botocore's retries off): the chunks and the exception the caller gets are the same with otelstream
on, and each call is one ``converse`` span with its outcome.

What it streams through (langchain-aws 1.x): boto3's ``bedrock-runtime`` client, ``converse_stream``, for both.
ChatBedrockConverse has no async implementation of its own: ``astream`` is langchain-core's fallback, which runs the
sync ``stream`` in the event loop's default executor (each chunk a ``next()`` on a worker thread), so the async case
is sync botocore on threads, not aiobotocore."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat.cloud_harness import BEDROCK, CLOUD_CASES, CLOUD_IDS, CloudCase, check_cloud
from tests.compat.harness import Seen, content, need, stream_seen
from tests.support.bedrock_server import BedrockServer

langchain_aws = need("langchain_aws")

VOLATILE = frozenset({"id", "date"})  # langchain's run id (new per call); the response's Date header


def _model(base_url: str, model: str) -> Any:
    from botocore.config import Config

    # the stand-in's model ids (its script names) name no provider: langchain-aws then calls the non-streaming
    # Converse unless told the model streams (disable_streaming=False); total_max_attempts=1: no retry
    return langchain_aws.ChatBedrockConverse(
        model_id=model, provider="anthropic", disable_streaming=False, endpoint_url=base_url,
        region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x",
        config=Config(retries={"total_max_attempts": 1}),
    )  # fmt: skip


def _runner(is_async: bool) -> Any:
    def run(base_url: str, model_id: str, early_break: bool) -> Seen:
        model = _model(base_url, model_id)
        return stream_seen(lambda: (model.astream if is_async else model.stream)("hi"), is_async, early_break,
                           content, VOLATILE)  # fmt: skip

    return run


@pytest.mark.parametrize("case", CLOUD_CASES, ids=CLOUD_IDS)
@pytest.mark.parametrize("is_async", [False, True], ids=["stream", "astream"])
def test_langchain_aws_converse(bedrock: BedrockServer, is_async: bool, case: CloudCase) -> None:
    check_cloud(bedrock, BEDROCK, case, _runner(is_async))
