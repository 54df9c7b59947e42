"""The client reading rules (``core.client_rules``), shared by ``otelstream check`` (an SDK's reading of a recording)
and the HTTP-level observer (a client that is not an SDK): one table, both clients."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from otelstream import names
from otelstream.core import client_rules as rules
from otelstream.core.client_rules import DONE, ClientReader, decode
from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.tracker import StreamTracker

CHAT_DELTA = b'{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}'
CHAT_STOP = b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
MSG_DELTA = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}'
MSG_START = b'{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1,"output_tokens":1}}}'
MSG_STOP = b'{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}'

Item = tuple[str | None, bytes | None] | str  # (name, data), or "comment"


def read(surface: str, items: list[Item], *, sdk: bool, unterminated: bool = False) -> StreamReport:
    ticks = itertools.count(1_000_000, 1_000_000)
    tracker = StreamTracker(StreamStart(surface=surface), clock=lambda: next(ticks))
    reader = ClientReader(tracker, sdk=sdk)
    for item in items:
        if item == "comment":
            reader.comments()
        else:
            assert isinstance(item, tuple)
            reader.event(item[0], decode(item[1]))
    if not tracker.ended:
        reader.finish(unterminated)
        tracker.end("eof")
    assert tracker.report is not None
    return tracker.report


def kinds(report: StreamReport) -> dict[str, int]:
    return dict(report.anomaly_counts)


def test_decode() -> None:
    assert decode(b"[DONE]") is DONE and decode("[DONE] trailing") is DONE
    assert decode(None) is rules.CUT and decode("[DONE]", cut=True) is DONE and decode("{}", cut=True) is rules.CUT
    assert decode(b"") is rules.EMPTY and decode("") is rules.EMPTY
    assert decode(b"nope") is rules.NOT_JSON and decode(b'{"a":"\xff"}') is rules.NOT_JSON
    assert decode("[" * 100_000) is rules.NOT_JSON
    assert decode(b'{"a":1}') == {"a": 1} and decode('"[DONE]"') == "[DONE]"  # a JSON string is not the sentinel


@pytest.mark.parametrize("sdk", [True, False])
def test_done_stops_an_openai_client(sdk: bool) -> None:
    """After ``[DONE]`` nothing more is read: the first data that decodes is flagged once; junk and comments are not
    read at all."""
    r = read(names.CHAT_COMPLETIONS, [(None, CHAT_DELTA), (None, b"[DONE]"), "comment", (None, b"junk"),
                                      (None, CHAT_DELTA), (None, CHAT_DELTA)], sdk=sdk)  # fmt: skip
    assert r.done_sentinel and r.deltas == 1 and r.keepalives == 0
    assert kinds(r)[names.ANOM_EVENT_AFTER_TERMINAL] == 1 and names.ANOM_UNDECODABLE not in kinds(r)


@pytest.mark.parametrize("sdk", [True, False])
def test_messages_named_events(sdk: bool) -> None:
    """Anthropic's clients read the ``event:`` name: ``ping`` is a keepalive, an unnamed event is skipped, an event
    without data is skipped, and they read on after ``[DONE]``."""
    r = read(names.MESSAGES, [("message_start", MSG_START), ("ping", b'{"type": "ping"}'), (None, MSG_DELTA),
                              ("content_block_delta", b""), ("content_block_delta", MSG_DELTA), (None, b"[DONE]"),
                              "comment", ("message_delta", MSG_STOP), ("message_stop", b'{"type":"message_stop"}')],
             sdk=sdk)  # fmt: skip
    assert (r.outcome, r.deltas, r.keepalives, r.finish_reasons) == (names.COMPLETED, 1, 2, ("end_turn",))
    assert r.done_sentinel and kinds(r) == {names.ANOM_UNKNOWN_EVENT: 1}


@pytest.mark.parametrize(("sdk", "outcome"), [(True, names.TRANSPORT_ERROR), (False, names.COMPLETED)])
def test_undecodable_data_ends_an_sdk_stream_only(sdk: bool, outcome: str) -> None:
    """An SDK raises on data it cannot decode (the stream ends there); another client may read on, and so does its
    reader: what it does next ends the stream."""
    for bad in (b"nope", b"", None):
        r = read(names.CHAT_COMPLETIONS, [(None, CHAT_DELTA), (None, bad), (None, CHAT_DELTA), (None, CHAT_STOP)],
                 sdk=sdk)  # fmt: skip
        assert r.outcome == outcome and kinds(r)[names.ANOM_UNDECODABLE] == 1, bad
        assert r.deltas == (1 if sdk else 2)
        assert r.error_class == ("protocol" if sdk else None)  # the SDK's JSONDecodeError, a ValueError


@pytest.mark.parametrize(("sdk", "outcome"), [(True, names.ERROR), (False, names.CUT)])
def test_an_undecodable_error_event(sdk: bool, outcome: str) -> None:
    """Anthropic's ``error`` event is read even without data: undecodable, it ends an SDK's stream as an error."""
    r = read(names.MESSAGES, [("message_start", MSG_START), ("content_block_delta", MSG_DELTA), ("error", b"{bad")],
             sdk=sdk)  # fmt: skip
    assert r.outcome == outcome and kinds(r) == {names.ANOM_UNDECODABLE: 1}
    assert r.anomalies[0].detail == "error event: data is not JSON"


@pytest.mark.parametrize("sdk", [True, False])
def test_unterminated_body(sdk: bool) -> None:
    r = read(names.CHAT_COMPLETIONS, [(None, CHAT_DELTA)], sdk=sdk, unterminated=True)
    assert kinds(r).get(names.ANOM_UNTERMINATED_EVENT) == 1
    stopped = read(names.CHAT_COMPLETIONS, [(None, CHAT_DELTA), (None, b"x")], sdk=True, unterminated=True)
    assert names.ANOM_UNTERMINATED_EVENT not in kinds(stopped)  # the SDK raised before the end of the body


def test_a_subclass_stamps_its_deliveries() -> None:
    """``otelstream check`` stamps a pull before each delivery on its synthetic clock (``offline.replay``)."""
    seen: list[Any] = []

    class Stamping(ClientReader):
        def deliver(self, value: Any, name: str | None) -> None:
            seen.append(value)
            super().deliver(value, name)

    t = StreamTracker(StreamStart(surface=names.CHAT_COMPLETIONS), clock=lambda: 1)
    reader = Stamping(t)
    for data in (CHAT_DELTA, b"[DONE]", CHAT_DELTA):
        reader.event(None, decode(data))
    assert len(seen) == 1


def test_payload_decodes_only_what_the_rules_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ping and an unnamed event are decided by their name: their data is not decoded (``[DONE]`` still is the
    sentinel, whatever the name)."""
    decoded: list[Any] = []
    decode_ = rules.decode
    monkeypatch.setattr(rules, "decode", lambda data, *a: decoded.append(data) or decode_(data, *a))
    t = StreamTracker(StreamStart(surface=names.MESSAGES), clock=lambda: 1)
    reader = ClientReader(t, sdk=False)
    assert reader.payload("ping", b'{"type": "ping"}') is None and reader.payload(None, MSG_DELTA) is None
    assert decoded == [] and t.keepalives == 1 and kinds(t.end("eof")) == {names.ANOM_UNKNOWN_EVENT: 1}  # type: ignore[arg-type]
    t = StreamTracker(StreamStart(surface=names.MESSAGES), clock=lambda: 1)
    reader = ClientReader(t, sdk=False)
    assert reader.payload("ping", "[DONE]") is DONE and t.done_seen and decoded == ["[DONE]"]
    assert reader.payload("message_start", MSG_START) == decode(MSG_START)
