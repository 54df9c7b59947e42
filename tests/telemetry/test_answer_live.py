"""What a user waits for and what on-call asks after a failure (issue 26), live: the real openai and anthropic clients,
sync and async, against the scripted server on 127.0.0.1, through the public ``otelstream.instrument()`` (the report,
the span and the Prometheus series of each stream).

- A reasoning model thinks, pauses, then answers: time to first delta is the first thought (small), time to first
  output the answer (at least the pause), on the report, the span and the TTFO histogram.
- The failure phase of each bad outcome: before output (an in-band error first, a 429), during output (a cut, a reset,
  an in-band error after deltas, an aborted generation), on the report, the span and ``otelstream_streams_total``.
- The same bodies through ``otelstream check`` give the same outcome, class, phase and first output.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest

import otelstream
from otelstream import names, offline
from otelstream.core.report import StreamReport
from tests.support import bodies
from tests.support.paths import REPO
from tests.support.scripted_server import SCRIPT_HEADER, Pause, Reset, ScriptedServer, Step
from tests.support.sdk_features import ANTHROPIC_HTTP, OPENAI_HTTP
from tests.telemetry.harness import Telemetry

R, CH, CO, M = names.RESPONSES, names.CHAT_COMPLETIONS, names.COMPLETIONS, names.MESSAGES
MSGS: Any = [{"role": "user", "content": "x"}]
PAUSE_S = 0.3  # the thinking pause before the answer
OPEN: dict[str, Callable[[Any, dict[str, str]], Any]] = {
    R: lambda c, h: c.responses.create(model="o-test", input="x", stream=True, extra_headers=h),
    CH: lambda c, h: c.chat.completions.create(
        model="o-test", messages=MSGS, stream=True, stream_options={"include_usage": True}, extra_headers=h),
    CO: lambda c, h: c.completions.create(model="o-test", prompt="x", stream=True, extra_headers=h),
    M: lambda c, h: c.messages.create(model="claude-test", max_tokens=64, messages=MSGS, stream=True,
                                      extra_headers=h),
}  # fmt: skip


def sse(obj: dict[str, Any], event: str | None = None) -> bytes:
    return bodies.sse(obj, event)


# --- bodies: a reasoning model's answer --------------------------------------------------------------------------
def _responses_reasoning() -> tuple[list[Step], list[Step]]:
    resp = {"id": "resp_r", "object": "response", "status": "in_progress", "output": [], "model": "o-test"}

    def ev(seq: int, typ: str, **kw: Any) -> bytes:
        return sse({"type": typ, "sequence_number": seq, **kw}, typ)

    thought = [ev(1, "response.output_item.added", output_index=0,
                  item={"id": "rs", "type": "reasoning", "summary": []}),
               ev(2, "response.reasoning_summary_text.delta", item_id="rs", output_index=0, summary_index=0,
                  delta="Let me"),
               ev(3, "response.reasoning_summary_text.delta", item_id="rs", output_index=0, summary_index=0,
                  delta=" think")]  # fmt: skip
    answer = [ev(4, "response.output_item.added", output_index=1,
                 item={"id": "m", "type": "message", "role": "assistant", "status": "in_progress", "content": []}),
              ev(5, "response.output_text.delta", item_id="m", output_index=1, content_index=0, delta="4",
                 logprobs=[]),
              ev(6, "response.output_text.delta", item_id="m", output_index=1, content_index=0, delta="2",
                 logprobs=[]),
              ev(7, "response.completed", response={**resp, "status": "completed", "usage": {
                  "input_tokens": 5, "output_tokens": 9, "total_tokens": 14,
                  "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 3},
                  "output_tokens_details": {"reasoning_tokens": 7}}})]  # fmt: skip
    return [ev(0, "response.created", response=resp), *thought], answer


def _chat_reasoning() -> tuple[list[Step], list[Step]]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **kw: Any) -> bytes:
        return sse({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "o-test",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **kw})  # fmt: skip

    usage = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14, "cached_tokens": 2}  # (Together's)
    head = [chunk({"role": "assistant", "content": ""}), chunk({"reasoning_content": "Let me"}),
            chunk({"reasoning_content": " think"})]  # fmt: skip
    tail = [chunk({"content": "4"}), chunk({"content": "2"}), chunk({}, "stop"),
            sse({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "o-test", "choices": [],
                 "usage": usage}), b"data: [DONE]\n\n"]  # fmt: skip
    return head, tail


def _messages_reasoning() -> tuple[list[Step], list[Step]]:
    def ev(obj: dict[str, Any]) -> bytes:
        return sse(obj, obj["type"])

    start = {"id": "msg_r", "type": "message", "role": "assistant", "content": [], "model": "claude-test",
             "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}
    head = [ev({"type": "message_start", "message": start}),
            ev({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            ev({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let"}}),
            ev({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": " me"}}),
            ev({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s"}}),
            ev({"type": "content_block_stop", "index": 0})]  # fmt: skip
    tail = [ev({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            ev({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "42"}}),
            ev({"type": "content_block_stop", "index": 1}),
            ev({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 9}}),
            ev({"type": "message_stop"})]  # fmt: skip
    return head, tail


REASONING = {R: _responses_reasoning, CH: _chat_reasoning, M: _messages_reasoning}


# --- playing a script through the real SDK, instrumented ------------------------------------------------------------
@dataclass
class Played:
    report: StreamReport
    exc: BaseException | None
    items: int


def _client(server: ScriptedServer, surface: str, is_async: bool) -> Any:
    lib = ANTHROPIC_HTTP if surface == M else OPENAI_HTTP
    http = lib.AsyncClient() if is_async else lib.Client()
    if surface == M:
        cls: Any = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        return cls(api_key="k", base_url=server.base_url, max_retries=0, timeout=5.0, http_client=http)
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(api_key="k", base_url=server.base_url + "/v1", max_retries=0, timeout=5.0, http_client=http)


def play(server: ScriptedServer, reports: list[StreamReport], surface: str, steps: list[Step], is_async: bool,
         **script: Any) -> Played:  # fmt: skip
    key = server.add(steps, **script)
    client = _client(server, surface, is_async)
    headers = {SCRIPT_HEADER: key}
    items = 0
    exc: BaseException | None = None
    if not is_async:
        try:
            with OPEN[surface](client, headers) as stream:
                for _ in stream:
                    items += 1
        except Exception as e:
            exc = e
    else:

        async def go() -> tuple[int, BaseException | None]:
            n = 0
            try:
                stream = await OPEN[surface](client, headers)
                async with stream:
                    async for _ in stream:
                        n += 1
            except Exception as e:
                return n, e
            return n, None

        items, exc = asyncio.run(go())
    assert otelstream.flush(10.0)
    deadline = time.monotonic() + 5.0
    while not reports and time.monotonic() < deadline:  # on_report runs on its own thread, after the sinks
        time.sleep(0.005)
    assert len(reports) == 1, reports
    return Played(reports.pop(), exc, items)


@pytest.fixture
def live(instrument: Callable[..., Telemetry]) -> tuple[Telemetry, list[StreamReport]]:
    reports: list[StreamReport] = []
    return instrument(on_report=reports.append), reports


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def is_async(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _span_attributes(tel: Telemetry) -> dict[str, Any]:
    (span,) = tel.ours()
    tel.exporter.clear()
    return dict(span.attributes or {})


def _offline(tmp_path: Any, surface: str, steps: list[Step]) -> StreamReport:
    p = tmp_path / "body.sse"
    p.write_bytes(b"".join(s for s in steps if isinstance(s, bytes)))
    return offline.analyse(str(p), surface).reports[0]


@pytest.fixture(scope="module", autouse=True)
def warm(scripted: ScriptedServer) -> None:
    """The SDKs build their event models on first use (up to seconds for the Responses union): once here, so that
    work is not in the first measured stream's time to first delta."""
    for surface, body in REASONING.items():
        thought, answer = body()
        key = scripted.add([*thought, *answer])
        with OPEN[surface](_client(scripted, surface, False), {SCRIPT_HEADER: key}) as stream:
            for _ in stream:
                pass


