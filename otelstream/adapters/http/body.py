"""The HTTP-level observer's wrapper of a 2xx answer's byte stream: it hands the caller every chunk exactly as the
transport produced it, after feeding it to the stream's ``Observed`` (``decoding``). Ends: EOF (judged by the
protocol), an exception during a pull (``transport_error``, a cancellation ``abandoned``/cancel), the response closed
before the end (``abandoned``/close: the caller's ``close()``, a context exit, a ``break`` out of httpx2's
iterators), the response collected unclosed (``abandoned``/gc, ``calls.watch``), the idle fallback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from otelstream import _guard, names
from otelstream.adapters.body_kinds import wrap_body
from otelstream.adapters.calls import finish, watch
from otelstream.adapters.exceptions import is_cancel
from otelstream.adapters.http.decoding import Observed, inflater
from otelstream.adapters.request import header


def status_ok(response: Any) -> bool:
    status = getattr(response, "status_code", 0)
    return type(status) is int and 200 <= status < 300


def is_sse(response: Any) -> bool:
    value = header(response, ("content-type",)) or ""
    return value.split(";", 1)[0].strip().lower() == names.SSE_CONTENT_TYPE


def attach(obs: Observed, response: Any) -> None:
    """Wrap a 2xx answer's byte stream (once); a non-2xx answer is left to the end of the send."""
    if obs.wrapped or not status_ok(response):
        return
    coding = header(response, ("content-encoding",))
    if coding:
        try:
            obs.inflate = inflater(coding)
        except LookupError:
            return  # a coding the client did not advertise: it cannot decode the body either
    # of the body's byte-stream kind: the client reads and closes it by that kind
    wrapped = wrap_body(type(response).__module__.partition(".")[0], response.stream, _SyncBody, _AsyncBody, obs)
    if wrapped is None:
        return
    response.stream = wrapped
    obs.wrapped = True
    call = obs.call
    call.bound = True
    call.tracker.request_id = header(response, names.REQUEST_ID_HEADERS)
    watch(call, response)


def _iter_sync(body: Any, obs: Observed) -> Iterator[bytes]:
    tracker = obs.tracker
    clock = tracker.clock
    try:
        tracker.t_pull = clock()
        for chunk in body:
            try:
                obs.chunk(chunk)
            except Exception as exc:  # our bug: never changes what the caller gets (re-raised in strict mode)
                _guard.report("http_streams.chunk", exc)
            yield chunk
            if not tracker.t_pull:
                tracker.t_pull = clock()
    except GeneratorExit:
        raise  # the caller dropped the iterator: its close, or the response's collection, ends the stream
    except BaseException as exc:
        _ended_by(obs, exc)
        raise
    with _guard.guard("http_streams.eof"):
        obs.eof()


async def _iter_async(body: Any, obs: Observed) -> AsyncIterator[bytes]:
    tracker = obs.tracker
    clock = tracker.clock
    try:
        tracker.t_pull = clock()
        async for chunk in body:
            try:
                obs.chunk(chunk)
            except Exception as exc:
                _guard.report("http_streams.chunk", exc)
            yield chunk
            if not tracker.t_pull:
                tracker.t_pull = clock()
    except GeneratorExit:
        raise
    except BaseException as exc:
        _ended_by(obs, exc)
        raise
    with _guard.guard("http_streams.eof"):
        obs.eof()


def _ended_by(obs: Observed, exc: BaseException) -> None:
    with _guard.guard("http_streams.end"):
        if is_cancel(exc):
            finish(obs.call, "cancel")
        else:
            finish(obs.call, "transport_error")


def _closed(obs: Observed) -> None:
    """The response's byte stream is being closed: after the end (EOF, an error) nothing happens; before it, the
    caller stopped reading (httpx's own iteration closes only after our generator saw the end).

    One such close is not an abandoned answer: on Messages, after the ``message_delta`` that carries the final
    ``stop_reason``, nothing of the answer is left but the empty ``message_stop``, and clients that parse the SSE
    themselves stop there (litellm's sync streams do): the answer is judged by that stop reason."""
    with _guard.guard("http_streams.close"):
        tracker = obs.tracker
        if tracker.ended:
            return
        if obs.messages and tracker.finish_reasons and not tracker.saw_error():
            tracker.outcome_seen(names.COMPLETED, terminal=True)  # max_tokens & co. already ranked it incomplete
        finish(obs.call, "close")


class _Forward:
    """Forwards everything else to the wrapped body (httpx2 reads ``elapsed`` from it)."""

    _otelstream_body: Any = None
    _otelstream_obs: Any = None

    def __init__(self, body: Any, obs: Observed) -> None:
        self._otelstream_body = body
        self._otelstream_obs = obs

    def __getattr__(self, name: str) -> Any:
        body = self._otelstream_body
        if body is None:
            raise AttributeError(name)
        return getattr(body, name)


class _SyncBody(_Forward):
    def __iter__(self) -> Iterator[bytes]:
        return _iter_sync(self._otelstream_body, self._otelstream_obs)

    def close(self) -> None:
        _closed(self._otelstream_obs)
        self._otelstream_body.close()


class _AsyncBody(_Forward):
    def __aiter__(self) -> AsyncIterator[bytes]:
        return _iter_async(self._otelstream_body, self._otelstream_obs)

    async def aclose(self) -> None:
        _closed(self._otelstream_obs)
        await self._otelstream_body.aclose()


def read_already(obs: Observed, response: Any) -> None:
    """The per-hop patch point is missing and ``send`` read the body itself: feed it at once."""
    content = getattr(response, "_content", None)
    if type(content) is not bytes:
        return
    obs.call.bound = True
    obs.tracker.request_id = header(response, names.REQUEST_ID_HEADERS)
    obs.inflate = None  # the client decoded what it read
    obs.chunk(content)
    obs.eof()
