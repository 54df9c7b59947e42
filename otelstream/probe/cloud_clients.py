"""The probe's clients and requests for the two cloud surfaces, through the real SDKs as a service calls them:

- ``generate_content``: google-genai's async client (``client.aio``, on the transport it picks: aiohttp when
  installed, else httpx), the Gemini API at the target's base URL, or Vertex AI when the target names a project
  (signed with Google's Application Default Credentials), ``generate_content_stream`` with ``max_output_tokens``;
  one attempt (``HttpRetryOptions(attempts=1)``: without it google-genai retries a failed connection on its own).
- ``converse``: boto3's ``bedrock-runtime`` client at the target's endpoint URL, ``converse_stream`` with
  ``inferenceConfig.maxTokens``, signed with the AWS credential chain; one attempt (``total_max_attempts=1``). boto3
  has no async client, so each request runs on a thread of the client's own pool, exactly as a threaded service
  calls it; the probe's overall deadline stops it at its next event (the caller's ``close()``: ``abandoned``), and a
  silence is ended by botocore's read timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from otelstream.probe.config import MAX_CONCURRENCY, VERTEX_LOCATION, ProbeError, Secrets, Target

BEDROCK_SERVICE: Final = "bedrock-runtime"
# botocore's bearer-token variable for Bedrock (its signing name, "bedrock"): a credential of the AWS chain too
BEDROCK_TOKEN_ENV: Final = "AWS_BEARER_TOKEN_BEDROCK"
GOOGLE_SCOPE: Final = "https://www.googleapis.com/auth/cloud-platform"  # what google-genai asks ADC for
_NO_CREDENTIALS: Final = ("no AWS credentials found: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                          f"or {BEDROCK_TOKEN_ENV}, or run where a role provides them")  # fmt: skip


# --- google-genai ----------------------------------------------------------------------------------------------------
class GeminiClient:
    """google-genai's client as the runner holds a client: ``close()`` is awaited at the end of the round."""

    def __init__(self, target: Target, secrets: Secrets, timeout_s: float) -> None:
        from google import genai
        from google.genai import types

        options: dict[str, Any] = {"base_url": target.base_url, "timeout": max(1, round(timeout_s * 1000)),
                                   "headers": dict(secrets.headers)}  # fmt: skip
        if "retry_options" in types.HttpOptions.model_fields:  # older releases have no retry of their own
            options["retry_options"] = types.HttpRetryOptions(attempts=1)
        http_options = types.HttpOptions(**options)
        if target.vertex:
            location = target.location or VERTEX_LOCATION
            self.client = genai.Client(vertexai=True, project=target.project, location=location,
                                       credentials=google_credentials(target), http_options=http_options)  # fmt: skip
        else:  # vertexai=False: the Gemini API whatever GOOGLE_GENAI_USE_VERTEXAI says
            self.client = genai.Client(api_key=secrets.api_key, vertexai=False, http_options=http_options)

    async def close(self) -> None:
        aclose = getattr(self.client.aio, "aclose", None)
        if aclose is not None:
            await aclose()
        close = getattr(self.client, "close", None)
        if close is not None:
            close()


async def gemini_stream(client: GeminiClient, target: Target, prompt: str) -> None:
    """One streamed answer, read to its end and dropped."""
    from google.genai import types

    config = types.GenerateContentConfig(max_output_tokens=target.max_output_tokens)
    stream: Any = await client.client.aio.models.generate_content_stream(model=target.model, contents=prompt,
                                                                    config=config)  # fmt: skip
    async with contextlib.aclosing(stream):  # a cancelled request closes the generator the caller holds
        async for _ in stream:
            pass


