"""The error-class table (names.ERROR_CLASS_TABLE, derived by core.errors), row by row: HTTP statuses, the provider
codes both SDKs deliver, the exceptions they and httpx2 raise, and the outcomes ("Error classes")."""

from __future__ import annotations

import asyncio
import json

import anthropic
import httpx2
import openai
import pytest

from otelstream import names
from otelstream.core.errors import ErrorFields, error_class, error_fields, exception_class, status_of

HTTP = names.HTTP_ERROR
_REQ = httpx2.Request("POST", "http://127.0.0.1/v1/x")


@pytest.mark.parametrize(
    ("status", "klass"),
    [(429, "rate_limited"), (503, "overloaded"), (529, "overloaded"), (408, "timeout"), (504, "timeout"),
     (401, "auth"), (403, "auth"), (400, "bad_request"), (404, "bad_request"), (413, "bad_request"),
     (422, "bad_request"), (499, "bad_request"), (500, "server_error"), (502, "server_error"),
     (599, "server_error"), (302, "_OTHER")],
)  # fmt: skip
def test_http_status(status: int, klass: str) -> None:
    assert error_class(HTTP, str(status), status, None) == klass
    assert error_class(HTTP, None, status, None) == klass


@pytest.mark.parametrize(
    ("code", "klass"),
    [  # openai (Responses error / response.failed codes, chat error types) and anthropic (error.type)
     ("rate_limit_exceeded", "rate_limited"), ("rate_limit_error", "rate_limited"),
     ("too_many_requests", "rate_limited"), ("insufficient_quota", "quota_exceeded"),
     ("billing_hard_limit_reached", "quota_exceeded"), ("quota_exceeded", "quota_exceeded"),
     ("overloaded_error", "overloaded"), ("overloaded", "overloaded"), ("engine_overloaded", "overloaded"),
     ("service_unavailable", "overloaded"), ("timeout", "timeout"), ("timeout_error", "timeout"),
     ("authentication_error", "auth"), ("permission_error", "auth"), ("invalid_api_key", "auth"),
     ("invalid_request_error", "bad_request"), ("context_length_exceeded", "bad_request"),
     ("not_found_error", "bad_request"), ("request_too_large", "bad_request"), ("invalid_prompt", "bad_request"),
     ("server_error", "server_error"), ("api_error", "server_error"), ("internal_error", "server_error"),
     ("internal_server_error", "server_error"), ("Server_Error", "server_error"),
     ("tool_use_failed", "_OTHER"), ("vendor_specific", "_OTHER")],
)  # fmt: skip
@pytest.mark.parametrize("outcome", [names.ERROR, names.FAILED])
def test_provider_code(code: str, klass: str, outcome: str) -> None:
    assert error_class(outcome, code, None, None) == klass


def test_the_more_specific_of_code_and_status() -> None:
    """OpenAI answers an exhausted quota with HTTP 429 and code insufficient_quota: out of quota, not rate limited;
    an overloaded engine with HTTP 503 and the generic type server_error: overloaded; an unlisted code falls back to
    the status."""
    assert error_class(HTTP, "insufficient_quota", 429, None) == "quota_exceeded"
    assert error_class(HTTP, "server_error", 503, None) == "overloaded"
    assert error_class(HTTP, "overloaded_error", 500, None) == "overloaded"
    assert error_class(HTTP, "invalid_request_error", 401, None) == "auth"
    assert error_class(HTTP, "context_length_exceeded", 400, None) == "bad_request"
    assert error_class(HTTP, "overloaded_error", 529, None) == "overloaded"
    assert error_class(HTTP, "something_else", 503, None) == "overloaded"
    # a status-like code sent in-band (OpenRouter's {"error": {"code": 400}}) reads as that status
    assert error_class(names.ERROR, "400", None, None) == "bad_request"
    assert error_class(names.ERROR, "502", None, None) == "server_error"


def _openai_status(status: int, body: dict[str, object]) -> openai.APIStatusError:
    response = httpx2.Response(status, request=_REQ, json=body)
    return openai.OpenAI(api_key="k", base_url="http://127.0.0.1/v1")._make_status_error(
        "err", body=body.get("error", body), response=response
    )


def _anthropic_status(status: int, body: dict[str, object]) -> anthropic.APIStatusError:
    response = httpx2.Response(status, request=_REQ, json=body)
    return anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1")._make_status_error(
        "err", body=body, response=response
    )


