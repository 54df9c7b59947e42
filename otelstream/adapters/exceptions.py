"""What an exception that ended a stream means (``is_cancel``, ``classify_common``, ``error_type_of``, an SDK's own
tree by ``sdk_classifier``), and which client libraries' classes otelstream knows: ``httpx2`` when it is installed,
the legacy ``httpx`` (openai 2.x reads its streams with it) adopted the first time one of its responses or exceptions
is met (``adopt_httpx``)."""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
from collections.abc import Callable

from otelstream.names import EndReason

# the client libraries (top-level package names) whose bodies get the close hook and whose transport errors are known
ADOPTED: set[str] = set()
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = ()
_ADOPT_LOCK = threading.Lock()


def _adopt(lib: str) -> bool:
    """``httpx2`` or ``httpx``, when imported: the same body hooks and transport errors for its classes, once per
    process. False when it is not imported (neither need be installed: boto3 brings neither, google-genai's older
    releases httpx alone)."""
    module = sys.modules.get(lib)
    if module is None:
        return False
    global _TRANSPORT_ERRORS
    with _ADOPT_LOCK:
        if lib not in ADOPTED:
            _TRANSPORT_ERRORS = (*_TRANSPORT_ERRORS, module.TransportError, module.StreamError)
            ADOPTED.add(lib)
    return True


def adopt_httpx() -> bool:
    """The legacy ``httpx``, met in a response or an exception (see ``_adopt``)."""
    return _adopt("httpx")


try:  # openai and anthropic depend on it, and google-genai's newer releases; Bedrock's clients do not
    import httpx2  # noqa: F401
except ImportError:
    pass
else:
    _adopt("httpx2")


def is_cancel(exc: BaseException) -> bool:
    """The caller's task or program was cancelled or stopped: asyncio's cancellation, trio's (anyio on trio raises
    it too; checked by name, trio is not a dependency), Ctrl-C, ``sys.exit()``."""
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
        return True
    cls = type(exc)
    return cls.__name__ == "Cancelled" and cls.__module__.startswith("trio")


def classify_common(exc: BaseException) -> tuple[EndReason, str | None] | None:
    """The SDK-independent part: cancellation, transport and decode errors. None when undecided."""
    if is_cancel(exc):
        return EndReason.CANCEL, None
    if isinstance(exc, GeneratorExit):
        return EndReason.GC, None
    if isinstance(exc, ValueError):  # json.JSONDecodeError and friends: undecodable data (error class protocol)
        return EndReason.TRANSPORT_ERROR, None
    if isinstance(exc, _TRANSPORT_ERRORS):
        return EndReason.TRANSPORT_ERROR, None
    lib = type(exc).__module__.partition(".")[0]
    if lib in ("httpx", "httpx2") and lib not in ADOPTED and _adopt(lib):
        return classify_common(exc)
    return None


def error_type_of(exc: BaseException) -> str | None:
    """The provider's error code/type from an SDK exception (``code``, then ``type``), if it has one."""
    for attr in ("code", "type"):
        value = exc.__dict__.get(attr) if hasattr(exc, "__dict__") else None
        if isinstance(value, str) and value:
            return value[:64]
        if type(value) is int:  # releases before openai 3.14 keep a numeric ``code`` as the int the server sent
            return str(value)
    return None


Classify = Callable[[BaseException], "tuple[EndReason, str | None]"]


def sdk_classifier(
    package: str, base_error: str, fallback_type: Callable[[BaseException], str | None] | None = None
) -> Classify:
    """How a stream of an SDK whose exceptions are one tree (openai's, anthropic's: ``APIConnectionError`` and
    ``APIError`` under the SDK's ``base_error``) ended: a connection error → transport_error; an ``APIError`` →
    error, of the provider's code (``error_type_of``, else ``fallback_type``); then ``classify_common``; any other
    error of the SDK's → error; anything else → transport_error (not a provider code: the exception's type decides
    the error class). The classes are looked up at the first exception, when the SDK is imported."""
    errors: tuple[type[BaseException], type[BaseException], type[BaseException]] | None = None

    def classify(exc: BaseException) -> tuple[EndReason, str | None]:
        nonlocal errors
        if errors is None:
            sdk = importlib.import_module(package)
            errors = (sdk.APIConnectionError, sdk.APIError, getattr(sdk, base_error))
        conn_error, api_error, sdk_error = errors
        if isinstance(exc, conn_error):
            return EndReason.TRANSPORT_ERROR, None
        if isinstance(exc, api_error):
            found = error_type_of(exc)
            if found is None and fallback_type is not None:
                found = fallback_type(exc)
            return EndReason.ERROR, found
        common = classify_common(exc)
        if common is not None:
            return common
        if isinstance(exc, sdk_error):
            return EndReason.ERROR, None
        return EndReason.TRANSPORT_ERROR, None

    return classify

