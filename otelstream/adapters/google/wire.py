"""What a google-genai stream's request looks like to otelstream: its start (model, provider, server), its send
(``t_request``, the last attempt's), its answer (the moment a stream exists: before it an exception is an
``http_error``), and what an exception that ended it means.

The request is lazy: google-genai sends it on the caller's first pull, and again (automatic function calling,
automatic continuation) on later pulls. While the caller's generator pulls, the call is ``calls.CURRENT`` and
``sending``: the transport's send stamps ``t_request`` until the first answer is accepted (``bound``):

- httpx2 / httpx: their ``Client.send`` / ``AsyncClient.send``, patched by the HTTP-level observer, hand an SDK
  adapter's current call to ``request.http_send`` (no patch point of google-genai);
- aiohttp: ``ClientSession.request`` (public), patched here.

The answer: ``errors.APIError.raise_for_response`` / ``raise_for_async_response`` (public classmethods of
google-genai's error class), through which google-genai passes each attempt's response before it streams it: they
return for an accepted answer and raise the HTTP error otherwise. Without that patch point the first item reaching
the caller marks the stream as existing (an in-band error as the very first event then reads as ``http_error``).
Without any send hook (google-auth's ``requests`` transport, mTLS Vertex) ``t_request`` is unknown, never guessed:
one WARNING (``SEND_SEEN``), and the stream reports its times from the send as unknown.
"""

from __future__ import annotations

from typing import Any

from otelstream import _guard, names
from otelstream.adapters import _patch
from otelstream.adapters._patch import T_REQUEST_MEASURES, Fact, Patch
from otelstream.adapters.calls import CURRENT, RUNTIME, Call
from otelstream.adapters.exceptions import classify_common, is_cancel
from otelstream.adapters.request import header, server_of_url
from otelstream.core.protocols._fields import fields
from otelstream.core.report import StreamStart
from otelstream.names import EndReason

SCOPES = (_patch.GOOGLE, _patch.GOOGLE_ASYNC)

# checked where it is used (a live stream): the transport's send was seen before the answer
SEND_SEEN = Fact(
    "google.genai._api_client",
    "the transport's send (httpx/httpx2 Client.send, aiohttp ClientSession.request) precedes each answer",
    "call order",
    None,
    T_REQUEST_MEASURES,
    SCOPES,
)
# read once per stream, at its start: the client a Models / Chat works for, the model a Chat was created for
API_CLIENT = Fact(
    "google.genai.models",
    "Models._api_client, BaseApiClient.vertexai, ._http_options.base_url",
    "attribute",
    None,
    (),
    SCOPES,
)
CHAT_MODEL = Fact("google.genai.chats", "Chat._modules, Chat._model, Chat._config", "attribute", None, (), SCOPES)


def _is_vertex(api: Any, model: str | None, base_url: str | None) -> bool:
    if getattr(api, "vertexai", None):
        return True
    for text in (model, base_url):
        if text and "projects/" in text and "/locations/" in text:
            return True
    return bool(base_url and "aiplatform.googleapis.com" in base_url)


def _config_params(config: object) -> dict[str, Any]:
    f = fields(config)
    out: dict[str, Any] = {}
    value = f.get("max_output_tokens", f.get("maxOutputTokens"))
    if type(value) is int:
        out["request_max_tokens"] = value
    for key, camel, field in (("temperature", "temperature", "request_temperature"),
                              ("top_p", "topP", "request_top_p")):  # fmt: skip
        number = f.get(key, f.get(camel))
        if type(number) is float or type(number) is int:
            out[field] = float(number)
    count = f.get("candidate_count", f.get("candidateCount"))
    if type(count) is int:
        out["request_choice_count"] = count
    return out


def start_of(api: Any, model: object, config: object) -> StreamStart:
    """The stream's start, from the client it runs on and the call's ``model`` and ``config`` (once per stream)."""
    base_url = None
    try:
        base_url = getattr(getattr(api, "_http_options", None), "base_url", None)
    except Exception:  # a stand-in whose __getattr__ raises something else
        base_url = None
    base = base_url if isinstance(base_url, str) else None
    name = model[:256] if isinstance(model, str) else None
    host, port = server_of_url(base)
    return StreamStart(
        surface=names.GENERATE_CONTENT,
        provider=names.PROVIDER_VERTEX if _is_vertex(api, name, base) else names.PROVIDER_GEMINI,
        request_model=name,
        server_address=host,
        server_port=port,
        t_request_ns=RUNTIME.clock(),
        **_config_params(config),
    )


