"""The HTTP-level observer's plain deltas recognised on their bytes (``adapters/http/decoding.py``: a ``Shape`` learned
from a decoded plain delta) must report exactly what decoding every event reports: the same generated bodies, cut
into chunks at random, go to an observer that learns shapes and to one that decodes every event, and the two reports
must be equal in every field. The bodies mix plain deltas (compact and spaced JSON; OpenAI's, Mistral's and
Anthropic's padding; texts with quotes, backslashes, escapes and non-ASCII) with the events around them and with
near-misses: a plain delta's bytes with a quote, a backslash, a line end, a control character, a byte that is not
UTF-8 or a space put anywhere in them."""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelstream import names
from otelstream.adapters.calls import Call
from otelstream.adapters.http import body as http_body
from otelstream.adapters.http.decoding import Observed
from otelstream.core import client_rules
from otelstream.core.report import StreamReport, StreamStart
from otelstream.core.stream_listener import Ended
from otelstream.core.tracker import StreamTracker

SETTINGS = settings(
    max_examples=int(os.environ.get("OTELSTREAM_HYPOTHESIS_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class _Quiet:
    def __init__(self) -> None:
        self.reports: list[StreamReport] = []

    def stream_finished(self, ended: Ended, handle: object) -> None:
        report = ended.final_report()
        assert report is not None
        self.reports.append(report)


class _DecodeAll(Observed):
    """The reference: no shape is ever learned, every event is decoded."""

    def _learn(self, name: str | None, payload: bytes, value: dict[str, Any]) -> None:
        pass


def observe(cls: type[Observed], surface: str, chunks: list[bytes]) -> StreamReport:
    ticks = itertools.count(1_000_000, 1_000_000)
    listener = _Quiet()
    obs = cls(Call(StreamTracker(StreamStart(surface=surface, t_request_ns=1), clock=lambda: next(ticks)), listener))  # type: ignore[arg-type]
    for _ in http_body._iter_sync(iter(chunks), obs):
        pass
    (report,) = listener.reports
    return report


def _event(surface: str, kind: str, text: str, spaced: bool, pad: str, decoy: str | None = None) -> bytes:
    """One event; ``pad``: the provider's padding; ``decoy``: a string value of a key named like the text's, first
    in the event (what a shape is learned from is the first such value)."""
    sep = (", ", ": ") if spaced else (",", ":")
    obj: dict[str, Any]
    if surface == names.MESSAGES:
        name = "content_block_delta"
        if kind == "start":
            name, obj = "message_start", {"type": "message_start", "message": {
                "id": "m", "model": "c", "usage": {"input_tokens": 3, "output_tokens": 1}}}  # fmt: skip
        elif kind == "block":
            name, obj = "content_block_start", {"type": "content_block_start", "index": 1,
                                                "content_block": {"type": "text", "text": ""}}  # fmt: skip
        elif kind == "end":
            name, obj = "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                          "usage": {"output_tokens": 5}}  # fmt: skip
        elif kind == "thinking":
            obj = {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": text}}
        else:
            obj = {"type": "content_block_delta", "index": 1 if kind == "plain1" else 0,
                   "delta": {"type": "text_delta", "text": text}}  # fmt: skip
        if decoy is not None:
            obj = {"text": decoy, **obj}
        data = json.dumps(obj, separators=sep)
        if pad:  # Anthropic's: spaces before the last brace
            data = data[:-1] + " " * len(pad) + "}"
        return f"event: {name}\ndata: {data}\n\n".encode()
    choice: dict[str, Any] = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
    obj = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
    if kind == "start":
        choice["delta"] = {"role": "assistant", "content": ""}
    elif kind == "end":
        choice["delta"], choice["finish_reason"] = {}, "stop"
    elif kind == "usage":
        obj["choices"], obj["usage"] = [], {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    elif kind == "plain1":
        choice["index"] = 1
    elif kind == "thinking":
        choice["delta"] = {"reasoning_content": text}
    if pad:  # OpenAI's obfuscation
        obj["obfuscation"] = pad
    if decoy is not None:
        obj = {"content": decoy, **obj}
    return b"data: " + json.dumps(obj, separators=sep).encode() + b"\n\n"


texts = st.one_of(st.sampled_from(["Hi", " there", "", '"q"', "a\\b", "line\nend", "\u00e9\u2713", "}]", "\\"]),
                  st.text(max_size=6))  # fmt: skip
KINDS = ["plain", "plain", "plain", "plain", "plain1", "thinking", "usage", "comment", "done", "junk", "mutant"]


@st.composite
def bodies(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    surface = draw(st.sampled_from([names.CHAT_COMPLETIONS, names.MESSAGES]))
    spaced = draw(st.booleans())
    padded = draw(st.booleans())
    decoys = draw(st.booleans())

    def decoy() -> str | None:
        return draw(st.sampled_from(["a", "b", "cd"])) if decoys else None

    def pad() -> str:
        return draw(st.text(alphabet="abcXYZ019", min_size=1, max_size=12)) if padded else ""

    events = [_event(surface, "start", "", spaced, pad())]
    if surface == names.MESSAGES:
        events.append(_event(surface, "block", "", spaced, pad()))
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(KINDS))
        if kind == "comment":
            events.append(b": keepalive\n\n")
        elif kind == "done":
            events.append(b"data: [DONE]\n\n")
        elif kind == "junk":
            events.append(b"data: {not json\n\n")
        elif kind == "mutant":  # a plain delta's bytes with one byte put anywhere
            raw = _event(surface, "plain", draw(texts), spaced, pad(), decoy())
            at = draw(st.integers(0, len(raw)))
            byte = draw(st.sampled_from([b'"', b"\\", b"\n", b"\r", b" ", b"\t", b"\x00", b"\xff", b"x", b"}"]))
            events.append(raw[:at] + byte + raw[at:])
        else:
            events.append(_event(surface, kind, draw(texts), spaced, pad(), decoy()))
    if draw(st.booleans()):
        events.append(_event(surface, "end", "", spaced, pad()))
    raw = b"".join(events)
    how = draw(st.sampled_from(["events", "whole", "cuts"]))
    if how == "events":
        return surface, events
    if how == "whole":
        return surface, [raw]
    cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=10)))
    return surface, [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]


@SETTINGS
@given(bodies())
def test_shapes_report_what_decoding_every_event_reports(body: tuple[str, list[bytes]]) -> None:
    surface, chunks = body
    assert observe(Observed, surface, chunks) == observe(_DecodeAll, surface, chunks)


def test_plain_deltas_are_not_decoded(monkeypatch: Any) -> None:
    """Guards the test above against comparing decoding with itself: after the first plain delta of a layout, the
    rest of them are recognised on their bytes, padded or not, one event per chunk or several."""
    decoded: list[bytes] = []
    decode = client_rules.decode
    monkeypatch.setattr(client_rules, "decode", lambda data, *a: (decoded.append(data), decode(data, *a))[1])
    for surface in (names.CHAT_COMPLETIONS, names.MESSAGES):
        for spaced, padded, whole in itertools.product([False, True], repeat=3):
            events = [_event(surface, "start", "", spaced, "")]
            for i in range(40):
                events.append(_event(surface, "plain", f"t{i}", spaced, "xyz"[: i % 3 + 1] if padded else ""))
            decoded.clear()
            report = observe(Observed, surface, [b"".join(events)] if whole else events)
            assert report.deltas == 40 and len(decoded) <= 4, (surface, spaced, padded, whole, len(decoded))
