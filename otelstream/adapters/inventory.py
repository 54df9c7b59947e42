"""Everything otelstream takes from other libraries beyond their public API, in one place: the patch points (each
adapter's ``PATCHES``, gathered here) and the ``FACTS`` below (private attributes read, classes checked against).

For each: the measures it feeds and the streams it serves (``measures`` / ``scopes``), the releases it was verified
on (``VERIFIED``, by library: the CI rows of ``.ci/sdk-matrix.sh`` and the newest), its canary test (``CANARY``),
and what is reported when it is missing or behaves differently: one WARNING naming it, and its measures unknown for
those streams (``StreamReport.unobserved``), never guessed. A patch point is checked when its module is imported; a
fact with ``holds`` then too, the others where they are used (``PATCHER.lacks``).

What is *not* here, on purpose: which of another library's functions is on the call stack, or in which order they
call each other. Who ended a stream is decided from our own observations (``close_ownership``); the call-order
facts that remain are listed below as facts, each with its canary.
"""

from __future__ import annotations

from types import ModuleType

from otelstream import names
from otelstream.adapters import _patch
from otelstream.adapters._patch import Fact, Patch
from otelstream.adapters.google import wire as _google_wire  # imports no SDK

_SDK_SCOPES = (_patch.OPENAI, _patch.OPENAI_ASYNC, _patch.ANTHROPIC, _patch.ANTHROPIC_ASYNC)
_OPENAI = (_patch.OPENAI, _patch.OPENAI_ASYNC)
_ANTHROPIC = (_patch.ANTHROPIC, _patch.ANTHROPIC_ASYNC)
_HTTP = (_patch.HTTP, _patch.HTTP_ASYNC)
_GOOGLE = (_patch.GOOGLE, _patch.GOOGLE_ASYNC)
_BEDROCK = (_patch.BEDROCK, _patch.BEDROCK_ASYNC)

ATTRIBUTE, CLASS, ORDER = "attribute", "class", "call order"


def _byte_stream_kinds(module: ModuleType) -> bool:
    return all(isinstance(getattr(module, kind, None), type) for kind in ("SyncByteStream", "AsyncByteStream"))


def _transport_errors(module: ModuleType) -> bool:
    return all(
        isinstance(cls, type) and issubclass(cls, Exception)
        for cls in (getattr(module, name, None) for name in ("TransportError", "StreamError"))
    )


def _response_body(module: ModuleType) -> bool:
    """A response keeps its body where the close hook wraps it: ``Response.stream``."""
    body = module.ByteStream(b"")
    return module.Response(200, stream=body).stream is body  # type: ignore[no-any-return]


def _request_fields(module: ModuleType) -> bool:
    """The request options the surface is classified from (url, method, JSON body, query)."""
    fields = getattr(module.FinalRequestOptions, "model_fields", {})
    return all(name in fields for name in ("url", "method", "json_data", "params"))


def _sse_fields(module: ModuleType) -> bool:
    """The SSE frames the tap keeps carry their ``event:`` name and ``data``."""
    sse = getattr(module, "ServerSentEvent", None)
    return sse is not None and all(isinstance(getattr(sse, name, None), property) for name in ("event", "data"))


# google-genai's, declared where they are used (adapters/google/wire.py)
GOOGLE_API_CLIENT, GOOGLE_CHAT_MODEL, GOOGLE_SEND_SEEN = (
    _google_wire.API_CLIENT,
    _google_wire.CHAT_MODEL,
    _google_wire.SEND_SEEN,
)


def _api_call_arguments(module: ModuleType) -> bool:
    """botocore's and aiobotocore's ``_make_api_call(operation_name, api_params)``: the operation and its
    parameters, read by position or name."""
    import inspect

    cls = getattr(module, "AioBaseClient", None) or getattr(module, "BaseClient", None)
    method = getattr(cls, "_make_api_call", None)
    if method is None:
        return False
    params = list(inspect.signature(method).parameters)
    return params[1:3] == ["operation_name", "api_params"]


