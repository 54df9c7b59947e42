"""A release that renamed a method otelstream patches (issue 21, defect 2): the application is unaffected, otelstream
logs one WARNING per missing patch point naming it and the measures it feeds, and every dependent measure is then
absent (or the surface not observed at all), never wrong.

Each test renames the SDK's own method before ``instrument()`` (``renames.py``: the old name is gone, the SDK's
callers are recompiled from its source to call the new one), streams through the real SDK from the scripted server
on 127.0.0.1, and checks the WARNING (once across two ``instrument()`` cycles), the span and the metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import anthropic._base_client
import anthropic._streaming
import httpx2
import openai
import openai._base_client
import openai._streaming
import pytest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otelstream import cli, names
from otelstream.adapters import _patch
from tests.reliability.renames import Rename, rename
from tests.support import bodies
from tests.support.instrumented import Instrumented, instrumented
from tests.support.scripted_server import SCRIPT_HEADER, ScriptedServer
from tests.support.sdk_features import (
    ANTHROPIC_REQUEST_BELOW_PUBLIC,
    ANTHROPIC_STREAM_STARTER,
    OPENAI_AUTH_RETRY_MODULE,
    OPENAI_HTTP,
    release_warning,
)
from tests.support.self_check import fresh_self_check, self_check_warnings, wait_for_self_check

MSGS: Any = [{"role": "user", "content": "x"}]
CHAT = bodies.chat("ok")  # ... finish_reason stop, a usage chunk, data: [DONE]
MESSAGES = bodies.messages("keepalive")  # with an `event: ping` (and a comment line)
T_REQUEST = (names.MEASURE_TIME_TO_FIRST_EVENT, names.MEASURE_TIME_TO_FIRST_DELTA, names.MEASURE_DURATION)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer().start()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def warned(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    """The missing-patch-point WARNINGs logged during the test (the once-per-process memory is reset around it), but
    for the one an older release always gets."""
    _patch.PATCHER._warned.clear()
    caplog.set_level(logging.WARNING, logger="otelstream")
    yield lambda: [
        m
        for r in caplog.records
        if r.levelno == logging.WARNING and "patch point" in (m := r.getMessage()) and not release_warning(m)
    ]
    _patch.PATCHER._warned.clear()


class _Starts(SpanProcessor):
    """Counts spans started: a span started and never ended is never exported, but it is not "not observed"."""

    def __init__(self) -> None:
        self.started = 0

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.started += 1


@contextlib.contextmanager
def _instrumented_twice() -> Iterator[Instrumented]:
    """Two instrument() cycles (the second must not warn again); the second one's context is returned."""
    with instrumented():
        pass
    with instrumented() as inst:
        inst.starts = _Starts()  # type: ignore[attr-defined]
        inst.tracer_provider.add_span_processor(inst.starts)  # type: ignore[attr-defined]
        yield inst


def _openai(server: ScriptedServer, is_async: bool = False, **kw: Any) -> Any:
    cls: Any = openai.AsyncOpenAI if is_async else openai.OpenAI
    http = OPENAI_HTTP.AsyncClient() if is_async else OPENAI_HTTP.Client()
    return cls(api_key="k", base_url=server.base_url + "/v1", http_client=http, **{"max_retries": 0, **kw})


def _anthropic(server: ScriptedServer, is_async: bool = False, **kw: Any) -> Any:
    cls: Any = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
    http = httpx2.AsyncClient() if is_async else httpx2.Client()
    return cls(api_key="k", base_url=server.base_url, http_client=http, **{"max_retries": 0, **kw})


def _chat(server: ScriptedServer, is_async: bool = False, fail_first: int = 0, **kw: Any) -> list[Any]:
    """One chat stream read to its end, as the application reads it; returns what the caller got."""
    headers = {SCRIPT_HEADER: server.add(CHAT, fail_first=fail_first)}
    client = _openai(server, is_async, **kw)
    if not is_async:
        with client.chat.completions.create(model="gpt-test", messages=MSGS, stream=True, extra_headers=headers) as s:
            return list(s)

    async def go() -> list[Any]:
        s = await client.chat.completions.create(model="gpt-test", messages=MSGS, stream=True, extra_headers=headers)
        async with s:
            return [item async for item in s]

    return asyncio.run(go())


