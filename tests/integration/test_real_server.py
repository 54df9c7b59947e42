"""The real openai / anthropic clients against the project's fake provider on 127.0.0.1: every SSE surface, sync
and async, under every fault the provider can serve; the one report per stream is checked against what the server
actually sent (its recorded body): outcome, events counted once, deltas, usage, TTFD, sequence, ``[DONE]``, pings.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.exchange import FAULT_HEADER, TOKENS_HEADER
from otelstream.demo.provider import FakeProvider
from tests.integration import wire
from tests.support.recording import RecordingListener
from tests.support.sdk_features import ANTHROPIC_HTTP, CONNECTION_ERRORS, OPENAI_HTTP, lacking

MSGS: Any = [{"role": "user", "content": "hi"}]
TAG = "x-test-tag"
AFTER = 3  # the resume point: response.created, in_progress, output_item.added, content_part.added are 0..3
_tags = itertools.count()

Open = Callable[[Any, dict[str, str]], Any]  # (client, headers) -> what the caller opens


@dataclass(frozen=True)
class Surface:
    id: str
    sdk: str
    surface: str
    open: Open
    helper: str = ""  # how a helper is consumed: "" (raw stream: iterate), "iter", "text", "until_done"
    resume: str = ""  # "server" (retrieve with starting_after), "client" (.stream(response_id=…, starting_after=N))

    @property
    def resumed(self) -> bool:
        return bool(self.resume)


def _usage_opts() -> dict[str, Any]:
    return {"stream_options": {"include_usage": True}}


SURFACES = [
    Surface("responses.create", "openai", names.RESPONSES,
            lambda c, h: c.responses.create(model="gpt-4o-mini", input="hi", stream=True, extra_headers=h)),
    Surface("beta.responses.create", "openai", names.RESPONSES,
            lambda c, h: c.beta.responses.create(model="gpt-4o-mini", input="hi", stream=True, extra_headers=h)),
    Surface("responses.stream", "openai", names.RESPONSES,
            lambda c, h: c.responses.stream(model="gpt-4o-mini", input="hi", extra_headers=h), helper="iter"),
    Surface("responses.retrieve", "openai", names.RESPONSES,
            lambda c, h: c.responses.retrieve(h.pop("rid"), stream=True, starting_after=AFTER, extra_headers=h),
            resume="server"),
    Surface("responses.stream.resume", "openai", names.RESPONSES,
            lambda c, h: c.responses.stream(response_id=h.pop("rid"), starting_after=AFTER, extra_headers=h),
            helper="iter", resume="client"),
    Surface("chat.create", "openai", names.CHAT_COMPLETIONS,
            lambda c, h: c.chat.completions.create(model="gpt-4o", messages=MSGS, stream=True, extra_headers=h,
                                                   **_usage_opts())),
    Surface("chat.stream", "openai", names.CHAT_COMPLETIONS,
            lambda c, h: c.chat.completions.stream(model="gpt-4o", messages=MSGS, extra_headers=h, **_usage_opts()),
            helper="iter"),
    Surface("completions.create", "openai", names.COMPLETIONS,
            lambda c, h: c.completions.create(model="gpt-3.5-turbo-instruct", prompt="hi", stream=True,
                                              extra_headers=h, **_usage_opts())),
    Surface("messages.create", "anthropic", names.MESSAGES,
            lambda c, h: c.messages.create(model="claude-x", max_tokens=64, messages=MSGS, stream=True,
                                           extra_headers=h)),
    Surface("messages.stream", "anthropic", names.MESSAGES,
            lambda c, h: c.messages.stream(model="claude-x", max_tokens=64, messages=MSGS, extra_headers=h),
            helper="text"),
    Surface("beta.messages.create", "anthropic", names.MESSAGES,
            lambda c, h: c.beta.messages.create(model="claude-x", max_tokens=64, messages=MSGS, stream=True,
                                                extra_headers=h)),
    Surface("beta.messages.stream", "anthropic", names.MESSAGES,
            lambda c, h: c.beta.messages.stream(model="claude-x", max_tokens=64, messages=MSGS, extra_headers=h),
            helper="until_done"),
]  # fmt: skip

FAULTS = [f for f in F.SERVER_FAULTS]
CASES = [
    pytest.param(s, f, id=f"{s.id}-{f}")
    for s in SURFACES
    for f in FAULTS
    if F.is_supported(f, s.surface) and not (s.resume and f in (F.HTTP_429, F.OVERLOADED, F.NO_HEADERS, F.KEEPALIVE))
]


@dataclass
class Seen:
    items: int = 0
    exc: BaseException | None = None


def client(provider: FakeProvider, spec: Surface, is_async: bool, timeout: float = 10.0) -> Any:
    # a plain-HTTP client of our own: the SDKs' default one loads the CA bundle (~45 ms per client)
    lib = ANTHROPIC_HTTP if spec.sdk == "anthropic" else OPENAI_HTTP
    http = lib.AsyncClient(verify=False) if is_async else lib.Client(verify=False)
    if spec.sdk == "anthropic":
        cls: Any = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        return cls(**provider.anthropic_kwargs(max_retries=0, timeout=timeout, http_client=http))
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(**provider.openai_kwargs(max_retries=0, timeout=timeout, http_client=http))


def consume_sync(spec: Surface, c: Any, headers: dict[str, str]) -> Seen:
    seen = Seen()
    try:
        if not spec.helper:
            with spec.open(c, headers) as stream:
                for _ in stream:
                    seen.items += 1
        else:
            with spec.open(c, headers) as s:
                if spec.helper == "iter":
                    for _ in s:
                        seen.items += 1
                elif spec.helper == "text":
                    for _ in s.text_stream:
                        seen.items += 1
                else:
                    s.until_done()
    except Exception as exc:
        seen.exc = exc
    return seen


async def consume_async(spec: Surface, c: Any, headers: dict[str, str]) -> Seen:
    seen = Seen()
    try:
        if not spec.helper:
            stream = await spec.open(c, headers)
            async with stream:
                async for _ in stream:
                    seen.items += 1
        else:
            async with spec.open(c, headers) as s:
                if spec.helper == "iter":
                    async for _ in s:
                        seen.items += 1
                elif spec.helper == "text":
                    async for _ in s.text_stream:
                        seen.items += 1
                else:
                    await s.until_done()
    except Exception as exc:
        seen.exc = exc
    return seen


def _prior_response(provider: FakeProvider, rec: RecordingListener) -> str:
    """A completed response the provider remembers, for the resume surfaces (its own report is discarded)."""
    oa = openai.OpenAI(**provider.openai_kwargs(max_retries=0, http_client=OPENAI_HTTP.Client(verify=False)))
    with oa.responses.create(model="gpt-4o-mini", input="hi", stream=True,
                             extra_headers={TOKENS_HEADER: "6"}) as s:  # fmt: skip
        rid = next(iter(s)).response.id
        for _ in s:
            pass
    rec.clear()
    return str(rid)


def run(provider: FakeProvider, rec: RecordingListener, spec: Surface, fault: str, is_async: bool,
        extra: dict[str, str] | None = None) -> tuple[Seen, Any]:  # fmt: skip
    """Open and consume one stream; returns what the caller saw and the provider's record of it."""
    if (reason := lacking(spec.id)) is not None:
        pytest.skip(reason)
    tag = f"t{next(_tags)}"
    headers = {FAULT_HEADER: fault, TAG: tag, TOKENS_HEADER: "6", **(extra or {})}
    if spec.resume:
        headers["rid"] = _prior_response(provider, rec)
    c = client(provider, spec, is_async, timeout=0.15 if fault == F.NO_HEADERS else 10.0)
    seen = asyncio.run(consume_async(spec, c, headers)) if is_async else consume_sync(spec, c, headers)
    records = [r for r in provider.requests if r.request_headers.get(TAG) == tag]
    assert len(records) == 1, records
    assert records[0].done.wait(5)
    return seen, records[0]


