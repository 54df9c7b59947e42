"""The fake provider's Gemini and Bedrock routes: which request paths they answer, which surface and model each
request is, the body's wire (Gemini SSE, Bedrock event stream) and each cloud's HTTP error shape.

    POST /v1beta/models/{model}:streamGenerateContent?alt=sse          (google-genai; Vertex AI's path too)
    POST /model/{modelId}/converse-stream                               (boto3 / aiobotocore converse_stream)
    POST /model/{modelId}/invoke-with-response-stream                   (an Anthropic model: the messages surface)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.bedrock_bodies import encode_converse, invoke_encoder
from otelstream.demo.events import Event, StreamSpec
from otelstream.demo.gemini_bodies import encode_gemini

GEMINI: Final = "gemini"
BEDROCK: Final = "bedrock"
_GEMINI_PATH: Final = re.compile(r"^/(?:v1beta|v1beta1|v1)/(?:projects/[^/]+/locations/[^/]+/publishers/google/)?"
                                 r"models/(?P<model>[^/:]+):streamGenerateContent$")  # fmt: skip
_BEDROCK_PATH: Final = re.compile(r"^/model/(?P<model>[^/]+)/(?P<op>converse-stream|invoke-with-response-stream)$")
# gRPC-style status names Google's errors carry, and the exception types Bedrock names in x-amzn-ErrorType
_GOOGLE_STATUS: Final = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                         503: "UNAVAILABLE"}  # fmt: skip
_AWS_ERROR: Final = {400: "ValidationException", 404: "ResourceNotFoundException", 429: "ThrottlingException",
                     500: "InternalServerException", 503: "ServiceUnavailableException"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class CloudRoute:
    cloud: str  # GEMINI or BEDROCK
    surface: str  # generate_content, converse, or messages (an Anthropic model through Bedrock's invoke API)
    model: str  # from the path: Gemini and Bedrock name the model there, not in the body

    @property
    def content_type(self) -> str:
        return names.SSE_CONTENT_TYPE if self.cloud == GEMINI else names.EVENTSTREAM_CONTENT_TYPE

    @property
    def suffix(self) -> str:
        """File suffix ``otelstream check`` expects for a body of this route."""
        return ".sse" if self.cloud == GEMINI else ".eventstream"

    def supports(self, fault: str) -> bool:
        if self.surface == names.MESSAGES:
            return fault in F.INVOKE_FAULTS
        return F.is_supported(fault, self.surface)

    def encoder(self, spec: StreamSpec) -> Callable[[Event], bytes]:
        if self.cloud == GEMINI:
            return encode_gemini
        return encode_converse if self.surface == names.CONVERSE else invoke_encoder(spec)

    def error(self, status: int, message: str, request_id: str) -> tuple[dict[str, str], bytes]:
        """Headers and body of an HTTP error as this cloud sends it."""
        if self.cloud == GEMINI:
            status_name = _GOOGLE_STATUS.get(status, "UNKNOWN")
            body = {"error": {"code": status, "message": message, "status": status_name}}
            return {"content-type": "application/json; charset=UTF-8"}, json.dumps(body, indent=2).encode()
        kind = _AWS_ERROR.get(status, "InternalServerException")
        headers = {"content-type": "application/json", names.BEDROCK_REQUEST_ID_HEADER: request_id,
                   "x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"}  # fmt: skip
        return headers, json.dumps({"message": message}).encode()


def route(path: str) -> CloudRoute | None:
    """The cloud route a request path (without its query) asks for, or None (an OpenAI or Anthropic path)."""
    gemini = _GEMINI_PATH.match(unquote(path))
    if gemini is not None:
        return CloudRoute(GEMINI, names.GENERATE_CONTENT, gemini.group("model"))
    bedrock = _BEDROCK_PATH.match(path)
    if bedrock is not None:
        surface = names.CONVERSE if bedrock.group("op") == "converse-stream" else names.MESSAGES
        return CloudRoute(BEDROCK, surface, unquote(bedrock.group("model")))
    return None
