"""The real export pipeline (``otelstream.instrument`` with a private CollectorRegistry and an in-memory span
exporter) over the real clients against the fake provider: one span and one ``otelstream_streams_total`` count per
stream, with the outcome the fault asks for, sync and async."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo.exchange import FAULT_HEADER, TOKENS_HEADER
from otelstream.demo.provider import FakeProvider
from tests.support.instrumented import Instrumented, instrumented, outcome_of
from tests.support.sdk_features import OPENAI_HTTP

FAULTS = [F.OK, F.CUT, F.RESET, F.ERROR, F.INCOMPLETE, F.HTTP_500]


@pytest.fixture
def pipe() -> Iterator[Instrumented]:
    with instrumented() as p:
        yield p


def _consume(provider: FakeProvider, fault: str, is_async: bool) -> None:
    kwargs: Any = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                   "stream_options": {"include_usage": True},
                   "extra_headers": {FAULT_HEADER: fault, TOKENS_HEADER: "4"}}  # fmt: skip
    if not is_async:
        client = openai.OpenAI(**provider.openai_kwargs(max_retries=0, http_client=OPENAI_HTTP.Client(verify=False)))
        try:
            with client.chat.completions.create(**kwargs) as s:
                for _ in s:
                    pass
        except (openai.OpenAIError, OPENAI_HTTP.TransportError):  # a cut body: wrapped by openai 3.14+
            pass
        return

    async def go() -> None:
        http = OPENAI_HTTP.AsyncClient(verify=False)
        client = openai.AsyncOpenAI(**provider.openai_kwargs(max_retries=0, http_client=http))
        try:
            s = await client.chat.completions.create(**kwargs)
            async with s:
                async for _ in s:
                    pass
        except (openai.OpenAIError, OPENAI_HTTP.TransportError):
            pass

    asyncio.run(go())


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_spans_and_metrics_per_stream(provider: FakeProvider, pipe: Instrumented, is_async: bool) -> None:
    for fault in FAULTS:
        _consume(provider, fault, is_async)
    spans = [s for s in pipe.finished() if (s.attributes or {}).get(names.ATTR_OUTCOME) is not None]
    assert sorted(outcome_of(s) for s in spans) == sorted(F.EXPECTED_OUTCOME[f] for f in FAULTS)
    for fault in FAULTS:
        want = F.EXPECTED_OUTCOME[fault]
        assert pipe.streams_total(surface=names.CHAT_COMPLETIONS, outcome=want) == 1, want
    assert pipe.dropped_total() == 0