def _messages(server: ScriptedServer, is_async: bool = False, fail_first: int = 0, **kw: Any) -> list[Any]:
    headers = {SCRIPT_HEADER: server.add(MESSAGES, fail_first=fail_first)}
    client = _anthropic(server, is_async, **kw)
    if not is_async:
        with client.messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True,
                                    extra_headers=headers) as s:  # fmt: skip
            return list(s)

    async def go() -> list[Any]:
        s = await client.messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True,
                                         extra_headers=headers)  # fmt: skip
        async with s:
            return [item async for item in s]

    return asyncio.run(go())


def _one_span(inst: Instrumented) -> dict[str, Any]:
    gc.collect()  # a false abandoned/gc report would come from here
    spans: list[ReadableSpan] = inst.finished()
    assert len(spans) == 1, [s.name for s in spans]
    return dict(spans[0].attributes or {})


def _assert_warning(messages: list[str], point: str, measures: tuple[str, ...]) -> None:
    mine = [m for m in messages if f"patch point {point} is missing" in m]
    assert len(mine) == 1, messages
    for measure in measures:
        assert measure in mine[0], (measure, mine[0])


def _assert_unknown(attrs: dict[str, Any], inst: Instrumented, measures: tuple[str, ...]) -> None:
    """The span carries none of the unknown measures' values and names them; their metrics were not recorded."""
    keys = {
        names.MEASURE_TIME_TO_FIRST_EVENT: names.ATTR_TIME_TO_FIRST_EVENT,
        names.MEASURE_TIME_TO_FIRST_DELTA: names.ATTR_RESPONSE_TTFC,
        names.MEASURE_RETRIES: names.ATTR_RETRIES,
        names.MEASURE_KEEPALIVES: names.ATTR_KEEPALIVES,
    }
    for measure in measures:
        if measure in keys:
            assert keys[measure] not in attrs, (measure, attrs)
    families = {
        names.MEASURE_TIME_TO_FIRST_EVENT: names.PROM_TIME_TO_FIRST_EVENT,
        names.MEASURE_TIME_TO_FIRST_DELTA: names.PROM_TIME_TO_FIRST_CHUNK,
        names.MEASURE_DURATION: names.PROM_OPERATION_DURATION,
    }
    for measure in measures:
        if measure in families:
            assert inst.sample(families[measure] + "_count") == 0, measure
    if names.MEASURE_TIME_TO_FIRST_EVENT in measures:  # the longest wait does not rest on t_request: still there
        assert inst.sample(names.PROM_MAX_WAIT + "_count") == 1
    assert inst.streams_total(outcome=names.COMPLETED) == 1
    assert set(attrs[names.ATTR_UNOBSERVED]) == set(measures)


def _assert_not_observed(inst: Instrumented) -> None:
    """No span started (none open, none exported: no false abandoned/gc later) and nothing counted."""
    gc.collect()
    assert inst.starts.started == 0  # type: ignore[attr-defined]
    assert inst.sample(names.PROM_STREAMS_ACTIVE) == 0
    assert inst.finished() == []
    assert inst.streams_total() == 0


# `otelstream doctor` on the renamed release: exit 1, the patch point named, the cells of the streams it
# serves not holding (and only those).
OPENAI_SEND_POINTS = ("openai._base_client.SyncAPIClient._send_request", "openai._client.OpenAI._send_request")


def _doctor_json(surface: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["doctor", "--json", "--surface", surface])
    doc: dict[str, Any] = json.loads(out.getvalue())
    assert code == (0 if doc["ok"] else 1)
    return doc


def _doctor_text(surface: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["doctor", "--surface", surface]) == 1
    return out.getvalue()


def _doctor(surface: str, points: tuple[str, ...], mode: str) -> dict[str, Any]:
    doc = _doctor_json(surface)
    assert doc["ok"] is False
    assert sorted(p["point"] for p in doc["missing_patch_points"]) == sorted(points)
    failing = [c for c in doc["cells"] if not c["ok"]]
    assert failing and {c["mode"] for c in failing} == {mode}, failing
    return doc


def _rename_openai_send(mp: pytest.MonkeyPatch) -> None:
    """The sync send path: the base client's ``_send_request`` and ``OpenAI``'s override of it (the auth retry)."""
    C = openai._base_client.SyncAPIClient
    if OPENAI_AUTH_RETRY_MODULE:
        auth_retry: tuple[Any, str] = (importlib.import_module("openai.lib._client_auth"), "sync_send_with_auth_retry")
    else:
        auth_retry = (openai.OpenAI, "_send_with_auth_retry")
    callers = ((C, "request"), auth_retry)
    rename(mp, Rename((C, openai.OpenAI), "_send_request", "_transmit", callers))


