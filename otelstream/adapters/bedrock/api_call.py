"""The call of a Bedrock runtime stream: botocore's ``BaseClient._make_api_call`` (aiobotocore's
``AioBaseClient._make_api_call``) for the operations ``ConverseStream`` and ``InvokeModelWithResponseStream`` of the
service ``bedrock-runtime``; every other call passes untouched after two string comparisons.

- The call begins there (span started on the caller's thread, current while botocore sends), with the request's
  ``modelId`` as the request model and the client's public ``meta.endpoint_url`` as the server.
- ``t_request`` is the send of the last attempt, taken from botocore's public event system: a ``before-send`` handler
  registered once per client emitter (``meta.events``), for the service only; each send counts an attempt
  (retries = attempts - 1). Without a send (a ``before-call`` handler answered) it stays at the call's beginning.
- When the call raises (``ClientError``: a 429, a 503; a failure before the headers) no stream exists: ``http_error``
  with the service's error code as the error type and the request id of the answer.
- When it returns, the ``EventStream`` in the answer (``stream`` / ``body``) is bound to the call: the caller holds it
  from now (its first pull measures consumer time from here), and its collection is ``gc``.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

from otelstream import _guard, names
from otelstream.adapters import _patch
from otelstream.adapters.bedrock.failures import error_code, first, is_cancel, request_id
from otelstream.adapters.calls import CURRENT, RUNTIME, Call, begin_call, bind_to, finish, watch
from otelstream.adapters.request import ParamKeys, request_params, server_of_url
from otelstream.core.report import StreamStart
from otelstream.names import EndReason

SERVICE = "bedrock-runtime"
CONVERSE_STREAM, INVOKE_STREAM = "ConverseStream", "InvokeModelWithResponseStream"
_STREAM_KEY = {CONVERSE_STREAM: "stream", INVOKE_STREAM: "body"}
_SEND_EVENT = f"before-send.{SERVICE}"  # hierarchical: every operation of the service
_HOOK_ID = "otelstream-t-request"
_MAX_BODY = 512 * 1024  # an invoke body parsed for its parameters; a larger one is not read
_REGIONS = frozenset({"us", "eu", "apac", "us-gov", "global", "jp", "au", "ca"})  # inference-profile prefixes

# the client emitters our send handler is registered on (once each; they live as long as their clients)
_HOOKED: weakref.WeakSet[Any] = weakref.WeakSet()


def family_of(model_id: str) -> str | None:
    """The model family a model id names (``anthropic.claude-…``, ``us.anthropic.claude-…``, a foundation-model or
    inference-profile ARN), or None (a provisioned model's ARN, a bare name)."""
    tail = model_id.rpartition("/")[2] if model_id.startswith("arn:") else model_id
    parts = tail.split(".")
    if len(parts) > 2 and parts[0] in _REGIONS:
        parts = parts[1:]
    return parts[0] if len(parts) > 1 else None


def _body(params: dict[str, Any]) -> dict[str, Any] | None:
    body = params.get("body")
    if isinstance(body, (bytes, bytearray, str)) and len(body) <= _MAX_BODY:
        try:
            found = json.loads(body)
        except (ValueError, RecursionError):
            return None
        return found if isinstance(found, dict) else None
    return None


# where each operation's request names the span's parameters: ConverseStream's ``inferenceConfig``, an Anthropic
# model's invoke body
_CONVERSE_PARAMS = ParamKeys(("maxTokens",), "temperature", "topP", None)
_INVOKE_PARAMS = ParamKeys(("max_tokens",), "temperature", "top_p", None)


def surface_of(operation: str, model_id: object, body: dict[str, Any] | None) -> str:
    """``converse`` for ConverseStream; for an invoke stream ``messages`` when the model is Anthropic's (its id names
    the family, or its body carries the ``anthropic_version`` Bedrock requires of Anthropic models), else
    ``converse`` (its chunks are then counted as an unsupported payload)."""
    if operation == CONVERSE_STREAM:
        return names.CONVERSE
    family = family_of(model_id) if isinstance(model_id, str) else None
    if family == "anthropic" or (body is not None and "anthropic_version" in body):
        return names.MESSAGES
    return names.CONVERSE


def _begin(client: Any, args: tuple[Any, ...], kwargs: dict[str, Any], scope: str) -> Call | None:
    operation = args[0] if args else kwargs.get("operation_name")
    if operation != CONVERSE_STREAM and operation != INVOKE_STREAM:
        return None
    meta = client.meta
    if meta.service_model.service_name != SERVICE:
        return None
    params = args[1] if len(args) > 1 else kwargs.get("api_params")
    if not isinstance(params, dict):
        return None
    events = meta.events
    if events not in _HOOKED:
        # public API: a handler that returns None leaves the send to botocore
        events.register(_SEND_EVENT, _before_send, unique_id=_HOOK_ID)
        _HOOKED.add(events)
    model = params.get("modelId")
    body = _body(params) if operation == INVOKE_STREAM else None
    if operation == CONVERSE_STREAM:
        extra = request_params(params.get("inferenceConfig"), _CONVERSE_PARAMS)
    else:
        extra = request_params(body, _INVOKE_PARAMS)
    host, port = server_of_url(meta.endpoint_url)
    start = StreamStart(
        surface=surface_of(operation, model, body),
        provider=names.PROVIDER_BEDROCK,
        request_model=model[:256] if isinstance(model, str) else None,
        server_address=host,
        server_port=port,
        t_request_ns=RUNTIME.clock(),
        **extra,
    )
    return begin_call(start, scopes=(scope,))


def _before_send(**kwargs: Any) -> None:
    """botocore's ``before-send``: an attempt of the call running on this thread / task leaves now."""
    call = CURRENT.get()
    if call is None or call.bound:
        return
    try:
        tracker = call.tracker
        tracker.t_request = tracker.t_last_ns = RUNTIME.clock()
        call.attempts += 1
        tracker.retries = call.attempts - 1
    except Exception as exc:
        _guard.report("bedrock.before_send", exc)


def _failed(call: Call, exc: BaseException) -> None:
    """The call raised before any stream existed."""
    try:
        if is_cancel(exc):
            finish(call, EndReason.CANCEL)
            return
        call.tracker.request_id = call.tracker.request_id or request_id(exc)
        finish(call, EndReason.HTTP_ERROR, error_code(exc), exc)
    except Exception as err:
        _guard.report("bedrock.api_call", err)


def _bind(call: Call, operation: object, result: Any) -> None:
    try:
        key = _STREAM_KEY.get(operation) if isinstance(operation, str) else None
        stream = result.get(key) if key is not None and isinstance(result, dict) else None
        tracker = call.tracker
        tracker.request_id = first(result, "ResponseMetadata", "RequestId")
        if stream is None or not hasattr(stream, "close"):
            finish(call, EndReason.EOF)  # an answer without a stream (a stub's): nothing was streamed
            return
        call.bound = True
        bind_to(stream, call)
        tracker.t_handed = tracker.clock()
        watch(call, stream)
    except Exception as exc:
        _guard.report("bedrock.bind", exc)


def _enter(call: Call) -> object:
    try:
        return call.listener.activate(call.tracker.handle)
    except Exception as exc:
        _guard.report("bedrock.activate", exc)
        return None


def _exit(call: Call, token: object) -> None:
    try:
        call.listener.deactivate(token)
    except Exception as exc:
        _guard.report("bedrock.activate", exc)


def _start(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], scope: str) -> Call | None:
    try:
        return _begin(instance, args, kwargs, scope)
    except Exception as exc:
        _guard.report("bedrock.api_call", exc)
        return None


def api_call_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = _start(instance, args, kwargs, _patch.BEDROCK)
    if call is None:
        return wrapped(*args, **kwargs)
    token = CURRENT.set(call)
    active = _enter(call)
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        _failed(call, exc)
        raise
    finally:
        _exit(call, active)
        CURRENT.reset(token)
    _bind(call, args[0] if args else kwargs.get("operation_name"), result)
    return result


async def api_call_async(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = _start(instance, args, kwargs, _patch.BEDROCK_ASYNC)
    if call is None:
        return await wrapped(*args, **kwargs)
    token = CURRENT.set(call)
    active = _enter(call)
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _failed(call, exc)
        raise
    finally:
        _exit(call, active)
        CURRENT.reset(token)
    _bind(call, args[0] if args else kwargs.get("operation_name"), result)
    return result
