"""Network faults against local servers, through the real SDKs, instrumented: each ends in the right outcome, the
caller sees the same exception type as uninstrumented, one report per stream.

Two servers: the project's fake provider (``otelstream.demo.provider``: every server fault of its catalogue on every
SSE surface, sync and async, against ``faults.EXPECTED_OUTCOME``) and a raw socket server for what it does not make
(reset mid-event, half-written chunk, slow drip, read timeout after the first event, no headers, close before body).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from typing import Any

import anthropic
import openai
import pytest

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.exchange import FAULT_HEADER
from otelstream.demo.pacing import Pacing
from otelstream.demo.provider import serve
from tests.reliability.harness import FIGURES
from tests.support.instrumented import Instrumented, instrumented, outcome_of
from tests.support.raw_server import DRIP, FAULT, raw_server
from tests.support.sdk_features import ANTHROPIC_HTTP, OPENAI_HTTP
from tests.support.surfaces import SSE_SURFACES

PACING = Pacing(ttfd_s=0.005, gap_s=0.001, pause_s=0.08, no_headers_s=5.0)
# no_headers and the silent server end on this read timeout (each SDK takes its own HTTP library's Timeout)
TIMEOUT = ANTHROPIC_HTTP.Timeout(10.0, read=2.0)
OPENAI_TIMEOUT = OPENAI_HTTP.Timeout(10.0, read=2.0)
# ~300 bytes (the slow-drip case sends it one byte per 100 ms)
RESP_BODY = (
    b'data: {"type":"response.created","sequence_number":0,"response":{"id":"r","model":"m"}}\n\n'
    b'data: {"type":"response.output_text.delta","sequence_number":1,"delta":"Hi"}\n\n'
    b'data: {"type":"response.completed","sequence_number":2,'
    b'"response":{"id":"r","usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
)


def _open(kind: str, base: str, surface: str, model: str, headers: dict[str, str]) -> Any:
    msgs: Any = [{"role": "user", "content": "x"}]
    if surface == names.MESSAGES:
        an = anthropic.Anthropic(api_key="sk-ant-test", base_url=base, max_retries=0, timeout=TIMEOUT)
        return an.messages.create(model=model, max_tokens=5, messages=msgs, stream=True, extra_headers=headers)
    oa = openai.OpenAI(api_key="sk-test", base_url=base + "/v1", max_retries=0, timeout=OPENAI_TIMEOUT)
    if surface == names.RESPONSES:
        return oa.responses.create(model=model, input="x", stream=True, extra_headers=headers)
    if surface == names.CHAT_COMPLETIONS:
        return oa.chat.completions.create(model=model, messages=msgs, stream=True, extra_headers=headers)
    return oa.completions.create(model=model, prompt="x", stream=True, extra_headers=headers)


async def _aopen(base: str, surface: str, model: str, headers: dict[str, str]) -> Any:
    msgs: Any = [{"role": "user", "content": "x"}]
    if surface == names.MESSAGES:
        an = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=base, max_retries=0, timeout=TIMEOUT)
        return await an.messages.create(model=model, max_tokens=5, messages=msgs, stream=True, extra_headers=headers)
    oa = openai.AsyncOpenAI(api_key="sk-test", base_url=base + "/v1", max_retries=0, timeout=OPENAI_TIMEOUT)
    if surface == names.RESPONSES:
        return await oa.responses.create(model=model, input="x", stream=True, extra_headers=headers)
    if surface == names.CHAT_COMPLETIONS:
        return await oa.chat.completions.create(model=model, messages=msgs, stream=True, extra_headers=headers)
    return await oa.completions.create(model=model, prompt="x", stream=True, extra_headers=headers)


def _consume(base: str, surface: str, model: str, headers: dict[str, str]) -> tuple[int, str | None]:
    n = 0
    try:
        with _open("sync", base, surface, model, headers) as stream:
            for _ in stream:
                n += 1
    except Exception as exc:
        return n, type(exc).__name__
    return n, None


async def _aconsume(base: str, surface: str, model: str, headers: dict[str, str]) -> tuple[int, str | None]:
    n = 0
    try:
        stream = await _aopen(base, surface, model, headers)
        async with stream:
            async for _ in stream:
                n += 1
    except Exception as exc:
        return n, type(exc).__name__
    return n, None


def _span_outcomes(inst: Instrumented) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for span in inst.finished():
        model = str((span.attributes or {}).get(names.ATTR_REQUEST_MODEL))
        out.setdefault(model, []).append(outcome_of(span))
    return out


CASES = [(fault, surface) for fault in F.SERVER_FAULTS for surface in SSE_SURFACES if F.is_supported(fault, surface)]
RAW = [
    ("reset_mid_event", names.TRANSPORT_ERROR),
    ("half_chunk", names.TRANSPORT_ERROR),
    ("timeout_after_first", names.TRANSPORT_ERROR),
    ("no_headers", names.HTTP_ERROR),
    ("close_before_body", names.TRANSPORT_ERROR),
    ("ok", names.COMPLETED),
]


@pytest.mark.slow
def test_network_faults() -> None:
    """Every server fault of the fake provider on every SSE surface (sync, in 16 threads, and async, gathered),
    socket-level faults from the raw server (sync and async), and meanwhile one ~300-byte stream dripped at one
    byte per 100 ms."""
    with serve(pacing=PACING, tokens=(4, 8), seed=3) as provider, raw_server(RESP_BODY) as raw_base:
        base = provider.base_url
        with concurrent.futures.ThreadPoolExecutor(16) as pool:  # uninstrumented: what the caller sees without us
            plain = list(pool.map(lambda c: _consume(base, c[1], "m", {FAULT_HEADER: c[0]}), CASES))
            raw_plain = list(pool.map(lambda r: _consume(raw_base, names.RESPONSES, "m", {FAULT: r[0]}), RAW))
        with instrumented() as inst, concurrent.futures.ThreadPoolExecutor(16) as pool:
            drip = pool.submit(_consume, raw_base, names.RESPONSES, "drip", {FAULT: "drip", DRIP: "0.1"})
            tags = {(f, s, mode): uuid.uuid4().hex[:12] for f, s in CASES for mode in ("sync", "async")}
            sync = list(pool.map(lambda c: _consume(base, c[1], tags[(*c, "sync")], {FAULT_HEADER: c[0]}), CASES))

            async def run_async() -> list[tuple[int, str | None]]:
                return await asyncio.gather(*(_aconsume(base, s, tags[(f, s, "async")], {FAULT_HEADER: f})
                                              for f, s in CASES))  # fmt: skip

            asyn = asyncio.run(run_async())
            raw = [_consume(raw_base, names.RESPONSES, f, {FAULT: f}) for f, _ in RAW]
            araw = [asyncio.run(_aconsume(raw_base, names.RESPONSES, "a-" + f, {FAULT: f})) for f, _ in RAW]
            dripped = drip.result(timeout=90)
            outcomes = _span_outcomes(inst)
            spans = {
                str((sp.attributes or {}).get(names.ATTR_REQUEST_MODEL)): sp for sp in inst.spans.get_finished_spans()
            }
    FIGURES["network faults injected (fake provider, sync+async)"] += 2 * len(CASES)
    FIGURES["network faults injected (raw socket, sync+async, + slow drip)"] += 2 * len(RAW) + 1
    wrong = []
    for (fault, surface), before, s, a in zip(CASES, plain, sync, asyn, strict=True):
        assert before[1] == s[1] == a[1], (fault, surface, before, s, a)  # same exception type (or none)
        for mode in ("sync", "async"):
            got = outcomes.get(tags[(fault, surface, mode)], [])
            if got != [F.EXPECTED_OUTCOME[fault]]:
                wrong.append((fault, surface, mode, got))
    assert not wrong, wrong
    for (fault, expected), before, s, a in zip(RAW, raw_plain, raw, araw, strict=True):
        assert before == s, (fault, before, s)
        assert a[1] is None or expected != names.COMPLETED, (fault, "async", a)
        assert outcomes.get(fault) == [expected], (fault, outcomes.get(fault))
        assert outcomes.get("a-" + fault) == [expected], (fault, "async", a, outcomes.get("a-" + fault))
    assert 250 <= len(RESP_BODY) <= 350
    assert dripped == (3, None)
    attrs = spans["drip"].attributes or {}
    assert outcomes["drip"] == [names.COMPLETED]
    assert 0.09 <= float(attrs[names.ATTR_MAX_WAIT]) < 30  # type: ignore[arg-type]
    assert attrs[names.ATTR_EVENTS] == 3 and attrs[names.ATTR_DELTAS] == 1


def test_connection_refused_is_http_error() -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with instrumented() as inst:
        got = _consume(f"http://127.0.0.1:{port}", names.CHAT_COMPLETIONS, "refused", {})
        spans = inst.finished()
    assert got == (0, "APIConnectionError")
    assert [outcome_of(sp) for sp in spans] == [names.HTTP_ERROR]
