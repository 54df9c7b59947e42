"""What an exception that ended a Bedrock stream means. No SDK class is imported: botocore's ``ClientError`` (and its
``EventStreamError``) is recognised by the shape its public ``response`` attribute has, ``{"Error": {"Code": …}}``,
and every other exception (urllib3's or aiohttp's reset and timeout, botocore's ``ReadTimeoutError``) is a transport
error whose class its type names."""

from __future__ import annotations

import asyncio
from typing import Any

from otelstream.names import EndReason


def is_cancel(exc: BaseException) -> bool:
    """The caller's task or program was cancelled or stopped (asyncio, trio by name, Ctrl-C, ``sys.exit()``)."""
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
        return True
    cls = type(exc)
    return cls.__name__ == "Cancelled" and cls.__module__.startswith("trio")


def error_code(exc: BaseException) -> str | None:
    """The service's error code a botocore ``ClientError`` carries (an exception message's type in the stream, or an
    HTTP error's ``x-amzn-ErrorType``), if any."""
    response = getattr(exc, "response", None)
    error = response.get("Error") if isinstance(response, dict) else None
    code = error.get("Code") if isinstance(error, dict) else None
    return code[:64] if isinstance(code, str) and code else None


def request_id(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    meta = response.get("ResponseMetadata") if isinstance(response, dict) else None
    value = meta.get("RequestId") if isinstance(meta, dict) else None
    return value[:128] if isinstance(value, str) and value else None


def classify(exc: BaseException) -> tuple[EndReason, str | None]:
    """An exception raised from the caller's pull: an exception message of the stream (``EventStreamError``, whose
    code is the message's exception type) is an in-band error of that type; cancellation is the caller's; anything
    else broke the transport (its class from its type: a timeout, a reset, a framing error)."""
    if is_cancel(exc):
        return EndReason.CANCEL, None
    if isinstance(exc, GeneratorExit):
        return EndReason.GC, None
    code = error_code(exc)
    if code is not None:
        return EndReason.ERROR, code
    return EndReason.TRANSPORT_ERROR, None


def first(value: Any, *keys: str) -> Any:
    """``value[keys[0]][keys[1]]…`` through dicts, None where one is missing."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value