# --- time to first output ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("surface", sorted(REASONING))
def test_reasoning_then_a_pause_then_the_answer(live: tuple[Telemetry, list[StreamReport]], scripted: ScriptedServer,
                                                surface: str, is_async: bool, tmp_path: Any) -> None:  # fmt: skip
    tel, reports = live
    thought, answer = REASONING[surface]()
    played = play(scripted, reports, surface, [*thought, Pause(PAUSE_S), *answer], is_async)
    r = played.report
    assert played.exc is None and r.outcome == names.COMPLETED
    assert r.time_to_first_delta_ns is not None and r.time_to_first_output_ns is not None
    assert r.time_to_first_delta_ns < PAUSE_S * 1e9 <= r.time_to_first_output_ns  # the first thought, the answer
    want = _offline(tmp_path, surface, [*thought, *answer])
    assert r.first_output_event == want.first_output_event is not None  # the answer's first event, as check counts
    assert (r.deltas, r.usage) == (want.deltas, want.usage)

    a = _span_attributes(tel)
    assert a[names.ATTR_TIME_TO_FIRST_DELTA] < PAUSE_S <= a[names.ATTR_TIME_TO_FIRST_OUTPUT]
    assert names.ATTR_FAILURE_PHASE not in a
    labels = {names.LABEL_SURFACE: surface}
    ttfo = tel.registry.get_sample_value(f"{names.PROM_TIME_TO_FIRST_OUTPUT}_sum", _labels(tel, surface, labels))
    ttfd = tel.registry.get_sample_value(f"{names.PROM_TIME_TO_FIRST_CHUNK}_sum", _labels(tel, surface, {}))
    assert ttfo is not None and ttfd is not None and ttfd < PAUSE_S <= ttfo


