"""The canaries of the call-order facts in ``otelstream/adapters/inventory.py`` (kind ``call order``): each checked
on the SDK alone (not instrumented), as it runs a stream against the stand-in server. ``test_inventory.py`` runs
them with the other live canaries."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx2

from tests.support.clients import anthropic_client, openai_client

MSGS: Any = [{"role": "user", "content": "x"}]


def _recording_frames(stream: Any) -> list[Any]:
    """The SSE frames the stream's loop reads, in order, recorded as it reads them (an instance attribute shadows
    ``_iter_events``; anthropic's copy of the stream carries it)."""
    seen: list[Any] = []
    events = stream._iter_events

    def recording() -> Iterator[Any]:
        for sse in events():
            seen.append(sse)
            yield sse

    stream._iter_events = recording
    return seen


def _closes_only_inside_a_pull(open_stream: Callable[[], Any]) -> None:
    for variant in ("ok", "cut", "error", "drop"):
        stream = open_stream(variant)
        pulling = [False]
        during: list[bool] = []
        response = stream.response
        close = response.close

        def recorded_close(during: list[bool] = during, pulling: list[bool] = pulling, close: Any = close) -> None:
            during.append(pulling[0])
            close()

        response.close = recorded_close
        while True:
            pulling[0] = True
            try:
                next(stream)
            except StopIteration:
                break
            except Exception:  # the in-band error, the drop: the SDK's own close ran inside this pull
                break
            finally:
                pulling[0] = False
        assert during and all(during), f"{variant}: the SDK closed the response outside a pull"


def _openai_closes_inside_a_pull() -> None:
    client = openai_client(max_retries=0)
    _closes_only_inside_a_pull(lambda v: client.chat.completions.create(
        model="gpt-test", messages=MSGS, stream=True, extra_headers={"x-variant": v}))


def _anthropic_closes_inside_a_pull() -> None:
    client = anthropic_client(max_retries=0)
    _closes_only_inside_a_pull(lambda v: client.messages.create(
        model="claude-test", max_tokens=5, messages=MSGS, stream=True, extra_headers={"x-variant": v}))


class _OrderedBody(httpx2.SyncByteStream):
    def __init__(self, order: list[str]) -> None:
        self.order = order

    def __iter__(self) -> Iterator[bytes]:
        yield b"data: x\n\n"
        self.order.append("end")

    def close(self) -> None:
        self.order.append("close")


def _iteration_closes_after_the_end() -> None:
    order: list[str] = []
    response = httpx2.Response(200, stream=_OrderedBody(order))
    assert b"".join(response.iter_bytes()) == b"data: x\n\n"
    assert order[:1] == ["end"], order


def _openai_item_from_latest_frame() -> None:
    stream = openai_client().responses.create(model="gpt-test", input="x", stream=True)
    seen = _recording_frames(stream)
    for item in stream:
        data = json.loads(seen[-1].data)
        assert (data["type"], data["sequence_number"]) == (item.type, item.sequence_number)


def _openai_stops_at_done() -> None:
    stream = openai_client().chat.completions.create(model="gpt-test", messages=MSGS, stream=True)
    seen = _recording_frames(stream)
    assert list(stream)
    assert seen[-1].data.startswith("[DONE]")


def _anthropic_skips_pings() -> None:
    stream = anthropic_client().messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True,
                                                extra_headers={"x-variant": "keepalive"})
    seen = _recording_frames(stream)
    items = list(stream)
    assert any(sse.event == "ping" for sse in seen)
    assert not any(getattr(item, "type", None) == "ping" for item in items)


def _openai_yields_pings() -> None:
    stream = openai_client().responses.create(model="gpt-test", input="x", stream=True,
                                              extra_headers={"x-variant": "keepalive"})
    seen = _recording_frames(stream)
    items = list(stream)
    pings = sum(sse.event == "ping" for sse in seen)
    assert pings and sum(getattr(item, "type", None) == "ping" for item in items) == pings


ORDER_CANARIES: dict[tuple[str, str], Callable[[], None]] = {
    ("openai._streaming", "Stream.__stream__ closes the response only inside a pull"): _openai_closes_inside_a_pull,
    ("anthropic._streaming", "Stream.__stream__ closes the response only inside a pull"):
        _anthropic_closes_inside_a_pull,
    ("httpx2", "Response.iter_bytes closes the body after its end was read"): _iteration_closes_after_the_end,
    ("openai._streaming", "Stream.__stream__ builds each item from the latest frame"): _openai_item_from_latest_frame,
    ("openai._streaming", "Stream.__stream__ stops reading at [DONE]"): _openai_stops_at_done,
    ("anthropic._streaming", "Stream.__stream__ skips event: ping frames"): _anthropic_skips_pings,
    ("openai._streaming", "Stream.__stream__ yields event: ping frames"): _openai_yields_pings,
}  # fmt: skip