# --- the answer -------------------------------------------------------------------------------------------------
def answered(call: Call, response: Any) -> None:
    """An attempt's answer was accepted: from now on the stream exists (an exception is no longer ``http_error``),
    and the sends that follow (function calling, continuation) are not this stream's ``t_request``."""
    tracker = call.tracker
    call.bound = True
    if tracker.t_request == tracker.start.t_request_ns:  # no send hook saw the request leave: times unknown
        _patch.PATCHER.lacks(SEND_SEEN)
        tracker.unobserved = tracker.unobserved | frozenset(T_REQUEST_MEASURES)
    tracker.request_id = header(response, names.REQUEST_ID_HEADERS)


def _attempt(call: Call) -> None:
    call.attempts += 1
    call.tracker.retries = call.attempts - 1


def _ours() -> Call | None:
    call = CURRENT.get()
    return call if call is not None and not call.bound and call.tracker.surface == names.GENERATE_CONTENT else None


def _answer_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = _ours()
    if call is None:
        return wrapped(*args, **kwargs)
    with _guard.guard("google.answer"):
        _attempt(call)
    result = wrapped(*args, **kwargs)  # raises the HTTP error of a rejected attempt
    with _guard.guard("google.answer"):
        answered(call, args[0] if args else kwargs.get("response"))
    return result


async def _answer_run(call: Call, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = await wrapped(*args, **kwargs)
    with _guard.guard("google.answer"):
        answered(call, args[0] if args else kwargs.get("response"))
    return result


def _answer_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = _ours()
    if call is None:
        return wrapped(*args, **kwargs)
    with _guard.guard("google.answer"):
        _attempt(call)
    return _answer_run(call, wrapped, args, kwargs)


def _aiohttp_request(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``aiohttp.ClientSession.request``: google-genai awaits what it returns at once, so the request leaves now."""
    call = CURRENT.get()
    if call is not None and call.sending and not call.bound:
        with _guard.guard("google.send"):
            tracker = call.tracker
            tracker.t_request = tracker.t_last_ns = RUNTIME.clock()
    return wrapped(*args, **kwargs)


# --- what an exception means ------------------------------------------------------------------------------------
_api_error: type[BaseException] | None = None


def _api_error_class() -> type[BaseException]:
    global _api_error
    if _api_error is None:
        from google.genai import errors

        _api_error = errors.APIError
    return _api_error


def error_type(exc: BaseException) -> str | None:
    """An ``APIError``'s gRPC-style status (``RESOURCE_EXHAUSTED``), else its numeric code."""
    d = getattr(exc, "__dict__", None)
    if type(d) is not dict:
        return None
    status = d.get("status")
    if isinstance(status, str) and status:
        return status[:64]
    code = d.get("code")
    return str(code) if type(code) is int else None


def classify(exc: BaseException, bound: bool) -> tuple[str, str | None]:
    """How a stream that raised ended. Before an answer was accepted: ``http_error`` (a rejected request, a connection
    that failed before the headers), or ``cancel``. After it: an ``APIError`` is an in-band error (or a later hop's
    rejection), ``error`` with its status; a transport's failure (httpx2/httpx, aiohttp, a timeout) is
    ``transport_error``, its class decided from the exception's type."""
    if is_cancel(exc):
        return EndReason.CANCEL, None
    if not bound:
        return EndReason.HTTP_ERROR, error_type(exc)
    if isinstance(exc, _api_error_class()):
        return EndReason.ERROR, error_type(exc)
    common = classify_common(exc)
    if common is not None:
        return common
    return EndReason.TRANSPORT_ERROR, None  # aiohttp's payload and connection errors: their type decides the class


_ANSWER = (names.MEASURE_HTTP_ERRORS, names.MEASURE_RETRIES)
PATCHES = (
    Patch("google.genai.errors", "APIError.raise_for_response", _answer_sync, measures=_ANSWER,
          scopes=(_patch.GOOGLE,)),
    Patch("google.genai.errors", "APIError.raise_for_async_response", _answer_async, measures=_ANSWER,
          scopes=(_patch.GOOGLE_ASYNC,)),
    # without it an aiohttp stream's send is unseen: SEND_SEEN degrades that stream alone (httpx2 ones are seen)
    Patch("aiohttp.client", "ClientSession.request", _aiohttp_request, scopes=(_patch.GOOGLE_ASYNC,)),
)  # fmt: skip
