"""The toggling drill: ``instrument()`` / ``uninstrument()`` flip every few milliseconds, each ``instrument()``
starting the runtime self-check, while 16 threads stream through both SDKs. Nothing may hang: every thread ends,
every stream gives the caller all its items, and no self-check thread is left behind. A quarter of the streams are
dropped unclosed after one item, as applications do: their ends come from the cyclic collector, on whichever
thread's allocation ran it.

Bounded: the toggling lasts ``DRILL_S`` seconds; pytest-timeout ends a hang as a failure, with every thread's stack
(faulthandler) in the output.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

import otelstream
from tests.support.sdk_features import OPENAI_HTTP
from tests.support.self_check import fresh_self_check, self_check_threads

DRILL_S = float(os.environ.get("OTELSTREAM_DRILL_S", "3"))
THREADS = 16

_CHAT = (b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
         b'"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n')  # fmt: skip
_CHAT_END = (b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
             b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')  # fmt: skip
CHAT_BODY = [_CHAT] * 4 + [_CHAT_END]
CHAT_ITEMS = 5


def _sse(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


MESSAGES_BODY = [
    _sse("message_start", '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
         '"model":"m","content":[],"stop_reason":null,"stop_sequence":null,'
         '"usage":{"input_tokens":3,"output_tokens":1}}}'),
    _sse("content_block_start", '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
    *[_sse("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}')]
    * 3,
    _sse("content_block_stop", '{"type":"content_block_stop","index":0}'),
    _sse("message_delta", '{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
         '"usage":{"output_tokens":3}}'),
    _sse("message_stop", '{"type":"message_stop"}'),
]  # fmt: skip
MESSAGES_ITEMS = 8


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    otelstream.uninstrument()
    with fresh_self_check():
        yield
    otelstream.uninstrument()


def _openai() -> openai.OpenAI:
    def handler(request: Any) -> Any:
        return OPENAI_HTTP.Response(200, headers={"content-type": "text/event-stream"}, content=iter(CHAT_BODY))

    http = OPENAI_HTTP.Client(transport=OPENAI_HTTP.MockTransport(handler))
    return openai.OpenAI(api_key="sk-test", base_url="http://mock.test/v1", max_retries=0, http_client=http)


def _anthropic() -> anthropic.Anthropic:
    def handler(request: Any) -> Any:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=iter(MESSAGES_BODY))

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    return anthropic.Anthropic(api_key="sk-test", base_url="http://mock.test", max_retries=0, http_client=http)


MIN_TOGGLES = 3  # on a loaded machine one cycle can take seconds (it joins the self-check's thread)


def _toggle(stop: threading.Event, toggles: list[int], toggled: threading.Event) -> None:
    tp = TracerProvider()
    registry = CollectorRegistry()
    try:
        while not stop.is_set():
            otelstream.instrument(tracer_provider=tp, registry=registry, self_check=True)
            time.sleep(0.003)
            otelstream.uninstrument(timeout=2.0)
            toggles[0] += 1
            if toggles[0] >= MIN_TOGGLES:
                toggled.set()
            time.sleep(0.002)
    finally:
        otelstream.uninstrument(timeout=2.0)
        tp.shutdown()


@pytest.mark.timeout(150 + 4 * DRILL_S, func_only=True)
def test_toggling_with_the_self_check_never_hangs() -> None:
    stop = threading.Event()
    errors: list[BaseException] = []
    got: list[tuple[str, int]] = []
    toggles = [0]
    toggled = threading.Event()
    streamed = threading.Event()

    def stream(kind: str) -> None:
        client: Any = _openai() if kind == "openai" else _anthropic()
        n = 0
        while not stop.is_set():
            n += 1
            try:
                if kind == "openai":
                    s = client.chat.completions.create(model="m", messages=[], stream=True)
                else:
                    s = client.messages.create(model="m", max_tokens=8, messages=[], stream=True)
                if n % 4 == 0:  # dropped unclosed after one item: its end is found by the cyclic collector
                    next(iter(s))
                    del s
                    continue
                with s:
                    got.append((kind, sum(1 for _ in s)))
                if len(got) >= THREADS:
                    streamed.set()
            except BaseException as exc:  # the caller's stream must never fail: collected and asserted empty
                errors.append(exc)
                return

    # the cyclic collector runs often, so that it runs inside many of otelstream's critical sections, as it does
    # at random on a busy process
    thresholds = gc.get_threshold()
    gc.set_threshold(20, 5, 5)
    pool = [threading.Thread(target=stream, args=("openai" if i % 2 else "anthropic",)) for i in range(THREADS)]
    toggler = threading.Thread(target=_toggle, args=(stop, toggles, toggled))
    for t in (*pool, toggler):
        t.start()
    try:
        time.sleep(DRILL_S)  # the drill's length, not a synchronisation: the events and joins below are
        progressed = toggled.wait(45) and streamed.wait(15)  # however loaded the machine, the race really ran
    finally:
        stop.set()
    try:
        for t in (*pool, toggler):
            t.join(30 + DRILL_S)
    finally:
        gc.set_threshold(*thresholds)
    stuck = [t.name for t in (*pool, toggler) if t.is_alive()]
    if stuck:  # where each thread waits: the drill's whole point
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    assert not stuck, f"hung: {stuck}"
    assert not errors, errors[:3]
    assert progressed, (toggles, len(got))
    assert {n for kind, n in got if kind == "openai"} <= {CHAT_ITEMS}
    assert {n for kind, n in got if kind == "anthropic"} <= {MESSAGES_ITEMS}
    for thread in self_check_threads():  # uninstrument() joined or ended every run
        thread.join(5)
    assert self_check_threads() == []