def google_credentials(target: Target) -> Any:
    """Application Default Credentials for a Vertex AI target (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's, the
    instance's), or a ``ProbeError``; they are refreshed by google-genai when it sends."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=[GOOGLE_SCOPE])
    except DefaultCredentialsError as exc:  # google-auth's reason names files and fields, never their values
        reason = " ".join(str(exc).split())[:200]
        raise ProbeError(f"target {target.name!r}: no Google Application Default Credentials ({reason}): set "
                         "GOOGLE_APPLICATION_CREDENTIALS, run `gcloud auth application-default login`, or run where "
                         "a service account provides them") from None  # fmt: skip
    return credentials


# --- boto3 ----------------------------------------------------------------------------------------------------------
def require_aws(target: Target) -> None:
    """A converse target's region and credentials, from its own ``region`` and the AWS chain, or a ``ProbeError``
    before anything is sent (a request without them fails inside botocore, not at the server)."""
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        session = boto3.session.Session(region_name=target.region)
        region = session.region_name
        credentials = session.get_credentials()
    except BotoCoreError as exc:  # a named profile that does not exist, a config file that does not parse
        raise ProbeError(f"target {target.name!r}: AWS configuration: {exc}") from None
    if not region:
        raise ProbeError(f"target {target.name!r}: surface converse needs an AWS region: --region, region in the "
                         "file, or AWS_DEFAULT_REGION")  # fmt: skip
    if credentials is None and not os.environ.get(BEDROCK_TOKEN_ENV):
        raise ProbeError(f"target {target.name!r}: {_NO_CREDENTIALS}")


class BedrockClient:
    """boto3's ``bedrock-runtime`` client and the threads its requests run on (one per request open at once)."""

    def __init__(self, target: Target, secrets: Secrets, timeout_s: float) -> None:
        import boto3
        from botocore.config import Config

        config = Config(connect_timeout=timeout_s, read_timeout=timeout_s, retries={"total_max_attempts": 1},
                        max_pool_connections=MAX_CONCURRENCY)  # fmt: skip
        session = boto3.session.Session(region_name=target.region)
        self.client = session.client(BEDROCK_SERVICE, endpoint_url=target.base_url, config=config)
        headers = dict(secrets.headers)
        if headers:
            # botocore's public event: the headers join each request before it is signed
            def add_headers(request: Any, **_: Any) -> None:
                for header, value in headers.items():
                    request.headers[header] = value

            self.client.meta.events.register(f"before-sign.{BEDROCK_SERVICE}.ConverseStream", add_headers)
        self.pool = ThreadPoolExecutor(max_workers=MAX_CONCURRENCY, thread_name_prefix="otelstream-probe-bedrock")

    async def close(self) -> None:
        self.pool.shutdown(wait=False)
        self.client.close()


def _converse(client: Any, target: Target, prompt: str, stop: threading.Event) -> bool:
    """On a pool thread: the request and its stream read to the end; True when ``stop`` ended it first."""
    response = client.converse_stream(modelId=target.model, messages=[{"role": "user", "content": [{"text": prompt}]}],
                                      inferenceConfig={"maxTokens": target.max_output_tokens})  # fmt: skip
    stream = response["stream"]
    try:
        for _ in stream:
            if stop.is_set():
                return True
    finally:
        stream.close()  # after the end a no-op; before it the caller's close, as an application leaving its loop
    return stop.is_set()


async def converse_attempt(client: BedrockClient, target: Target, prompt: str, deadline_s: float
                           ) -> tuple[BaseException | None, bool, float]:  # fmt: skip
    """(what the SDK raised, whether the probe's deadline ended it, seconds) of one request on the pool."""
    loop = asyncio.get_running_loop()
    stop = threading.Event()
    t0 = time.monotonic()
    # the request carries this context (the probe's attributes, the current span) onto its thread
    context = contextvars.copy_context()
    future = loop.run_in_executor(client.pool, context.run, _converse, client.client, target, prompt, stop)
    try:
        done, _ = await asyncio.wait({future}, timeout=deadline_s)
        if not done:
            stop.set()  # past the deadline: ended at its next event, or by the read timeout in a silence
            await asyncio.wait({future})
    except asyncio.CancelledError:  # the monitor's second signal: the stream goes with the probe
        stop.set()
        raise
    exc = future.exception()
    timed_out = exc is None and bool(future.result())
    return exc, timed_out, time.monotonic() - t0