@pytest.mark.parametrize(
    ("exc", "klass"),
    [(openai.APITimeoutError(_REQ), "timeout"), (anthropic.APITimeoutError(_REQ), "timeout"),
     (httpx2.ReadTimeout("t", request=_REQ), "timeout"), (httpx2.ConnectTimeout("t"), "timeout"),
     (httpx2.WriteTimeout("t"), "timeout"), (httpx2.PoolTimeout("t"), "timeout"), (TimeoutError(), "timeout"),
     (asyncio.TimeoutError(), "timeout"),
     (openai.APIConnectionError(request=_REQ), "connection"), (anthropic.APIConnectionError(request=_REQ),
                                                                "connection"),
     (httpx2.ReadError("reset"), "connection"), (httpx2.ConnectError("refused"), "connection"),
     (httpx2.RemoteProtocolError("peer closed connection without sending complete message body"), "connection"),
     (httpx2.StreamClosed(), "connection"), (ConnectionResetError(), "connection"),
     (json.JSONDecodeError("x", "{", 0), "protocol"), (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"),
                                                        "protocol"),
     (httpx2.DecodingError("bad gzip"), "protocol"), (ValueError("x"), "protocol"),
     (RuntimeError("x"), None), (KeyError("x"), None)],
)  # fmt: skip
def test_exception(exc: BaseException, klass: str | None) -> None:
    assert exception_class(exc) == klass
    outcome = names.TRANSPORT_ERROR
    assert error_class(outcome, None, None, exc) == (klass or "connection")
    assert error_class(HTTP, None, None, exc) == (klass or "_OTHER")


def test_sdk_status_errors() -> None:
    """What fail_unbound hands over: the SDK's exception (its status) and its code as the error type."""
    e = _openai_status(429, {"error": {"message": "m", "type": "insufficient_quota", "code": "insufficient_quota"}})
    assert status_of(e) == 429 and error_class(HTTP, e.code, status_of(e), e) == "quota_exceeded"
    e = _openai_status(500, {"error": {"message": "m", "type": "server_error", "code": None}})
    assert error_class(HTTP, e.type, status_of(e), e) == "server_error"
    a = _anthropic_status(529, {"type": "error", "error": {"type": "overloaded_error", "message": "m"}})
    assert status_of(a) == 529 and error_class(HTTP, a.type, status_of(a), a) == "overloaded"
    a = _anthropic_status(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "m"}})
    assert error_class(HTTP, a.type, status_of(a), a) == "rate_limited"
    # anthropic's in-band `event: error` arrives as APIStatusError with status 200: the code decides
    assert error_class(names.ERROR, "overloaded_error", 200, None) == "overloaded"
    assert status_of(RuntimeError()) is None and status_of(None) is None


@pytest.mark.parametrize(
    ("outcome", "klass"),
    [(names.CUT, "cut"), (names.ERROR, "_OTHER"), (names.FAILED, "_OTHER"), (names.TRANSPORT_ERROR, "connection"),
     (names.HTTP_ERROR, "_OTHER"), (names.COMPLETED, None), (names.INCOMPLETE, None), (names.ABANDONED, None)],
)  # fmt: skip
def test_outcome(outcome: str, klass: str | None) -> None:
    assert error_class(outcome, None, None, None) == klass
    if klass is None:  # good outcomes have no class, whatever else was seen
        assert error_class(outcome, "rate_limit_exceeded", 429, httpx2.ReadTimeout("t")) is None


def test_the_table_is_closed_and_every_row_is_reachable() -> None:
    assert names.ERROR_CLASSES == ("rate_limited", "quota_exceeded", "overloaded", "timeout", "auth", "bad_request",
                                   "server_error", "connection", "protocol", "cut", "_OTHER")  # fmt: skip
    for klass, statuses, codes, _excs in names.ERROR_CLASS_TABLE:
        for code in codes:
            assert error_class(names.ERROR, code, None, None) == klass
        for status in statuses:
            # a status is claimed by the first row that lists it (429 is rate_limited, not bad_request)
            first = next(row[0] for row in names.ERROR_CLASS_TABLE if status in row[1])
            assert error_class(HTTP, None, status, None) == first
    assert {row[0] for row in names.ERROR_CLASS_TABLE} == set(names.ERROR_CLASSES)


@pytest.mark.parametrize(
    ("code", "body", "status", "klass"),
    [  # the error body's code, then its type: an unlisted code does not hide a listed type (Groq)
     ("tool_use_failed", ("tool_use_failed", "invalid_request_error", 400), None, "bad_request"),
     ("vendor", ("vendor", "rate_limit_error", None), None, "rate_limited"),
     ("insufficient_quota", ("insufficient_quota", "rate_limit_error", None), None, "quota_exceeded"),
     # neither listed: a status inside the body
     ("vendor", ("vendor", "other", 529), None, "overloaded"),
     ("vendor", ("vendor", None, 418), None, "bad_request"),
     ("vendor", ("vendor", None, None), None, "_OTHER"),
     # the HTTP status and the type: the more specific row, as with the code
     ("vendor", ("vendor", "rate_limit_error", None), 500, "rate_limited"),
     ("vendor", ("vendor", "server_error", None), 503, "overloaded"),
     # a listed type beats the body's own status
     ("vendor", ("vendor", "authentication_error", 500), None, "auth"),
     # an aborted generation (chat finish reason) is recorded as a server error
     ("abort", ("abort", "server_error", None), None, "server_error")],
)  # fmt: skip
def test_code_then_type_then_status_in_the_body(code: str, body: ErrorFields, status: int | None, klass: str) -> None:
    assert error_class(names.ERROR, code, status, None, body) == klass


