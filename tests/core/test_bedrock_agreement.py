"""The core reads a Bedrock body as botocore does: for the same bytes (framed by the test encoder), botocore's own
event-stream parsing yields exactly the dicts ``core.bedrock`` builds from ``core.eventstream``'s messages, for
ConverseStream and for invoke streams; an exception message is botocore's ``EventStreamError`` of that code. This is
what lets the live adapters feed botocore's items and ``check`` feed decoded messages to the same protocol module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from otelstream.core import bedrock
from otelstream.core.eventstream import EventStreamDecoder
from tests.support import eventstream as enc

botocore_eventstream = pytest.importorskip("botocore.eventstream")
botocore_session = pytest.importorskip("botocore.session")
botocore_parsers = pytest.importorskip("botocore.parsers")
botocore_exceptions = pytest.importorskip("botocore.exceptions")


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self) -> Iterator[bytes]:
        for i in range(0, len(self.data), 7):  # small reads: the split does not matter
            yield self.data[i : i + 7]

    def close(self) -> None:
        pass


def by_botocore(operation: str, member: str, body: bytes) -> tuple[list[dict[str, Any]], str | None]:
    model = botocore_session.get_session().get_service_model("bedrock-runtime").operation_model(operation)
    shape = model.output_shape.members[member]
    stream = botocore_eventstream.EventStream(_Body(body), shape, botocore_parsers.EventStreamJSONParser(), operation)
    items: list[dict[str, Any]] = []
    try:
        items.extend(stream)
    except botocore_exceptions.EventStreamError as exc:  # the exception message: its code is compared
        return items, exc.response["Error"]["Code"]
    return items, None


CONVERSE = [
    ("messageStart", {"role": "assistant"}),
    ("contentBlockDelta", {"delta": {"reasoningContent": {"text": "hmm"}}, "contentBlockIndex": 0}),
    ("contentBlockDelta", {"delta": {"text": "Hi"}, "contentBlockIndex": 0}),
    ("contentBlockStart", {"start": {"toolUse": {"toolUseId": "t", "name": "f"}}, "contentBlockIndex": 1}),
    ("contentBlockDelta", {"delta": {"toolUse": {"input": "{}"}}, "contentBlockIndex": 1}),
    ("contentBlockStop", {"contentBlockIndex": 1}),
    ("messageStop", {"stopReason": "tool_use"}),
    ("metadata", {"usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3}, "metrics": {"latencyMs": 5}}),
]


@pytest.mark.parametrize("exception", [None, "throttlingException", "modelStreamErrorException"])
def test_converse_items_are_botocores(exception: str | None) -> None:
    body = enc.converse(*CONVERSE) + (enc.exception(exception, "no") if exception else b"")
    items, code = by_botocore("ConverseStream", "stream", body)
    ours = [bedrock.converse_event(m) for m in EventStreamDecoder().feed(body)]
    assert items == ours[: len(CONVERSE)]
    assert code == exception
    if exception:
        assert ours[-1] == {exception: {"message": "no"}}


def test_invoke_items_are_botocores() -> None:
    events = [{"type": "message_start", "message": {"id": "m"}}, {"type": "message_stop"}]
    body = enc.invoke(*events)
    items, code = by_botocore("InvokeModelWithResponseStream", "body", body)
    assert code is None and [bedrock.invoke_event(i) for i in items] == events
    decoded = [{m.event_type: bedrock.payload_json(m)} for m in EventStreamDecoder().feed(body)]
    assert [bedrock.invoke_event(d) for d in decoded] == events