def _rename_anthropic_attempt(mp: pytest.MonkeyPatch) -> None:
    C = anthropic._base_client.SyncAPIClient
    caller = "_request" if ANTHROPIC_REQUEST_BELOW_PUBLIC else "request"
    rename(mp, Rename((C,), "_attempt_request", "_attempt", ((C, caller), (C, "_build_middleware_chain"))))


# --- openai ------------------------------------------------------------------------------------------------
def test_openai_iter_events_renamed_no_false_missing_done(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, warned: Callable[[], list[str]]
) -> None:
    S = openai._streaming.Stream
    rename(monkeypatch, Rename((S,), "_iter_events", "_iter_sse", ((S, "__stream__"),)))
    with _instrumented_twice() as inst:
        items = _chat(server)
        attrs = _one_span(inst)
    assert len(items) == len(CHAT) - 1  # the application is unaffected
    measures = (names.MEASURE_DONE_SENTINEL, names.MEASURE_EVENT_NAMES)
    _assert_warning(warned(), "openai._streaming.Stream._iter_events", measures)
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED
    assert inst.sample("otelstream_stream_anomalies_total", kind=names.ANOM_MISSING_DONE) == 0
    assert set(attrs[names.ATTR_UNOBSERVED]) == set(measures)
    assert attrs[names.ATTR_RESPONSE_TTFC] > 0  # what does not depend on the tap is still measured
    out = _doctor_text(names.CHAT_COMPLETIONS)
    assert "MISSING patch point openai._streaming.Stream._iter_events (unknown: done_sentinel, event_names" in out
    _doctor(names.CHAT_COMPLETIONS, ("openai._streaming.Stream._iter_events",), "sync")


def test_openai_request_entry_renamed_t_request_measures_unknown(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, warned: Callable[[], list[str]]
) -> None:
    C = openai._base_client.SyncAPIClient
    rename(monkeypatch, Rename((C,), "request", "perform", ((C, "post"),)))
    with _instrumented_twice() as inst:
        items = _chat(server)
        attrs = _one_span(inst)
    assert len(items) == len(CHAT) - 1
    measures = (*T_REQUEST, names.MEASURE_RETRIES, names.MEASURE_HTTP_ERRORS)
    _assert_warning(warned(), "openai._base_client.SyncAPIClient.request", measures)
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED
    _assert_unknown(attrs, inst, measures)
    _doctor(names.CHAT_COMPLETIONS, ("openai._base_client.SyncAPIClient.request",), "sync")


def test_openai_send_path_renamed_retries_unknown(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, warned: Callable[[], list[str]]
) -> None:
    _rename_openai_send(monkeypatch)
    with _instrumented_twice() as inst:
        items = _chat(server, fail_first=1, max_retries=1)  # one 503, retried after a back-off
        attrs = _one_span(inst)
    assert len(items) == len(CHAT) - 1
    measures = (*T_REQUEST, names.MEASURE_RETRIES)
    for point in ("openai._base_client.SyncAPIClient._send_request", "openai._client.OpenAI._send_request"):
        _assert_warning(warned(), point, measures)
    assert len(warned()) == 2
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED
    _assert_unknown(attrs, inst, measures)
    _doctor(names.CHAT_COMPLETIONS, OPENAI_SEND_POINTS, "sync")


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_send_path_renamed_raw_response_reported_once(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, warned: Callable[[], list[str]], sdk: str
) -> None:
    """The send hook also names the call on the request, where the Stream that ``.parse()`` builds later finds it:
    without it that Stream would start a second call, and the first would end as a false abandoned (close)."""
    (_rename_openai_send if sdk == "openai" else _rename_anthropic_attempt)(monkeypatch)
    with _instrumented_twice() as inst:
        if sdk == "openai":
            headers = {SCRIPT_HEADER: server.add(CHAT)}
            raw = _openai(server).chat.completions.with_raw_response.create(
                model="gpt-test", messages=MSGS, stream=True, extra_headers=headers
            )
        else:
            headers = {SCRIPT_HEADER: server.add(MESSAGES)}
            raw = _anthropic(server).messages.with_raw_response.create(
                model="claude-test", max_tokens=5, messages=MSGS, stream=True, extra_headers=headers
            )
        with raw.parse() as stream:
            items = list(stream)
        del raw, stream
        attrs = _one_span(inst)
    assert items
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED
    assert inst.streams_total() == 1
    if sdk == "openai":
        _doctor(names.CHAT_COMPLETIONS, OPENAI_SEND_POINTS, "sync")
    else:
        _doctor(names.MESSAGES, ("anthropic._base_client.SyncAPIClient._attempt_request",), "sync")