def test_without_reasoning_the_first_output_is_the_first_delta(
    live: tuple[Telemetry, list[StreamReport]], scripted: ScriptedServer, is_async: bool
) -> None:
    """Legacy completions (no reasoning there): a pause before the first delta is in both."""
    frames = bodies.completions("ok")
    r = play(scripted, live[1], CO, [Pause(PAUSE_S), *frames], is_async).report
    assert r.outcome == names.COMPLETED and r.time_to_first_output_ns == r.time_to_first_delta_ns
    assert r.time_to_first_output_ns is not None and r.time_to_first_output_ns >= PAUSE_S * 1e9


def test_the_server_s_cache_writes_and_cached_tokens_reach_the_report(
    live: tuple[Telemetry, list[StreamReport]], scripted: ScriptedServer, is_async: bool
) -> None:
    """Fields the SDKs' models do not declare (Bedrock's Responses cache_write_tokens, Together's top-level
    cached_tokens) are read from the models' extras."""
    thought, answer = _responses_reasoning()
    assert play(scripted, live[1], R, [*thought, *answer], is_async).report.usage.cache_write_input_tokens == 3
    head, tail = _chat_reasoning()
    assert play(scripted, live[1], CH, [*head, *tail], is_async).report.usage.cache_read_input_tokens == 2


