"""Each fault produces the wire bytes it claims: the recorded bodies, read raw and through ``otelstream check``."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from otelstream import names, offline
from otelstream.demo import faults as F
from otelstream.demo.bodies import build_events
from otelstream.demo.events import DELTA, Event, StreamSpec, words_for
from otelstream.demo.exchange import FAULT_HEADER
from otelstream.demo.pacing import Pacing, Pause, script
from otelstream.demo.provider import FakeProvider, serve
from tests.demo.harness import TAG_HEADER, payloads, record_for, sse_blocks, tag
from tests.support.sdk_features import OPENAI_WEBSOCKET_LANES, WITHOUT_WEBSOCKET_LANES
from tests.support.surfaces import SSE_SURFACES

BODY_FAULTS = [f for f in F.SERVER_FAULTS if f not in (F.HTTP_500, F.HTTP_429, F.OVERLOADED, F.NO_HEADERS)]
CASES = [(s, f) for f in BODY_FAULTS for s in SSE_SURFACES if F.is_supported(f, s)]
PATHS = {
    names.RESPONSES: "/v1/responses",
    names.CHAT_COMPLETIONS: "/v1/chat/completions",
    names.COMPLETIONS: "/v1/completions",
    names.MESSAGES: "/v1/messages",
}
# what `check` reports for the recorded body: a reset body, recorded up to the break, reads as a cut offline
CHECK_OUTCOME = {**F.EXPECTED_OUTCOME, F.RESET: names.CUT}


def fetch(provider: FakeProvider, surface: str, fault: str, **body: Any) -> tuple[Any, bytes]:
    """POST with a raw HTTP client (no SDK in the way); returns the record and the bytes the client read."""
    t = tag()
    payload = {"model": "m", "stream": True, **body}
    got = bytearray()
    with httpx2.Client(timeout=5.0) as client:
        try:
            with client.stream("POST", provider.base_url + PATHS[surface], json=payload,
                               headers={FAULT_HEADER: fault, TAG_HEADER: t}) as resp:  # fmt: skip
                for chunk in resp.iter_bytes():
                    got += chunk
        except httpx2.RemoteProtocolError:
            assert fault == F.RESET
    return record_for(provider, t), bytes(got)


def check_json(tmp_path: Path, name: str, wire: bytes, capsys: pytest.CaptureFixture[str], suffix: str = ".sse") -> Any:
    path = tmp_path / f"{name}{suffix}"
    path.write_bytes(wire)
    capsys.readouterr()
    assert offline.main(["--json", str(path)]) == 0
    return json.loads(capsys.readouterr().out)


def _usage_body(surface: str) -> dict[str, Any]:
    return {"stream_options": {"include_usage": True}} if surface == names.CHAT_COMPLETIONS else {}


@pytest.mark.parametrize(("surface", "fault"), CASES)
def test_wire_shape(provider: FakeProvider, surface: str, fault: str) -> None:
    rec, got = fetch(provider, surface, fault, **_usage_body(surface))
    assert rec.wire == got, "the recorded body is exactly what the client read"
    assert rec.status == 200 and rec.ended == ("reset" if fault == F.RESET else "eof")
    blocks = sse_blocks(rec.wire)
    datas = payloads(rec.wire)
    objs = [d for d in datas if isinstance(d, dict)]
    types = [d.get("type") for d in objs]
    seqs = [d["sequence_number"] for d in objs if "sequence_number" in d]
    terminal = {
        names.RESPONSES: {"response.completed", "response.failed", "response.incomplete"},
        names.MESSAGES: {"message_stop"},
    }
    if surface == names.RESPONSES:
        assert all(b["event"] == json.loads(b["data"])["type"] for b in blocks if b["data"] not in (None, "[DONE]"))
    if surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS):
        assert all(b["event"] is None for b in blocks), "OpenAI chunks carry no `event:` line"
    ends_done = datas[-1] == "[DONE]"
    if fault in (F.CUT, F.RESET):
        assert not ends_done and not (set(types) & terminal.get(surface, set()))
        assert not any(c.get("finish_reason") for d in objs for c in d.get("choices", []))
    elif fault == F.FAILED:
        assert types[-1] == "response.failed"
    elif fault == F.INCOMPLETE:
        if surface == names.RESPONSES:
            assert types[-1] == "response.incomplete"
        elif surface == names.MESSAGES:
            assert [d["delta"]["stop_reason"] for d in objs if d["type"] == "message_delta"] == ["max_tokens"]
        else:
            assert [c["finish_reason"] for d in objs for c in d["choices"] if c["finish_reason"]] == ["length"]
    elif fault == F.ERROR:
        if surface == names.RESPONSES:
            assert types[-2:] == ["error", "response.failed"]
        elif surface == names.MESSAGES:
            assert blocks[-1]["event"] == "error" and objs[-1]["error"]["type"] == "overloaded_error"
        else:
            assert set(objs[-1]) == {"error"} and not ends_done
    else:  # ends normally
        if surface == names.RESPONSES:
            assert types[-1] == "response.completed"
            assert ends_done == (fault == F.TRAILING_DONE)
        elif surface == names.MESSAGES:
            assert types[-1] == "message_stop"
        else:
            assert ends_done
    if surface == names.RESPONSES:
        if fault == F.SEQ_GAP:
            assert len(set(seqs)) == len(seqs) and max(seqs) == len(seqs)  # exactly one number missing
        elif fault == F.SEQ_DUP:
            assert len(seqs) == len(set(seqs)) + 1 and seqs == sorted(seqs)
        else:
            assert seqs == list(range(len(seqs)))
    comments = sum(len(b["comments"]) for b in blocks)
    pings = sum(1 for b in blocks if b["event"] == "ping")
    if fault == F.KEEPALIVE:
        assert comments >= 2
        assert pings >= (3 if surface == names.MESSAGES else 0)
    else:
        assert comments == 0
    if surface != names.MESSAGES:
        assert pings == 0, "the openai SDK would yield an `event: ping` block to the caller"


@pytest.mark.parametrize(("surface", "fault"), CASES)
def test_check_reads_what_the_fault_claims(
    provider: FakeProvider, surface: str, fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec, _ = fetch(provider, surface, fault, **_usage_body(surface))
    report = check_json(tmp_path, f"{surface}-{fault}", rec.wire, capsys)
    assert report["surface"] == surface
    assert report["outcome"] == CHECK_OUTCOME[fault], report
    seq = report["sequence"]
    anomalies = {a["kind"] for a in report["anomalies"]}
    if surface == names.RESPONSES:
        assert seq["gaps"] == (1 if fault == F.SEQ_GAP else 0)
        assert seq["skipped"] == (1 if fault == F.SEQ_GAP else 0)
        assert seq["duplicates"] == (1 if fault == F.SEQ_DUP else 0)
        assert seq["out_of_order"] == 0 and not seq["bad_start"]
        assert (names.ANOM_TRAILING_DONE in anomalies) == (fault == F.TRAILING_DONE)
    if fault == F.KEEPALIVE:
        assert report["keepalives"] >= 2
    if fault == F.ERROR:
        assert report["error_type"] == ("overloaded_error" if surface == names.MESSAGES else "server_error")
    assert report["deltas"] > 0
    if CHECK_OUTCOME[fault] in (names.COMPLETED, names.INCOMPLETE) and surface != names.COMPLETIONS:
        # the server reports one output token per delta it meant to send (a lost event still counted)
        expected = report["deltas"] - (1 if fault == F.SEQ_DUP else 0) + (1 if fault == F.SEQ_GAP else 0)
        assert report["usage"]["output_tokens"] == expected
    if surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS) and CHECK_OUTCOME[fault] == names.COMPLETED:
        assert report["done_sentinel"] is True
        assert names.ANOM_MISSING_DONE not in anomalies


@pytest.mark.skipif(not OPENAI_WEBSOCKET_LANES, reason=WITHOUT_WEBSOCKET_LANES)
@pytest.mark.parametrize("fault", [F.OK, F.FAILED, F.INCOMPLETE, F.ERROR, F.SEQ_GAP, F.SEQ_DUP, F.CUT])
def test_websocket_transcript_through_check(
    provider: FakeProvider, fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = openai.OpenAI(**provider.openai_kwargs(max_retries=0))
    t = tag()
    with client.responses.connect(extra_headers={TAG_HEADER: t}) as conn:
        conn.response.create(model="m", input="x", stream_id="lane-1", metadata={"otelstream_fault": fault})
        for event in conn:
            if event.type in ("response.completed", "response.failed", "response.incomplete", "error"):
                break
    rec = record_for(provider, t)
    assert rec.suffix == ".jsonl"
    lines = [json.loads(x) for x in rec.wire.decode().splitlines()]
    assert all(x.get("stream_id") == "lane-1" for x in lines)
    report = check_json(tmp_path, f"ws-{fault}", rec.wire, capsys, suffix=".jsonl")
    assert report["surface"] == names.RESPONSES_WEBSOCKET
    (lane,) = report["lanes"]
    assert lane["stream_id"] == "lane-1"
    assert lane["outcome"] == F.EXPECTED_OUTCOME[fault]
    assert lane["sequence"]["gaps"] == (1 if fault == F.SEQ_GAP else 0)
    assert lane["sequence"]["duplicates"] == (1 if fault == F.SEQ_DUP else 0)


def test_http_faults_answer_before_streaming(provider: FakeProvider) -> None:
    for surface in SSE_SURFACES:
        for fault, status in ((F.HTTP_500, 500), (F.HTTP_429, 429),
                              (F.OVERLOADED, 529 if surface == names.MESSAGES else 503)):  # fmt: skip
            rec, got = fetch(provider, surface, fault)
            assert rec.status == status and rec.events_sent == 0
            body = json.loads(got)
            assert (body["type"] == "error") if surface == names.MESSAGES else ("error" in body)


def test_no_headers_holds_until_the_client_gives_up(provider: FakeProvider) -> None:
    t = tag()
    t0 = time.monotonic()
    with httpx2.Client(timeout=httpx2.Timeout(5.0, read=0.2)) as client, pytest.raises(httpx2.ReadTimeout):
        client.post(provider.base_url + "/v1/chat/completions", json={"model": "m", "stream": True},
                    headers={FAULT_HEADER: F.NO_HEADERS, TAG_HEADER: t})  # fmt: skip
    rec = record_for(provider, t)  # the server notices the client left, well before no_headers_s
    assert rec.status == 0 and rec.ended == "no_headers"
    assert rec.t_end - t0 < 2.0


def test_same_seed_same_bodies() -> None:
    def bodies() -> list[bytes]:
        with serve(record=True, seed=3, pacing=Pacing(ttfd_s=0, gap_s=0), websocket=False) as p:
            for surface in SSE_SURFACES:
                fetch(p, surface, F.OK)
            assert p.wait_idle()
            return [r.wire for r in p.requests]

    first, second = bodies(), bodies()
    assert first == second and all(first)


def test_server_side_mix_draws_supported_faults_only() -> None:
    with serve(mix="failed=50,trailing_done=50", seed=1, pacing=Pacing(ttfd_s=0, gap_s=0), websocket=False) as p:
        for _ in range(10):
            fetch(p, names.CHAT_COMPLETIONS, "")  # no header: drawn from the mix, none applies to chat → ok
            fetch(p, names.RESPONSES, "")
        assert p.wait_idle()
        chat = {r.fault for r in p.requests if r.surface == names.CHAT_COMPLETIONS}
        resp = {r.fault for r in p.requests if r.surface == names.RESPONSES}
    assert chat == {F.OK} and resp == {F.FAILED, F.TRAILING_DONE}


def test_close_is_prompt_with_streams_mid_pause() -> None:
    p = serve(pacing=Pacing(ttfd_s=30.0)).__enter__()
    errors: list[BaseException] = []

    def client() -> None:
        try:
            with httpx2.Client(timeout=60) as c, c.stream("POST", p.base_url + "/v1/responses",
                                                           json={"model": "m", "stream": True}) as r:  # fmt: skip
                for _ in r.iter_bytes():
                    pass
        except BaseException as exc:  # the server drops the stream: any transport error is fine
            errors.append(exc)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(20)]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 5
    while len(p.requests) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    p.__exit__(None, None, None)
    assert time.monotonic() - t0 < 2.0
    for th in threads:
        th.join(5)
    assert not any(th.is_alive() for th in threads)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", p.port), timeout=1):
        pass


def test_pure_builders_are_deterministic_and_paced() -> None:
    rng = random.Random(5)
    spec = StreamSpec(names.RESPONSES, F.STALL, words=words_for(rng, 10))
    events = build_events(spec)
    steps = script(events, spec, Pacing(ttfd_s=0.1, gap_s=0.01, pause_s=1.0), random.Random(1))
    pauses = [s.seconds for s in steps if isinstance(s, Pause)]
    assert max(pauses) == pytest.approx(1.01)  # the stall
    first_delta = next(i for i, s in enumerate(steps) if isinstance(s, Event) and s.kind == DELTA)
    assert sum(s.seconds for s in steps[:first_delta] if isinstance(s, Pause)) == pytest.approx(0.1)
    assert build_events(spec) == events