def _rename_stream_lifecycle(mp: pytest.MonkeyPatch, cls: type, with_iterator: bool) -> None:
    rename(mp, Rename((cls,), "__stream__", "_events", ((cls, "__init__"),)))
    if with_iterator:  # the instance attribute the late binding would look for, renamed too
        step = "__anext__" if cls is openai._streaming.AsyncStream else "__next__"
        loop = "__aiter__" if cls is openai._streaming.AsyncStream else "__iter__"
        rename(mp, Rename((), "_iterator", "_gen", ((cls, "__init__"), (cls, step), (cls, loop))))


@pytest.mark.parametrize("with_iterator", [False, True], ids=["__stream__", "__stream__+_iterator"])
def test_openai_sync_stream_lifecycle_renamed_not_observed(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, warned: Callable[[], list[str]], with_iterator: bool
) -> None:
    _rename_stream_lifecycle(monkeypatch, openai._streaming.Stream, with_iterator)
    with _instrumented_twice() as inst:
        items = _chat(server)
        _assert_not_observed(inst)
        async_items = _chat(server, is_async=True)  # the async surface is untouched
        attrs = _one_span(inst)
    assert len(items) == len(async_items) == len(CHAT) - 1
    _assert_warning(warned(), "openai._streaming.Stream.__stream__", ("not observed at all",))
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED
    assert names.ATTR_UNOBSERVED not in attrs
    doc = _doctor(names.CHAT_COMPLETIONS, ("openai._streaming.Stream.__stream__",), "sync")
    assert all(c["problem"] == "no report" for c in doc["cells"] if c["mode"] == "sync")


@pytest.mark.parametrize("with_iterator", [False, True], ids=["__stream__", "__stream__+_iterator"])
def test_openai_async_stream_lifecycle_renamed_not_observed(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, warned: Callable[[], list[str]], with_iterator: bool
) -> None:
    _rename_stream_lifecycle(monkeypatch, openai._streaming.AsyncStream, with_iterator)
    with _instrumented_twice() as inst:
        items = _chat(server, is_async=True)
        _assert_not_observed(inst)
        _chat(server)  # the sync surface is untouched
        attrs = _one_span(inst)
    assert len(items) == len(CHAT) - 1
    _assert_warning(warned(), "openai._streaming.AsyncStream.__stream__", ("async streams are not observed",))
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED
    doc = _doctor(names.CHAT_COMPLETIONS, ("openai._streaming.AsyncStream.__stream__",), "async")
    assert all(c["problem"] == "no report" for c in doc["cells"] if c["mode"] == "async")


# --- anthropic ---------------------------------------------------------------------------------------------
def test_anthropic_iter_events_renamed_keepalives_unknown(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, warned: Callable[[], list[str]]
) -> None:
    S = anthropic._streaming.Stream
    rename(monkeypatch, Rename((S,), "_iter_events", "_iter_sse", ((S, "__stream__"),)))
    with _instrumented_twice() as inst:
        items = _messages(server)
        attrs = _one_span(inst)
    assert len(items) == 7  # the ping is the SDK's to skip
    _assert_warning(warned(), "anthropic._streaming.Stream._iter_events", (names.MEASURE_KEEPALIVES,))
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED
    _assert_unknown(attrs, inst, (names.MEASURE_KEEPALIVES,))
    _doctor(names.MESSAGES, ("anthropic._streaming.Stream._iter_events",), "sync")


