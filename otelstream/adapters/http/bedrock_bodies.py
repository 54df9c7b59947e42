"""Bedrock runtime streams seen at the HTTP client: a client other than botocore (litellm's own Bedrock provider, a
plain ``httpx`` / ``httpx2`` caller) POSTs to ``/model/{modelId}/converse-stream`` or
``/model/{modelId}/invoke-with-response-stream`` and reads an ``application/vnd.amazon.eventstream`` body. Its
bytes are read by the same rules ``otelstream check`` reads a recorded body with (``core.bedrock_reading``): the
framing decoded with both CRCs checked (a bad message ends the stream as a transport error of class ``protocol``),
each message as the event its protocol module reads. The request body says nothing of streaming: the path does."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

from otelstream import names
from otelstream.adapters.bedrock.api_call import family_of  # (imports no SDK)
from otelstream.adapters.calls import RUNTIME, Call, begin_call, finish
from otelstream.adapters.http.decoding import Observed
from otelstream.adapters.request import header, server_of
from otelstream.core import bedrock
from otelstream.core.bedrock_reading import BedrockBodyReader
from otelstream.core.client_rules import ClientReader
from otelstream.core.report import StreamStart

_PATH = re.compile(r"/model/([^/]+)/(converse-stream|invoke-with-response-stream)$")
_MAX_BODY = 512 * 1024
_ERROR_TYPE_HEADER = "x-amzn-errortype"


def _anthropic_body(request: Any) -> bool:
    try:
        content = request.content
    except Exception:  # a streamed body not read yet: not read here
        return False
    if type(content) is not bytes or len(content) > _MAX_BODY or b"anthropic_version" not in content:
        return False
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):
        return False
    return type(body) is dict and "anthropic_version" in body


def begin(request: Any, scope: str) -> BedrockObserved | None:
    """The call of a Bedrock stream request, or None for any other request (one substring test for most)."""
    path = request.url.path
    if "/model/" not in path:
        return None
    match = _PATH.search(path.rstrip("/"))
    if match is None or str(request.method).upper() != "POST":
        return None
    model = unquote(match.group(1))
    surface = names.CONVERSE
    invoke = match.group(2) == "invoke-with-response-stream"
    if invoke and (family_of(model) == "anthropic" or _anthropic_body(request)):
        surface = names.MESSAGES
    host, port = server_of(request.url)
    start = StreamStart(
        surface=surface,
        provider=names.PROVIDER_BEDROCK,
        request_model=model[:256],
        server_address=host,
        server_port=port,
        t_request_ns=RUNTIME.clock(),
    )
    call = begin_call(start, scopes=(scope,))
    if call is None:
        return None
    call.observed = True
    return BedrockObserved(call)


class _Reader(ClientReader):
    """A client that is not an SDK: it reads on after an exception message; a broken message ends the call."""

    __slots__ = ("call",)

    def __init__(self, call: Call) -> None:
        super().__init__(call.tracker, named=False, sdk=False)  # no SSE event: names on this wire
        self.call = call

    def end(self, how: str, exc: BaseException | None = None) -> None:
        finish(self.call, how, None, exc)


class BedrockObserved(Observed):
    """An ``Observed`` whose body is an event stream: each chunk to the framing decoder, not to the SSE one."""

    __slots__ = ("body",)

    def __init__(self, call: Call) -> None:
        super().__init__(call)
        self.body = BedrockBodyReader(_Reader(call))

    def chunk(self, data: bytes) -> None:
        if self.inflate is not None:
            data = self.inflate(data)
        self.body.feed(data)

    def eof(self) -> None:
        self.body.finish()
        finish(self.call, "eof")

    def http_error_type(self, response: Any) -> str | None:
        return bedrock.error_type_header(header(response, (_ERROR_TYPE_HEADER,))) or super().http_error_type(response)