def _iter_per_call(module: ModuleType) -> bool:
    """``EventStream.__iter__`` (``AioEventStream.__anext__``) is a generator function: each ``iter()`` makes a new
    generator over the stream's one reader, so a caller's ``break`` closes that generator, not the stream."""
    import inspect

    cls = getattr(module, "AioEventStream", None) or getattr(module, "EventStream", None)
    if cls is None:
        return False
    if cls.__name__ == "AioEventStream":
        return inspect.isasyncgenfunction(inspect.unwrap(cls.__anext__))
    return inspect.isgeneratorfunction(inspect.unwrap(cls.__iter__))


# checked on the live object where it is used (an instance attribute): ``openai.sse._late_bind``
OPENAI_STREAM_ITERATOR = Fact(
    "openai._streaming", "Stream._iterator", ATTRIBUTE, None, (names.MEASURE_STREAM,), _OPENAI
)

FACTS: tuple[Fact, ...] = (
    # the body's kinds: our body wrappers subclass them (the Response reads and closes only a body of its kind)
    Fact("httpx2", "SyncByteStream, AsyncByteStream", CLASS, _byte_stream_kinds,
         (names.MEASURE_CALLER_CLOSE,), (*_SDK_SCOPES, *_HTTP)),
    Fact("httpx", "SyncByteStream, AsyncByteStream", CLASS, _byte_stream_kinds,
         (names.MEASURE_CALLER_CLOSE,), (*_OPENAI, *_HTTP)),
    Fact("httpx2", "Response.stream", ATTRIBUTE, _response_body, (names.MEASURE_CALLER_CLOSE,), (*_SDK_SCOPES, *_HTTP)),
    Fact("httpx", "Response.stream", ATTRIBUTE, _response_body, (names.MEASURE_CALLER_CLOSE,), (*_OPENAI, *_HTTP)),
    # a reset or a timeout told from other failures (error classes connection / timeout)
    Fact("httpx2", "TransportError, StreamError", CLASS, _transport_errors,
         (names.MEASURE_ERROR_CLASS,), (*_SDK_SCOPES, *_HTTP)),
    Fact("httpx", "TransportError, StreamError", CLASS, _transport_errors,
         (names.MEASURE_ERROR_CLASS,), (*_OPENAI, *_HTTP)),
    # the surface of a request, from the SDK's request options: without it no stream is recognised
    Fact("openai._models", "FinalRequestOptions.url, .method, .json_data, .params", ATTRIBUTE, _request_fields,
         (names.MEASURE_STREAM,), _OPENAI),
    Fact("anthropic._models", "FinalRequestOptions.url, .method, .json_data, .params", ATTRIBUTE, _request_fields,
         (names.MEASURE_STREAM,), _ANTHROPIC),
    # what the _iter_events tap reads of the frames the SDK drops: [DONE], pings, the event name
    Fact("openai._streaming", "ServerSentEvent.event, .data", ATTRIBUTE, _sse_fields,
         (names.MEASURE_DONE_SENTINEL, names.MEASURE_EVENT_NAMES), _OPENAI),
    Fact("anthropic._streaming", "ServerSentEvent.event, .data", ATTRIBUTE, _sse_fields,
         (names.MEASURE_KEEPALIVES,), _ANTHROPIC),
    OPENAI_STREAM_ITERATOR,
    # checked by the canary tests only: what each feeds degrades as stated, with no guess
    # a Stream built outside a patched request (by hand, or a request entry this release lacks): its request options
    # give the surface; without them it is not observed (as any stream of an unknown surface)
    Fact("openai._streaming", "Stream._options, Stream._client", ATTRIBUTE, None, (names.MEASURE_STREAM,), _OPENAI),
    Fact("anthropic._streaming", "Stream._options, Stream._client", ATTRIBUTE, None, (names.MEASURE_STREAM,),
         _ANTHROPIC),
    # a stream whose request was sent instrumented and whose Stream is built after uninstrument() is observed late
    # by setting the generator anthropic 2.x builds lazily (1.x builds it at once: then it is left alone)
    Fact("anthropic._streaming", "Stream._iterator", ATTRIBUTE, None, (), _ANTHROPIC),
    # otelstream.report_of() of a helper's stream finds the SDK Stream inside it (without it: None)
    Fact("openai.lib.streaming", "ChatCompletionStream._raw_stream, ResponseStream._raw_stream", ATTRIBUTE, None,
         (), _OPENAI),
    Fact("anthropic.lib.streaming", "MessageStream._raw_stream", ATTRIBUTE, None, (), _ANTHROPIC),
    # --- the call-order facts the adapters still rely on (close_ownership, observing's tap) ---
    # the SDK closes the response itself only inside a pull (its generator's own finally) or in its stream's
    # close(): a close of the body while no pull runs is the caller's
    Fact("openai._streaming", "Stream.__stream__ closes the response only inside a pull", ORDER, None,
         (names.MEASURE_CALLER_CLOSE,), _OPENAI),
    Fact("anthropic._streaming", "Stream.__stream__ closes the response only inside a pull", ORDER, None,
         (names.MEASURE_CALLER_CLOSE,), _ANTHROPIC),
    # the HTTP library's own iteration of a body closes it only after the end or a failed read reached our reader
    Fact("httpx2", "Response.iter_bytes closes the body after its end was read", ORDER, None,
         (names.MEASURE_CALLER_CLOSE,), (*_SDK_SCOPES, *_HTTP)),
    # the item the SDK yields comes from the latest SSE frame it read (the event: name handed with it)
    Fact("openai._streaming", "Stream.__stream__ builds each item from the latest frame", ORDER, None,
         (names.MEASURE_EVENT_NAMES,), _OPENAI),
    # openai stops reading at data: [DONE]: it is the last frame read (looked for there once, at the end)
    Fact("openai._streaming", "Stream.__stream__ stops reading at [DONE]", ORDER, None,
         (names.MEASURE_DONE_SENTINEL,), _OPENAI),
    # pings: anthropic builds no item from an `event: ping` frame (counted at the tap), openai yields one (counted
    # by the tracker as it classifies the item)
    Fact("anthropic._streaming", "Stream.__stream__ skips event: ping frames", ORDER, None,
         (names.MEASURE_KEEPALIVES,), _ANTHROPIC),
    Fact("openai._streaming", "Stream.__stream__ yields event: ping frames", ORDER, None,
         (names.MEASURE_KEEPALIVES,), _OPENAI),
    # the HTTP-level observer: a body already read into memory is replayed from it (without it: read as a stream)
    Fact("httpx2", "Response._content", ATTRIBUTE, None, (), _HTTP),
    # WebSocket mode: the server address, the caller's close told from a drop, a reconnect under way or possible, and
    # a session lane's connection and stream id
    Fact("openai._websocket_connection",
         "WebSocketConnectionBase._connection.remote_address, ._intentionally_closed, ._is_reconnecting, "
         "._on_reconnecting, ._make_ws", ATTRIBUTE, None, (names.MEASURE_CALLER_CLOSE,), (_patch.OPENAI_WEBSOCKET,)),
    # Bedrock (botocore / aiobotocore): the private call entry's arguments; the iteration's shape (a break closes one
    # generator, not the stream: no end is reported at it); the async iteration goes through __anext__ (__aiter__
    # returns self.__anext__(): without it the async pulls are not observed)
    Fact("botocore.client", "BaseClient._make_api_call(operation_name, api_params)", ATTRIBUTE, _api_call_arguments,
         (names.MEASURE_STREAM,), (_patch.BEDROCK,)),
    Fact("aiobotocore.client", "AioBaseClient._make_api_call(operation_name, api_params)", ATTRIBUTE,
         _api_call_arguments, (names.MEASURE_STREAM,), (_patch.BEDROCK_ASYNC,)),
    Fact("botocore.eventstream", "EventStream.__iter__ makes a generator per iter() over one reader", ORDER,
         _iter_per_call, (names.MEASURE_CALLER_CLOSE,), (_patch.BEDROCK,)),
    Fact("aiobotocore.eventstream", "AioEventStream.__aiter__ returns self.__anext__(), a generator per call", ORDER,
         _iter_per_call, (names.MEASURE_CALLER_CLOSE,), (_patch.BEDROCK_ASYNC,)),
    # the exception the iteration raises at an exception message carries its type as response["Error"]["Code"]
    # (ClientError's documented shape; checked by the canary): without it the in-band error's type is unknown
    Fact("botocore.exceptions", "EventStreamError.response['Error']['Code'] is the exception message's type", ORDER,
         None, (names.MEASURE_ERROR_CLASS,), _BEDROCK),
    Fact("openai.lib.responses_websocket._session", "ResponsesWebSocketLane._session.connection, ._state.stream_id",
         ATTRIBUTE, None, (names.MEASURE_STREAM,), (_patch.OPENAI_WEBSOCKET,)),
    # google-genai (adapters/google): the client and model a stream's start reads (without them: no server address,
    # provider gcp.gemini unless the model or URL names a Vertex resource, no request model for a chat)
    GOOGLE_API_CLIENT,
    GOOGLE_CHAT_MODEL,
    # t_request at the transport's send: checked on each stream when its answer is accepted (WARNING once, that
    # stream's times from the send unknown)
    GOOGLE_SEND_SEEN,
    # a chat's stream runs the models' stream method inside its own pulls (left alone there: one report)
    Fact("google.genai.chats", "Chat.send_message_stream pulls Models.generate_content_stream inside its pulls",
         ORDER, None, (), _GOOGLE),
    # each attempt's answer passes APIError.raise_for_response / raise_for_async_response before it is streamed
    # (without it: the first item marks the stream as existing; an in-band error as the first event is http_error)
    Fact("google.genai._api_client", "each streamed answer passes APIError.raise_for_(async_)response", ORDER, None,
         (names.MEASURE_HTTP_ERRORS, names.MEASURE_RETRIES), _GOOGLE),
)  # fmt: skip