def _expected_exception(spec: Surface, fault: str) -> tuple[type[BaseException], ...] | None:
    oa = spec.sdk == "openai"
    if fault in (F.HTTP_500, F.HTTP_429, F.OVERLOADED):
        return (openai.APIStatusError,) if oa else (anthropic.APIStatusError,)
    if fault == F.NO_HEADERS:
        return (openai.APITimeoutError,) if oa else (anthropic.APITimeoutError,)
    if fault == F.RESET:
        return CONNECTION_ERRORS
    if fault == F.ERROR and spec.surface != names.RESPONSES:
        return (openai.APIError,) if oa else (anthropic.APIStatusError,)
    return None


def _expected_class(spec: Surface, fault: str) -> str | None:
    """The error class each fault must come out as (the fake provider's codes are each provider's own)."""
    if F.EXPECTED_OUTCOME[fault] not in names.BAD_OUTCOMES:
        return None
    if fault == F.ERROR:
        return names.EC_OVERLOADED if spec.surface == names.MESSAGES else names.EC_SERVER_ERROR
    return {
        F.HTTP_500: names.EC_SERVER_ERROR, F.HTTP_429: names.EC_RATE_LIMITED, F.OVERLOADED: names.EC_OVERLOADED,
        F.NO_HEADERS: names.EC_TIMEOUT, F.RESET: names.EC_CONNECTION, F.CUT: names.EC_CUT,
        F.FAILED: names.EC_SERVER_ERROR,
    }[fault]  # fmt: skip


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(("spec", "fault"), CASES)
def test_fault_matrix(provider: FakeProvider, rec: RecordingListener, spec: Surface, fault: str,
                      is_async: bool) -> None:  # fmt: skip
    seen, record = run(provider, rec, spec, fault, is_async)
    want_exc = _expected_exception(spec, fault)
    if want_exc is None:
        assert seen.exc is None, repr(seen.exc)
    else:
        assert isinstance(seen.exc, want_exc), repr(seen.exc)
    r = rec.one()
    assert r.outcome == F.EXPECTED_OUTCOME[fault], (r.outcome, r.error_type)
    assert r.error_class == _expected_class(spec, fault), (r.error_type, r.error_class)
    assert r.surface == spec.surface and r.resumed is spec.resumed
    assert (r.server_address, r.server_port) == ("127.0.0.1", provider.port)
    assert r.retries == 0
    assert rec.finished_handles == [rec.started[0].handle]
    if r.outcome == names.HTTP_ERROR:
        assert r.events == 0 and r.time_to_first_delta_ns is None
        return
    assert r.request_id is not None and r.request_id.startswith("req_")
    events, comments = wire.sse_events(record.wire)
    want = wire.expected(spec.surface, events, after=AFTER if spec.resume == "client" else None)
    assert (r.events, r.deltas) == (want.events, want.deltas), want
    assert (r.usage.input_tokens, r.usage.output_tokens) == (want.input_tokens, want.output_tokens)
    # comment lines are counted where the body's bytes pass (the SDKs' decoders drop them), Anthropic's pings where
    # the SDK skips them
    assert r.keepalives == want.pings + comments
    assert r.done_sentinel is want.done
    if not spec.helper:
        # a raw stream yields each wire event to the caller once (openai never yields [DONE], anthropic skips ping)
        assert seen.items == want.events
    assert r.time_to_first_delta_ns is not None and r.time_to_first_event_ns is not None
    assert 0 < r.time_to_first_event_ns <= r.time_to_first_delta_ns
    if fault == F.SLOW_FIRST:
        # the scripted 0.2 s pause before the first delta, measured from the send (never from the headers), and
        # never much more than that (the SDK's one-time parse setup is long paid by now)
        assert 200_000_000 <= r.time_to_first_delta_ns < 1_000_000_000
        assert r.time_to_first_event_ns < 200_000_000 or spec.resume == "server" or spec.surface == names.COMPLETIONS
    if fault == F.STALL:
        # the wait is timed from the pull after the previous event, a little after the server began its pause
        assert r.max_wait_ns >= 180_000_000 and r.time_to_first_delta_ns < 200_000_000
    if spec.surface == names.RESPONSES:
        assert r.response_id == record.response_id
        assert r.sequence.first == want.first_seq
        assert r.sequence.bad_start is False
        assert (r.sequence.gaps, r.sequence.duplicates) == (int(fault == F.SEQ_GAP), int(fault == F.SEQ_DUP))
    if r.outcome == names.ERROR:
        assert r.error_type in ("server_error", "overloaded_error"), r.error_type