@pytest.mark.parametrize(
    ("body", "fields"),
    [({"code": "c", "type": "t", "status_code": 400}, ("c", "t", 400)), ({"code": 400}, ("400", None, None)),
     ({"type": "t", "status": "503"}, (None, "t", 503)), ({"status": "UNAVAILABLE"}, (None, None, None)),
     ({"status_code": 99}, (None, None, None)), ({"code": ""}, (None, None, None)), ("text", ("text", None, None)),
     (None, (None, None, None)), (["x"], (None, None, None)), ({"code": "x" * 100}, ("x" * 64, None, None))],
)  # fmt: skip
def test_error_fields_of_a_body(body: object, fields: ErrorFields) -> None:
    assert error_fields(body) == fields


def test_error_fields_of_an_sdk_model() -> None:
    """Fields an SDK model does not declare (a vendor's status_code) are pydantic extras."""
    from openai.types.responses import ResponseError

    model = ResponseError.construct(code="server_error", message="m", status_code=503)  # type: ignore[call-arg]
    assert error_fields(model) == ("server_error", None, 503)


def test_the_sdk_exception_carries_the_body() -> None:
    """An in-band error reaches the end as the SDK's exception: openai's APIError (code and type from the body) and
    anthropic's APIStatusError with status 200 (its body's error): both decide the class like the body would."""
    e = openai.APIError("m", _REQ, body={"message": "m", "type": "invalid_request_error", "code": "tool_use_failed"})
    assert error_class(names.ERROR, "tool_use_failed", None, e) == "bad_request"
    a = _anthropic_status(200, {"type": "error", "error": {"type": "vendor_error", "status_code": 529}})
    assert error_class(names.ERROR, "vendor_error", status_of(a), a) == "overloaded"
    # HTTP errors: the code hides nothing of the type either
    h = _openai_status(400, {"error": {"message": "m", "type": "invalid_request_error", "code": "tool_use_failed"}})
    assert error_class(HTTP, h.code, status_of(h), h) == "bad_request"
    h = _openai_status(502, {"error": {"message": "m", "type": "rate_limit_error", "code": "vendor"}})
    assert error_class(HTTP, h.code, status_of(h), h) == "rate_limited"


@pytest.mark.parametrize(
    ("code", "klass"),
    [  # Gemini's gRPC-style statuses and failed-generation finish reasons, Bedrock's exception types and stop reasons
     ("RESOURCE_EXHAUSTED", "rate_limited"), ("throttlingException", "rate_limited"),
     ("ThrottlingException", "rate_limited"), ("UNAVAILABLE", "overloaded"),
     ("serviceUnavailableException", "overloaded"), ("ServiceUnavailableException", "overloaded"),
     ("DEADLINE_EXCEEDED", "timeout"), ("modelTimeoutException", "timeout"), ("UNAUTHENTICATED", "auth"),
     ("PERMISSION_DENIED", "auth"), ("AccessDeniedException", "auth"), ("INVALID_ARGUMENT", "bad_request"),
     ("FAILED_PRECONDITION", "bad_request"), ("NOT_FOUND", "bad_request"), ("validationException", "bad_request"),
     ("ValidationException", "bad_request"), ("INTERNAL", "server_error"),
     ("internalServerException", "server_error"), ("modelStreamErrorException", "server_error"),
     ("MALFORMED_FUNCTION_CALL", "server_error"), ("MALFORMED_RESPONSE", "server_error"),
     ("malformed_model_output", "server_error"), ("malformed_tool_use", "server_error"),
     ("OTHER", "_OTHER"), ("UNEXPECTED_TOOL_CALL", "_OTHER")],
)  # fmt: skip
def test_gemini_and_bedrock_codes(code: str, klass: str) -> None:
    assert error_class(names.ERROR, code, None, None) == klass


def test_aiohttp_timeouts_are_timeouts_and_its_cuts_connections() -> None:
    """aiohttp's read and connect timeouts subclass its ClientConnectionError before TimeoutError: the timeout wins."""
    aiohttp = pytest.importorskip("aiohttp")
    assert exception_class(aiohttp.SocketTimeoutError()) == names.EC_TIMEOUT
    assert exception_class(aiohttp.ConnectionTimeoutError()) == names.EC_TIMEOUT
    assert exception_class(aiohttp.ClientPayloadError()) == names.EC_CONNECTION
    assert exception_class(aiohttp.ServerDisconnectedError()) == names.EC_CONNECTION