# the releases each library's facts were verified on: the rows of .ci/sdk-matrix.sh, and the newest CI resolves
VERIFIED = {
    "openai": "2.31.0, 2.42.0, 2.54.0, 3.0.0, 3.32.0, 3.63.0",
    "anthropic": "1.0.0, 1.9.0, 1.17.0, 2.0.0, 2.7.0, 2.17.0",
    "httpx2": "2.16.2, 2.17.0",
    "httpx": "0.28.1, 0.29.0",
    "google-genai": "1.10.0, 1.50.0, 3.6.1",
    "aiohttp": "3.14.5",
    "botocore": "1.43.0, 1.43.117, 1.44.18 (boto3 alike; async: 1.43.117 under aiobotocore)",
    "aiobotocore": "3.10.0",
}
# the canary tests: each fact checked on the installed release, each patch point resolved and renamed
CANARY = "tests/reliability/test_inventory.py"


def patches() -> list[Patch]:
    """Every patch point the adapters apply."""
    # importing the adapter modules imports no SDK: the SDKs are only touched from post-import hooks
    from otelstream.adapters.anthropic import sse as anthropic_sse
    from otelstream.adapters.bedrock import patch_points as bedrock
    from otelstream.adapters.google import streams as google_streams
    from otelstream.adapters.http import streams as http_streams
    from otelstream.adapters.openai import sse as openai_sse
    from otelstream.adapters.openai import websocket as openai_ws

    return [
        *openai_sse.PATCHES,
        *anthropic_sse.PATCHES,
        *openai_ws.PATCHES,
        *http_streams.PATCHES,
        *google_streams.PATCHES,
        *bedrock.PATCHES,
    ]
