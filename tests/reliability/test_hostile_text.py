"""Hostile strings from the caller and the server through the real openai SDK against a local server (issue 21,
defect 1): a lone-surrogate model must not break the Prometheus scrape nor drop a batch of spans on its way to an
OTLP/HTTP receiver, and server-sent ids, models and finish reasons reach the span cleaned."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import unicodedata
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import CollectorRegistry, Counter, generate_latest

import otelstream
from otelstream import names
from tests.support.instrumented import instrumented
from tests.support.raw_server import raw_server

SURROGATE_MODEL = "gpt-4o\udce9"
MESSAGES = [{"role": "user", "content": "x"}]


def _chunk(**fields: Any) -> bytes:
    # json.dumps escapes a lone surrogate as \udce9, which the SDK's JSON decoder turns back into one
    return b"data: " + json.dumps({"object": "chat.completion.chunk", **fields}).encode() + b"\n\n"


def _chat_body(id_: str = "chatcmpl-1", model: str = "gpt-4o", finish: str = "stop") -> bytes:
    return (
        _chunk(id=id_, model=model, choices=[{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}])
        + _chunk(id=id_, model=model, choices=[{"index": 0, "delta": {}, "finish_reason": finish}])
        + b"data: [DONE]\n\n"
    )


def _surrogate_request(client: openai.OpenAI) -> None:
    with pytest.raises(UnicodeEncodeError):  # the SDK's own error: the caller sees it, instrumented or not
        client.chat.completions.create(model=SURROGATE_MODEL, messages=MESSAGES, stream=True)  # type: ignore[arg-type]


def _stream(client: openai.OpenAI, model: str = "gpt-4o") -> None:
    with client.chat.completions.create(model=model, messages=MESSAGES, stream=True) as s:  # type: ignore[arg-type]
        for _ in s:
            pass


def _assert_clean(text: str, limit: int = names.MAX_TEXT_LENGTH) -> None:
    text.encode("utf-8")
    assert len(text) <= limit
    assert all(unicodedata.category(ch)[0] != "C" for ch in text), ascii(text)


def test_surrogate_model_leaves_the_scrape_working_and_the_label_clean() -> None:
    with raw_server(_chat_body()) as url, instrumented() as inst:
        app = Counter("app_requests", "the application's own metric", registry=inst.registry)
        client = openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)
        try:
            _surrogate_request(client)
            _stream(client)
            app.inc()
        finally:
            client.close()
        spans = inst.finished()
        text = generate_latest(inst.registry).decode("utf-8")  # raised UnicodeEncodeError before the fix
    assert "app_requests_total 1.0" in text
    assert f'{names.LABEL_MODEL}="gpt-4o\ufffd"' in text  # the http_error stream
    assert inst.streams_total(gen_ai_request_model="gpt-4o\ufffd", outcome=names.HTTP_ERROR) == 1
    assert inst.streams_total(gen_ai_request_model="gpt-4o", outcome=names.COMPLETED) == 1
    assert sorted(s.name for s in spans) == ["chat gpt-4o", "chat gpt-4o\ufffd"]
    bad = next(s for s in spans if s.name != "chat gpt-4o")
    assert (bad.attributes or {})[names.ATTR_REQUEST_MODEL] == "gpt-4o\ufffd"


class _Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        super().__init__(("127.0.0.1", 0), _OtlpHandler)


class _OtlpHandler(http.server.BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.requests.append(request)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def otlp_receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_otlp_batch_with_a_surrogate_model_span_arrives_whole() -> None:
    """20 healthy streams and one surrogate-model request in one BatchSpanProcessor batch: all 21 spans arrive
    (before the fix the encoder raised and the processor dropped the whole batch: 0 of 21)."""
    with raw_server(_chat_body()) as url, otlp_receiver() as receiver:
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces", timeout=10)
        tp = TracerProvider()
        tp.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=600_000))  # export on flush only
        otelstream.uninstrument()
        otelstream.instrument(tracer_provider=tp, registry=CollectorRegistry())
        client = openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)
        try:
            for i in range(10):
                _stream(client, f"gpt-{i}")
            _surrogate_request(client)
            for i in range(10, 20):
                _stream(client, f"gpt-{i}")
            assert otelstream.flush(timeout=30.0)
        finally:
            client.close()
            otelstream.uninstrument()
            tp.shutdown()
    received = [s for r in receiver.requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert len(receiver.requests) == 1
    assert len(received) == 21
    assert sorted(s.name for s in received) == sorted([f"chat gpt-{i}" for i in range(20)] + ["chat gpt-4o\ufffd"])


def test_server_strings_reach_the_span_cleaned() -> None:
    """Ids, models and finish reasons a server sends with lone surrogates, control and bidi characters."""
    evil = "\udce9\u202e\n\x00"
    body = _chat_body(id_="chatcmpl-" + evil, model="gpt-4o" + evil, finish="stop" + evil)
    with raw_server(body) as url, instrumented() as inst:
        client = openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)
        try:
            _stream(client, "gpt-4o")
        finally:
            client.close()
        (span,) = inst.finished()
        generate_latest(inst.registry)
    encode_spans([span]).SerializeToString()  # the OTLP exporter's encoder on the batch
    attrs = span.attributes or {}
    cleaned = "\ufffd" * len(evil)
    assert attrs[names.ATTR_RESPONSE_ID] == "chatcmpl-" + cleaned
    assert attrs[names.ATTR_RESPONSE_MODEL] == "gpt-4o" + cleaned
    assert attrs[names.ATTR_RESPONSE_FINISH_REASONS] == ("stop" + cleaned,)
    for value in attrs.values():
        for text in value if isinstance(value, tuple) else (value,):
            if isinstance(text, str):
                _assert_clean(text)