def test_a_repeated_finish_is_no_anomaly_and_x_groq_usage_counts(
    live: tuple[Telemetry, list[StreamReport]], scripted: ScriptedServer, is_async: bool
) -> None:
    """OpenRouter repeats the finish_reason on a later chunk; Groq sends usage only as x_groq.usage: ordinary traffic,
    read through the SDK's models (vendor fields are extras there)."""

    def chunk(delta: dict[str, Any], finish: str | None, **kw: Any) -> bytes:
        return sse({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **kw})  # fmt: skip

    x_groq = {"id": "req_1", "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}}
    steps: list[Step] = [chunk({"role": "assistant", "content": ""}, None), chunk({"content": "Hi"}, None),
                         chunk({"content": ""}, "length"), chunk({"content": ""}, "length", x_groq=x_groq),
                         b"data: [DONE]\n\n"]  # fmt: skip
    r = play(scripted, live[1], CH, steps, is_async).report
    assert (r.outcome, r.finish_reasons, r.anomaly_counts) == (names.INCOMPLETE, ("length",), ())
    assert (r.usage.input_tokens, r.usage.output_tokens) == (12, 2)


# --- the failure phase of each bad outcome -------------------------------------------------------------------------
def _inband_error(surface: str) -> bytes:
    if surface == M:
        return sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error")
    if surface == R:
        return sse({"type": "error", "code": "server_error", "message": "boom", "param": None,
                    "sequence_number": 3}, "error")  # fmt: skip
    return sse({"error": {"message": "boom", "type": "server_error", "code": "server_error"}})


def _abort(surface: str) -> list[bytes]:
    """vLLM's aborted generation: the deltas so far, finish_reason "abort", [DONE]."""
    frames = bodies.chat("cut") if surface == CH else bodies.completions("cut")
    head = frames[-1].split(b"data: ", 1)[1]
    last = json.loads(head)
    last["choices"][0]["finish_reason"] = "abort"
    if surface == CH:
        last["choices"][0]["delta"] = {}
    else:
        last["choices"][0]["text"] = ""
    return [*frames, sse(last), b"data: [DONE]\n\n"]


def _first_delta(frames: list[bytes]) -> int:
    return next(i for i, f in enumerate(frames) if b'"Hel"' in f)


def _case(surface: str, case: str) -> tuple[list[Step], dict[str, Any], str, str, str]:
    """(steps, script options, outcome, error class, phase)."""
    frames = {R: bodies.responses, CH: bodies.chat, CO: bodies.completions, M: bodies.messages}[surface]("ok")
    first = _first_delta(frames)
    klass = names.EC_OVERLOADED if surface == M else names.EC_SERVER_ERROR
    if case == "inband_error_first":
        return [*frames[:first], _inband_error(surface)], {}, names.ERROR, klass, names.PHASE_BEFORE_OUTPUT
    if case == "inband_error_after_deltas":
        return [*frames[: first + 2], _inband_error(surface)], {}, names.ERROR, klass, names.PHASE_DURING_OUTPUT
    if case == "cut":
        return frames[: first + 2], {}, names.CUT, names.EC_CUT, names.PHASE_DURING_OUTPUT
    if case == "reset":
        return ([*frames[: first + 2], Reset()], {}, names.TRANSPORT_ERROR, names.EC_CONNECTION,
                names.PHASE_DURING_OUTPUT)  # fmt: skip
    if case == "429":
        body = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}} if
                          surface == M else {"error": {"message": "slow down", "type": "requests",
                                                       "code": "rate_limit_exceeded"}}).encode()  # fmt: skip
        options = {"status": 429, "headers": {"content-type": "application/json", "x-should-retry": "false"}}
        return [body], options, names.HTTP_ERROR, names.EC_RATE_LIMITED, names.PHASE_BEFORE_OUTPUT
    assert case == "abort"
    return list(_abort(surface)), {}, names.ERROR, names.EC_SERVER_ERROR, names.PHASE_DURING_OUTPUT


CASES = [(s, c) for s in (R, CH, CO, M)
         for c in ("inband_error_first", "429", "inband_error_after_deltas", "cut", "reset", "abort")
         if c != "abort" or s in (CH, CO)]  # fmt: skip


@pytest.mark.parametrize(("surface", "case"), CASES)
def test_failure_phase(live: tuple[Telemetry, list[StreamReport]], scripted: ScriptedServer, surface: str, case: str,
                       is_async: bool, tmp_path: Any) -> None:  # fmt: skip
    tel, reports = live
    steps, options, outcome, klass, phase = _case(surface, case)
    played = play(scripted, reports, surface, steps, is_async, **options)
    r = played.report
    assert (r.outcome, r.error_class, r.failure_phase) == (outcome, klass, phase), repr(played.exc)
    assert (r.deltas == 0) == (phase == names.PHASE_BEFORE_OUTPUT)
    if case == "abort":
        assert played.exc is None and r.error_type == "abort"  # the SDK hands the chunk over: no exception
    a = _span_attributes(tel)
    assert (a[names.ATTR_OUTCOME], a[names.ATTR_ERROR_CLASS], a[names.ATTR_FAILURE_PHASE]) == (outcome, klass, phase)
    streams = {names.LABEL_SURFACE: surface, names.LABEL_OUTCOME: outcome, names.LABEL_ERROR_TYPE: klass,
               names.LABEL_PHASE: phase}  # fmt: skip
    assert tel.registry.get_sample_value(f"{names.PROM_STREAMS}_total", _labels(tel, surface, streams)) == 1
    if case in ("inband_error_first", "inband_error_after_deltas", "abort", "cut"):
        # check agrees on the same body (it reads on past the error the SDK raised on: same outcome, class, phase)
        want = _offline(tmp_path, surface, steps)
        assert (want.outcome, want.error_class, want.failure_phase) == (outcome, klass, phase)


