"""The mock server: a handler for the HTTP library's own ``MockTransport`` (httpx2's, or httpx's for openai 2.x)
that answers each request with the exchange the doctor planned for it (``bodies.Served``), found by a request header.

The body is produced frame by frame, as a server sends it; a transport failure is raised by the body itself, with the
HTTP library's own exception, where a real connection would raise it. No socket is opened.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from types import ModuleType
from typing import Any, Final

from otelstream.doctor.bodies import RESET, Served

CELL_HEADER: Final = "x-otelstream-doctor-cell"
_SSE_HEADERS: Final = {"content-type": "text/event-stream", "x-request-id": "req_doctor", "request-id": "req_doctor"}


def http_library(sdk: ModuleType) -> ModuleType:
    """The HTTP client library an SDK sends with, from its public ``DefaultHttpxClient`` (a subclass of that
    library's ``Client``)."""
    for cls in sdk.DefaultHttpxClient.__mro__:
        root = cls.__module__.partition(".")[0]
        if cls.__name__ == "Client" and root in ("httpx", "httpx2"):
            return sys.modules[root]
    raise LookupError(f"{sdk.__name__}.DefaultHttpxClient derives from no httpx / httpx2 Client")


def handler(http: ModuleType, plans: Mapping[str, Served], *, is_async: bool) -> Callable[[Any], Any]:
    """The MockTransport handler serving ``plans`` (by the request's ``CELL_HEADER``), with sync or async bodies."""

    def handle(request: Any) -> Any:
        served = plans[request.headers[CELL_HEADER]]
        if served.timeout_before_headers:
            raise http.ReadTimeout("read timed out (otelstream doctor)", request=request)
        if served.status != 200:
            return http.Response(served.status, content=json.dumps(served.error_body).encode(),
                                 headers={"content-type": "application/json"})  # fmt: skip
        body = _abody(http, served, request) if is_async else _body(http, served, request)
        return http.Response(200, headers=_SSE_HEADERS, content=body)

    return handle


def _failure(http: ModuleType, served: Served, request: Any) -> Exception:
    if served.fails == RESET:
        return http.ReadError("[Errno 104] Connection reset by peer (otelstream doctor)", request=request)  # type: ignore[no-any-return]
    return http.ReadTimeout("read timed out (otelstream doctor)", request=request)  # type: ignore[no-any-return]


def _body(http: ModuleType, served: Served, request: Any) -> Iterator[bytes]:
    yield from served.frames
    if served.fails is not None:
        raise _failure(http, served, request)


async def _abody(http: ModuleType, served: Served, request: Any) -> AsyncIterator[bytes]:
    for i, frame in enumerate(served.frames):
        if i == served.hold_before:
            served.holding.set()
            await asyncio.Event().wait()  # a server holding back its answer: only a cancellation ends this
        yield frame
    if served.fails is not None:
        raise _failure(http, served, request)
