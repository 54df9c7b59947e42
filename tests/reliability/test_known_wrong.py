"""A number otelstream knows may be wrong is not exported as if right (issue 35, item 2).

The SDK is reshaped before ``instrument()`` the way a release could be, with every patch point still in place: its
sync stream swallows a connection reset and ends as if the body had simply stopped. The runtime self-check's reset
cell then differs (``cut`` where ``transport_error`` must be reported), and from then on every sync openai stream in
the process lists the measures that cell compares as unobserved, on its report and its span, while the outcome label
keeps its closed-set value. Async openai streams and anthropic streams, whose cells held, list nothing. A healthy
stack marks nothing.

Streams go through the real SDKs to the scripted server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import openai._streaming
import pytest

import otelstream
from otelstream import names
from otelstream.adapters import _patch
from tests.support import bodies
from tests.support.instrumented import Instrumented, instrumented
from tests.support.scripted_server import SCRIPT_HEADER, ScriptedServer
from tests.support.sdk_features import CONNECTION_ERRORS, OPENAI_HTTP
from tests.support.self_check import fresh_self_check, self_check_warnings, wait_for_self_check

MSGS: Any = [{"role": "user", "content": "x"}]
# what the reset cell compares, as stream measures (its expected keys, less "unobserved" and the anomalies it skips)
DOUBTED = {
    names.MEASURE_OUTCOME,
    names.MEASURE_ERROR_CLASS,
    names.MEASURE_TIME_TO_FIRST_DELTA,
    names.MEASURE_COUNTS,
    names.MEASURE_KEEPALIVES,
    names.MEASURE_USAGE,
    names.MEASURE_DONE_SENTINEL,
}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer().start()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    with fresh_self_check():
        yield


def _swallow_resets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A release whose sync stream loop ends quietly on a connection error instead of raising it."""
    real = openai._streaming.Stream.__stream__

    def swallowing(self: Any) -> Iterator[Any]:
        try:
            yield from real(self)
        except CONNECTION_ERRORS:
            return

    monkeypatch.setattr(openai._streaming.Stream, "__stream__", swallowing)


def _chat(server: ScriptedServer, is_async: bool = False) -> Any:
    """One chat stream read to its end; returns the SDK's stream object (for ``report_of``)."""
    headers = {SCRIPT_HEADER: server.add(bodies.chat("ok"))}
    cls: Any = openai.AsyncOpenAI if is_async else openai.OpenAI
    http = OPENAI_HTTP.AsyncClient() if is_async else OPENAI_HTTP.Client()
    client = cls(api_key="k", base_url=server.base_url + "/v1", http_client=http, max_retries=0)
    if not is_async:
        with client.chat.completions.create(model="gpt-test", messages=MSGS, stream=True, extra_headers=headers) as s:
            assert len(list(s)) == len(bodies.chat("ok")) - 1  # the application is unaffected
            return s

    async def go() -> Any:
        s = await client.chat.completions.create(model="gpt-test", messages=MSGS, stream=True, extra_headers=headers)
        async with s:
            assert len([item async for item in s]) == len(bodies.chat("ok")) - 1
        return s

    return asyncio.run(go())


def _messages(server: ScriptedServer) -> Any:
    headers = {SCRIPT_HEADER: server.add(bodies.messages("ok"))}
    client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
    with client.messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True,
                                extra_headers=headers) as s:  # fmt: skip
        assert list(s)
        return s


def _unobserved(inst: Instrumented, stream: Any) -> tuple[set[str], set[str]]:
    """The stream's report's and its (newest) span's unobserved measures; its outcome is a closed-set value."""
    report = otelstream.report_of(stream)
    assert report is not None and report.outcome == names.COMPLETED
    span = inst.finished()[-1]
    attrs = dict(span.attributes or {})
    assert attrs[names.ATTR_OUTCOME] == names.COMPLETED  # the label keeps its value: alerts still see the stream
    return set(report.unobserved), set(attrs.get(names.ATTR_UNOBSERVED, ()))


def test_a_differing_cell_makes_its_measures_unknown_on_later_streams(
    monkeypatch: pytest.MonkeyPatch, server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    _swallow_resets(monkeypatch)
    caplog.set_level(logging.WARNING, logger="otelstream")
    with instrumented(self_check=True) as inst:
        wait_for_self_check()
        assert inst.sample(names.PROM_SELF_CHECK_FAILURES) == 1
        sync_stream = _chat(server)
        assert _unobserved(inst, sync_stream) == (DOUBTED, DOUBTED)
        assert _unobserved(inst, _chat(server, is_async=True)) == (set(), set())  # its cells held
        assert _unobserved(inst, _messages(server)) == (set(), set())
        assert inst.streams_total(outcome=names.COMPLETED) == 3
    report = otelstream.report_of(sync_stream)
    assert report is not None  # unknown, not guessed: absent where the report can say so
    assert report.time_to_first_delta_ns is None and report.keepalives is None
    assert report.usage.input_tokens is None and report.usage.output_tokens is None
    found = self_check_warnings(caplog)
    assert len(found) == 1, found
    assert "chat_completions/sync/reset" in found[0]
    assert "reported unknown" in found[0] and _patch.scope_text(_patch.OPENAI) in found[0]
    assert all(measure in found[0] for measure in DOUBTED)
    # the verdict holds for the process: a new instrument() cycle keeps it (the check does not run again)
    with instrumented(self_check=True) as inst:
        wait_for_self_check()
        assert _unobserved(inst, _chat(server)) == (DOUBTED, DOUBTED)


def test_a_healthy_stack_marks_nothing(server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="otelstream")
    with instrumented(self_check=True) as inst:
        wait_for_self_check()
        assert inst.sample(names.PROM_SELF_CHECK_FAILURES) == 0
        for stream in (_chat(server), _chat(server, is_async=True), _messages(server)):
            assert _unobserved(inst, stream) == (set(), set())
    assert self_check_warnings(caplog) == []
    for scope in (_patch.OPENAI, _patch.OPENAI_ASYNC, _patch.ANTHROPIC, _patch.ANTHROPIC_ASYNC):
        assert _patch.PATCHER.unobserved(scope) == _patch.NOTHING_UNOBSERVED