def _labels(tel: Telemetry, surface: str, own: dict[str, str]) -> dict[str, str]:
    """The common labels of the one finished stream in the registry, and ``own``."""
    for family in tel.registry.collect():
        for s in family.samples:
            if s.name == f"{names.PROM_STREAMS}_total" and s.labels.get(names.LABEL_SURFACE) == surface:
                common = {k: v for k, v in s.labels.items() if k in names.COMMON_LABELS}
                return {**common, **own}
    raise AssertionError(f"no {names.PROM_STREAMS}_total for {surface}")


# --- the README's retry example: retry only what the user never saw ------------------------------------------------
def _readme_answer() -> Callable[..., StreamReport | None]:
    """The README's ``answer()``, exactly as written there."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "def answer(" in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, "README.md", "exec"), namespace)
    return namespace["answer"]  # type: ignore[no-any-return]


CHAT_OK = bodies.chat("ok")
BEFORE_OUTPUT = {"inband_error": [CHAT_OK[0], _inband_error(CH)], "cut": [CHAT_OK[0]]}
DURING_OUTPUT = {"inband_error": [*CHAT_OK[:2], _inband_error(CH)], "cut": CHAT_OK[:2], "abort": _abort(CH)}


def _answer(server: ScriptedServer, scripts: list[list[Step]]) -> tuple[StreamReport | None, BaseException | None,
                                                                        list[str], list[str]]:  # fmt: skip
    """The README's answer() against one script per attempt: (its report, what it raised, what the user was sent,
    the idempotency key of each request)."""
    keys = [server.add(steps) for steps in scripts]
    sent_keys: list[str] = []

    def route(request: Any) -> None:  # each attempt gets the next script
        sent_keys.append(request.headers["idempotency-key"])
        request.headers[SCRIPT_HEADER] = keys[len(sent_keys) - 1]

    http = OPENAI_HTTP.Client(event_hooks={"request": [route]})
    client = openai.OpenAI(api_key="k", base_url=server.base_url + "/v1", max_retries=0, http_client=http)
    shown: list[str] = []
    try:
        return _readme_answer()(client, MSGS, shown.append), None, shown, sent_keys
    except Exception as exc:
        return None, exc, shown, sent_keys


@pytest.mark.parametrize("failure", sorted(BEFORE_OUTPUT))
def test_readme_retries_a_failure_the_user_never_saw(live: tuple[Telemetry, list[StreamReport]],
                                                    scripted: ScriptedServer, failure: str) -> None:  # fmt: skip
    report, exc, shown, keys = _answer(scripted, [BEFORE_OUTPUT[failure], CHAT_OK])
    assert exc is None and report is not None and report.outcome == names.COMPLETED
    assert "".join(shown) == "Hello" and len(keys) == 2 and keys[0] == keys[1]  # the same idempotency key


@pytest.mark.parametrize("failure", sorted(DURING_OUTPUT))
def test_readme_does_not_retry_what_the_user_saw(live: tuple[Telemetry, list[StreamReport]],
                                                 scripted: ScriptedServer, failure: str) -> None:  # fmt: skip
    report, exc, shown, keys = _answer(scripted, [DURING_OUTPUT[failure], CHAT_OK])
    assert len(keys) == 1  # one attempt: a second answer would repeat the first
    assert "".join(shown) == ("Hello" if failure == "abort" else "Hel")
    if failure == "inband_error":
        assert isinstance(exc, openai.APIError) and report is None  # the error reaches the caller
    else:
        assert exc is None and report is not None and report.failure_phase == names.PHASE_DURING_OUTPUT
        assert report.outcome == (names.CUT if failure == "cut" else names.ERROR)


def test_readme_retries_once(live: tuple[Telemetry, list[StreamReport]], scripted: ScriptedServer) -> None:
    report, exc, shown, keys = _answer(scripted, [BEFORE_OUTPUT["inband_error"]] * 2)
    assert isinstance(exc, openai.APIError) and len(keys) == 2 and shown == []
    report, exc, shown, keys = _answer(scripted, [BEFORE_OUTPUT["cut"]] * 2)
    assert exc is None and report is not None and (report.outcome, len(keys)) == (names.CUT, 2)