def test_anthropic_request_entry_renamed_its_public_request_serves(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, warned: Callable[[], list[str]]
) -> None:
    """Without ``_request`` (anthropic 1.0-1.13 never had it) the patch falls back to ``request()``, the same choke
    point one level up: no WARNING, everything measured, one span."""
    C = anthropic._base_client.SyncAPIClient
    if ANTHROPIC_REQUEST_BELOW_PUBLIC:  # else the installed release is already the one without it
        rename(monkeypatch, Rename((C,), "_request", "_perform", ((C, "request"),)))
    with _instrumented_twice() as inst:
        items = _messages(server)
        attrs = _one_span(inst)
    assert len(items) == 7
    assert warned() == []
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED
    assert attrs[names.ATTR_RETRIES] == 0 and attrs[names.ATTR_RESPONSE_TTFC] > 0
    assert names.ATTR_UNOBSERVED not in attrs
    assert attrs[names.ATTR_KEEPALIVES] == 2  # the body's `event: ping` and its comment line
    doc = _doctor_json(names.MESSAGES)
    assert doc["missing_patch_points"] == []
    assert doc["ok"] is True and [c for c in doc["cells"] if not c["ok"]] == []


def test_anthropic_attempt_renamed_retries_unknown(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, warned: Callable[[], list[str]]
) -> None:
    _rename_anthropic_attempt(monkeypatch)
    with _instrumented_twice() as inst:
        items = _messages(server, fail_first=1, max_retries=1)
        attrs = _one_span(inst)
    assert len(items) == 7
    measures = (*T_REQUEST, names.MEASURE_RETRIES)
    _assert_warning(warned(), "anthropic._base_client.SyncAPIClient._attempt_request", measures)
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED
    _assert_unknown(attrs, inst, measures)
    _doctor(names.MESSAGES, ("anthropic._base_client.SyncAPIClient._attempt_request",), "sync")


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_anthropic_stream_lifecycle_renamed_not_observed(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, warned: Callable[[], list[str]], is_async: bool
) -> None:
    S = anthropic._streaming.AsyncStream if is_async else anthropic._streaming.Stream
    rename(monkeypatch, Rename((S,), "__stream__", "_events", ((S, ANTHROPIC_STREAM_STARTER),)))
    with _instrumented_twice() as inst:
        items = _messages(server, is_async=is_async)
        _assert_not_observed(inst)
        _messages(server, is_async=not is_async)  # the other surface is untouched
        attrs = _one_span(inst)
    assert len(items) == 7
    _assert_warning(warned(), f"anthropic._streaming.{S.__name__}.__stream__", ("not observed at all",))
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED
    assert attrs[names.ATTR_KEEPALIVES] == 2  # the body's `event: ping` and its comment line
    mode = "async" if is_async else "sync"
    doc = _doctor(names.MESSAGES, (f"anthropic._streaming.{S.__name__}.__stream__",), mode)
    # the anthropic SDK's cells (the Bedrock invoke ones of the same surface go through botocore, not renamed here)
    mine = [c for c in doc["cells"] if c["mode"] == mode and not c.get("via")]
    assert mine and all(c["problem"] == "no report" for c in mine)


# --- the runtime self-check on a renamed release ------------------------------------------------------------
@pytest.mark.parametrize("renamed", ["openai.Stream.__stream__", "anthropic.Stream._iter_events"])
def test_self_check_gauge_and_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, renamed: str
) -> None:
    """After instrument(), the background check finds the cells the rename breaks: the gauge reads above 0, on
    both metric paths' registry, and one WARNING names the cells, the patch point and the versions."""
    if renamed.startswith("openai"):
        _rename_stream_lifecycle(monkeypatch, openai._streaming.Stream, False)
        point, cell = "openai._streaming.Stream.__stream__", "chat_completions/sync/completed (no report)"
    else:
        S = anthropic._streaming.Stream
        rename(monkeypatch, Rename((S,), "_iter_events", "_iter_sse", ((S, "__stream__"),)))
        point = "anthropic._streaming.Stream._iter_events"
        cell = "messages/sync/completed (keepalives: want 1, got None; unobserved"
    caplog.set_level(logging.WARNING, logger="otelstream")
    with fresh_self_check(), instrumented(self_check=True) as inst:
        wait_for_self_check()
        assert inst.sample(names.PROM_SELF_CHECK_FAILURES) > 0
        assert inst.streams_total() == 0  # its streams are not the application's
    found = self_check_warnings(caplog)
    assert len(found) == 1, found
    assert cell in found[0] and f"patch points missing: {point}" in found[0]
    assert f"openai {openai.__version__}" in found[0] and f"anthropic {anthropic.__version__}" in found[0]
