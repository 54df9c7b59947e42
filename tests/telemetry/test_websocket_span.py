"""Responses WebSocket mode through the real openai client and the fake provider's WebSocket port: the connection span
``otelstream.websocket`` (opened once per connection, ended exactly once on every close path, reconnects as events),
per-response CLIENT spans under it, and the Prometheus samples per outcome."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import SpanKind, StatusCode

import otelstream
from otelstream import names
from otelstream.demo.exchange import WS_FAULT_KEY
from otelstream.demo.provider import FakeProvider
from tests.support.sdk_features import OPENAI_WEBSOCKET_OBSERVED, WITHOUT_WEBSOCKET
from tests.telemetry.harness import FAULT_FOR, MODELS, Seen, Telemetry, key, supports

pytest.importorskip("websockets")
pytestmark = pytest.mark.skipif(not OPENAI_WEBSOCKET_OBSERVED, reason=WITHOUT_WEBSOCKET)

WS = names.RESPONSES_WEBSOCKET
MODEL = MODELS[WS]
TERMINAL = {"response.completed", "response.incomplete", "response.failed", "error"}
OUTCOMES = [o for o in FAULT_FOR if supports(WS, o)]


def _client(provider: FakeProvider) -> openai.OpenAI:
    return openai.OpenAI(**provider.openai_kwargs(max_retries=0))


def _create(conn: Any, outcome: str, **extra: Any) -> None:
    conn.response.create(model=MODEL, input="hi", metadata={WS_FAULT_KEY: FAULT_FOR[outcome]}, **extra)


def _consume(conn: Any, outcome: str, seen: Seen, responses: int = 1) -> None:
    done = 0
    try:
        for event in conn:
            seen.items.append(event)
            if str(event.type).endswith(".delta"):
                seen.deltas += 1
                if outcome == names.ABANDONED and seen.deltas == 2:
                    return
            if event.type in TERMINAL:
                done += 1
                if done == responses:
                    return
    except Exception as exc:  # websockets' ConnectionClosedError on an abnormal drop
        seen.exc = exc


def _conn_spans(tel: Telemetry) -> list[ReadableSpan]:
    return [s for s in tel.ours() if s.name == names.SPAN_WEBSOCKET]


def _response_spans(tel: Telemetry) -> list[ReadableSpan]:
    return [s for s in tel.ours() if s.name != names.SPAN_WEBSOCKET]


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_ws_outcome_spans_and_samples(tel: Telemetry, provider: FakeProvider, outcome: str) -> None:
    client = _client(provider)
    seen = Seen()
    server_ends = outcome in (names.CUT, names.TRANSPORT_ERROR)
    with tel.tracer.start_as_current_span("caller") as parent:
        seen.parent = parent
        with client.responses.connect() as conn:
            _create(conn, outcome)
            _consume(conn, outcome, seen)
            tel.flush()
            # the server closing or dropping the socket ends the connection span by itself (no reconnect asked for);
            # otherwise it is still open here and ends at the caller's close (the context exit)
            assert len(_conn_spans(tel)) == (1 if server_ends else 0)
    client.close()
    tel.flush()

    [cspan] = _conn_spans(tel)
    [rspan] = _response_spans(tel)
    # a connection is not a call: INTERNAL, so span metrics and service graphs count only the responses
    assert (cspan.kind, rspan.kind) == (SpanKind.INTERNAL, SpanKind.CLIENT)
    assert cspan.parent is not None and cspan.parent.span_id == parent.get_span_context().span_id
    assert rspan.parent is not None and rspan.parent.span_id == cspan.context.span_id
    assert rspan.name == f"chat {MODEL}"
    assert dict(cspan.attributes or {}) == {
        names.ATTR_PROVIDER_NAME: names.PROVIDER_OPENAI, names.ATTR_SURFACE: WS,
        names.ATTR_SERVER_ADDRESS: "127.0.0.1", names.ATTR_SERVER_PORT: provider.ws_port,
        **({names.ATTR_ERROR_TYPE: "websocket_close_1006"} if outcome == names.TRANSPORT_ERROR else {}),
    }  # fmt: skip
    if outcome == names.TRANSPORT_ERROR:
        assert cspan.status.status_code is StatusCode.ERROR
    else:
        assert cspan.status.status_code is StatusCode.UNSET
    assert rspan.end_time <= cspan.end_time  # type: ignore[operator]

    a = dict(rspan.attributes or {})
    assert a[names.ATTR_OUTCOME] == outcome
    assert a[names.ATTR_SURFACE] == WS and a[names.ATTR_REQUEST_MODEL] == MODEL
    assert a[names.ATTR_SERVER_PORT] == provider.ws_port and a[names.ATTR_OPENAI_API_TYPE] == "responses"
    assert a[names.ATTR_DELTAS] == seen.deltas
    assert a[names.ATTR_EVENTS] == len(seen.items)
    assert names.ATTR_STREAM_ID not in a
    # the fake provider's codes are server_error; an abnormal close (1006) is the connection breaking
    klass = {names.FAILED: "server_error", names.ERROR: "server_error", names.CUT: "cut",
             names.TRANSPORT_ERROR: "connection"}.get(outcome, "")  # fmt: skip
    # every bad outcome here comes after deltas reached the caller
    phase = names.PHASE_DURING_OUTPUT if outcome in names.BAD_OUTCOMES else ""
    if outcome in names.BAD_OUTCOMES:
        assert rspan.status.status_code is StatusCode.ERROR and names.ATTR_ERROR_TYPE in a
        assert a[names.ATTR_ERROR_CLASS] == klass and a[names.ATTR_FAILURE_PHASE] == phase and seen.deltas
    else:
        assert rspan.status.status_code is StatusCode.UNSET and names.ATTR_ERROR_TYPE not in a
        assert names.ATTR_ERROR_CLASS not in a
    if outcome == names.ABANDONED:
        assert a[names.ATTR_ABANDONED_REASON] == names.ABANDON_CLOSE
    if outcome == names.COMPLETED:
        assert a[names.ATTR_USAGE_OUTPUT] == seen.deltas and a[names.ATTR_RESPONSE_FINISH_REASONS] == ("stop",)

    live = {
        names.LABEL_PROVIDER: "openai", names.LABEL_OPERATION: "chat", names.LABEL_MODEL: MODEL,
        names.LABEL_SERVER_ADDRESS: "127.0.0.1", names.LABEL_SERVER_PORT: str(provider.ws_port),
        names.LABEL_RESPONSE_MODEL: "",
    }  # fmt: skip
    common = {**live, names.LABEL_RESPONSE_MODEL: MODEL}
    samples = tel.samples()
    streams = key("otelstream_streams_total", **common, surface=WS, outcome=outcome, error_type=klass, phase=phase)
    assert samples[streams] == 1
    assert [k for k in samples if k[0] == "otelstream_streams_total"] == [streams]
    assert samples[key("gen_ai_client_operation_duration_seconds_count", **common, error_type=klass)]
    assert samples[key("gen_ai_client_operation_time_to_first_chunk_seconds_count", **common)] == 1
    assert samples[key("gen_ai_client_operation_time_per_output_chunk_seconds_count", **common)] == seen.deltas - 1
    assert samples[key("otelstream_streams_active", **live, surface=WS)] == 0


def test_ws_two_lanes_one_connection_span(tel: Telemetry, provider: FakeProvider) -> None:
    client = _client(provider)
    with client.responses.connect() as conn:
        _create(conn, names.COMPLETED, stream_id="a")
        _create(conn, names.COMPLETED, stream_id="b")
        _consume(conn, names.COMPLETED, Seen(), responses=2)
    client.close()
    tel.flush()
    [cspan] = _conn_spans(tel)
    lanes = sorted((s.attributes or {}).get(names.ATTR_STREAM_ID) for s in _response_spans(tel))
    assert lanes == ["a", "b"]
    assert all(s.parent and s.parent.span_id == cspan.context.span_id for s in _response_spans(tel))


def test_ws_connection_span_ends_on_gc(tel: Telemetry, provider: FakeProvider) -> None:
    client = _client(provider)
    manager = client.responses.connect()
    conn = manager.enter()
    _create(conn, names.COMPLETED)
    _consume(conn, names.COMPLETED, Seen())
    ws = conn._connection  # the socket: closed by hand below, the connection object is just dropped
    del manager, conn
    gc.collect()
    tel.flush()
    [cspan] = _conn_spans(tel)
    assert cspan.status.status_code is StatusCode.UNSET
    ws.close()
    client.close()


class _StartCounter(SpanProcessor):
    def __init__(self) -> None:
        self.started: list[str] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started.append(span.name)


def test_ws_lazy_connection_span_opens_once_under_a_race(
    tel: Telemetry, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection built before instrument(): the first threads to touch it race to open its span; one wins.
    Opening is slowed down so that the threads really overlap; spans *started* are counted (a losing duplicate
    would never end, so it would never reach the exporter)."""
    counter = _StartCounter()
    tel.tracer_provider.add_span_processor(counter)
    client = _client(provider)
    otelstream.uninstrument()
    with client.responses.connect() as conn:
        otelstream.instrument(tracer_provider=tel.tracer_provider, registry=tel.registry)
        pipeline = otelstream.instrumentation._pipeline
        opened = pipeline.connection_opened

        def slow_open(*args: Any) -> object:
            time.sleep(0.05)
            return opened(*args)

        monkeypatch.setattr(pipeline, "connection_opened", slow_open)
        n = 8
        barrier = threading.Barrier(n)

        def send(i: int) -> None:
            barrier.wait()
            _create(conn, names.COMPLETED, stream_id=f"lane{i}")

        threads = [threading.Thread(target=send, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        _consume(conn, names.COMPLETED, Seen(), responses=n)
    client.close()
    tel.flush()
    assert counter.started.count(names.SPAN_WEBSOCKET) == 1
    [cspan] = _conn_spans(tel)
    responses = _response_spans(tel)
    assert len(responses) == n
    assert all(s.parent and s.parent.span_id == cspan.context.span_id for s in responses)
    assert all((s.attributes or {})[names.ATTR_OUTCOME] == names.COMPLETED for s in responses)


def test_ws_reconnect_is_an_event(tel: Telemetry, provider: FakeProvider) -> None:
    client = _client(provider)
    attempts: list[int] = []
    holder: dict[str, Any] = {}

    def on_reconnecting(event: Any) -> None:
        attempts.append(event.close_code)
        _create(holder["conn"], names.COMPLETED)  # queued, flushed on the new socket
        return None

    with client.responses.connect(on_reconnecting=on_reconnecting, initial_delay=0.01, max_delay=0.02) as conn:
        holder["conn"] = conn
        _create(conn, names.TRANSPORT_ERROR)  # the server aborts the TCP connection mid-response: close code 1006
        seen = Seen()
        _consume(conn, names.COMPLETED, seen, responses=1)
        assert seen.exc is None and seen.items[-1].type == "response.completed"
    client.close()
    tel.flush()
    assert attempts == [1006]
    [cspan] = _conn_spans(tel)
    assert [(e.name, dict(e.attributes or {})) for e in cspan.events] == [
        (names.SPAN_EVENT_RECONNECT, {"close_code": 1006})
    ]
    assert cspan.status.status_code is StatusCode.UNSET  # it recovered; the caller closed it
    outcomes = sorted((s.attributes or {})[names.ATTR_OUTCOME] for s in _response_spans(tel))
    assert outcomes == [names.COMPLETED, names.TRANSPORT_ERROR]
    assert all(s.parent and s.parent.span_id == cspan.context.span_id for s in _response_spans(tel))


def test_ws_reconnect_given_up_ends_the_connection_span(tel: Telemetry, provider: FakeProvider) -> None:
    client = _client(provider)
    with client.responses.connect(on_reconnecting=lambda e: {"abort": True}) as conn:
        _create(conn, names.TRANSPORT_ERROR)
        seen = Seen()
        _consume(conn, names.TRANSPORT_ERROR, seen)
        assert seen.exc is not None
        tel.flush()
        [cspan] = _conn_spans(tel)  # ended when the reconnect gave up, before the caller's close
    client.close()
    tel.flush()
    assert len(_conn_spans(tel)) == 1
    assert cspan.status.status_code is StatusCode.ERROR
    assert (cspan.attributes or {})[names.ATTR_ERROR_TYPE] == "websocket_close_1006"
