"""Privacy and exposure: no prompt, output, tool argument or API key in any span, span event, metric label,
exemplar or log line; the metrics server binds 127.0.0.1 by default; model labels stay capped whatever the traffic.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry

import otelstream
from otelstream import names
from tests.reliability.harness import FIGURES
from tests.support.body_clients import Bodies, Clients
from tests.support.instrumented import instrumented

MARK = uuid.uuid4().hex
PROMPT, OUTPUT, TOOL_ARG, KEY, ERRMSG, HEADER = (f"{p}{MARK}" for p in ("PROMPT", "OUTPUT", "TOOLARG", "sk-KEY",
                                                                        "ERRMSG", "HEADER"))  # fmt: skip
MARKERS = (PROMPT, OUTPUT, TOOL_ARG, KEY, ERRMSG, HEADER, MARK)


def _sse(data: str, event: str | None = None) -> bytes:
    return (f"event: {event}\n" if event else "").encode() + f"data: {data}\n\n".encode()


BODIES = {
    names.RESPONSES: _sse('{"type":"response.created","sequence_number":0,"response":{"id":"r","model":"m"}}')
    + _sse(f'{{"type":"response.output_text.delta","sequence_number":1,"delta":"{OUTPUT}"}}')
    + _sse(f'{{"type":"response.function_call_arguments.delta","sequence_number":2,"delta":"{TOOL_ARG}"}}')
    + _sse(f'{{"type":"error","sequence_number":3,"code":"server_error","message":"{ERRMSG}"}}'),
    names.CHAT_COMPLETIONS: _sse(f'{{"id":"c","object":"chat.completion.chunk","choices":[{{"index":0,'
                                 f'"delta":{{"content":"{OUTPUT}","tool_calls":[{{"index":0,"function":'
                                 f'{{"arguments":"{TOOL_ARG}"}}}}]}}}}]}}')
    + _sse(f'{{"error":{{"message":"{ERRMSG}","type":"server_error"}}}}'),
    names.COMPLETIONS: _sse(f'{{"id":"c","object":"text_completion","choices":[{{"index":0,"text":"{OUTPUT}"}}]}}'),
    names.MESSAGES: _sse('{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1}}}',
                         "message_start")
    + _sse(f'{{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":'
           f'"{TOOL_ARG}"}}}}', "content_block_delta")
    + _sse(f'{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{OUTPUT}"}}}}',
           "content_block_delta")
    + _sse(f'{{"type":"error","error":{{"type":"overloaded_error","message":"{ERRMSG}"}}}}', "error"),
}  # fmt: skip


class _HeaderBodies(Bodies):
    def __call__(self, request: Any) -> Any:
        response = super().__call__(request)
        response.headers["x-secret"] = HEADER
        return response


def _all_text(inst: Any) -> str:
    out: list[str] = []
    for span in inst.finished():
        out.append(span.name)
        out.append(repr(dict(span.attributes or {})))
        for ev in span.events:
            out.append(ev.name + repr(dict(ev.attributes or {})))
        out.append(repr(span.status.description))
    for metric in inst.registry.collect():
        for s in metric.samples:
            out.append(repr(s.labels) + repr(s.exemplar))
    return "\n".join(out)


def test_no_content_or_credential_is_ever_exported(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    handler = _HeaderBodies()
    clients = Clients(handler)
    clients.oa.api_key = KEY
    clients.an.api_key = KEY
    with instrumented(span_events=True) as inst:
        for surface, body in BODIES.items():
            handler.body = body
            try:
                if surface == names.RESPONSES:
                    stream: Any = clients.oa.responses.create(model="m", input=PROMPT, stream=True)
                elif surface == names.CHAT_COMPLETIONS:
                    stream = clients.oa.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": PROMPT}], stream=True)  # fmt: skip
                elif surface == names.COMPLETIONS:
                    stream = clients.oa.completions.create(model="m", prompt=PROMPT, stream=True)
                else:
                    msgs: Any = [{"role": "user", "content": PROMPT}]
                    stream = clients.an.messages.create(model="c", max_tokens=5, messages=msgs, stream=True)
                for _ in stream:
                    pass
            except Exception:  # the in-band errors raise in the SDK: expected
                pass
        text = _all_text(inst)
    # otelstream's own log lines (the SDKs log request bodies at DEBUG themselves: not ours to judge here)
    logs = "\n".join(r.getMessage() + repr(r.args) + repr(r.exc_info) for r in caplog.records
                     if r.name.startswith("otelstream"))  # fmt: skip
    FIGURES["privacy: marker streams checked"] += len(BODIES)
    assert text.count("otelstream.outcome") == len(BODIES)
    for marker in MARKERS:
        assert marker not in text, f"{marker[:8]}… exported"
        assert marker not in logs, f"{marker[:8]}… logged"


def test_metrics_server_binds_loopback_by_default() -> None:
    import otelstream

    with instrumented():
        server, thread = otelstream.start_metrics_server(port=0)
        try:
            assert server.server_address[0] == "127.0.0.1"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)


def test_model_labels_capped_whatever_the_traffic() -> None:
    """New request models and a new random response model on every call: the label set stays within the cap."""
    handler = Bodies()
    clients = Clients(handler)
    n = 200
    with instrumented() as inst:
        for i in range(n):
            model = uuid.uuid4().hex * 4
            handler.body = _sse(f'{{"id":"c","object":"chat.completion.chunk","model":"{model}","choices":'
                                f'[{{"index":0,"delta":{{"content":"x"}},"finish_reason":"stop"}}]}}')  # fmt: skip
            for _ in clients.oa.chat.completions.create(model=f"req-{i}-{model}", messages=[], stream=True):
                pass
        inst.finished()
        values = {s.labels.get(names.LABEL_MODEL) for m in inst.registry.collect() for s in m.samples}
        series = sum(len(m.samples) for m in inst.registry.collect())
    values.discard(None)
    assert len(values) <= 20 + 1 and names.MODEL_OTHER in values
    assert all(len(v) <= 64 for v in values if v)
    assert series < 3000, series
    FIGURES["privacy: distinct model names sent (label cap 20)"] += n


@pytest.mark.parametrize("native", [False, True], ids=["otel-only", "and-native-on-a-new-registry-each-time"])
def test_model_label_cap_holds_per_meter_provider_across_instrument_cycles(native: bool) -> None:
    """One MeterProvider, three instrument()/uninstrument() cycles of 25 new models each: the provider's series carry
    at most the cap's 20 model values (+ _OTHER), as a registry's do, also when each cycle brings a new registry."""
    handler = Bodies()
    clients = Clients(handler)
    handler.body = _sse('{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"},'
                        '"finish_reason":"stop"}]}')  # fmt: skip
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    attribute = names.OTEL_ATTR_BY_LABEL[names.LABEL_MODEL]
    otelstream.uninstrument()
    try:
        for cycle in range(3):
            otelstream.instrument(meter_provider=mp, prometheus_metrics=native, registry=CollectorRegistry())
            try:
                for i in range(25):
                    for _ in clients.oa.chat.completions.create(model=f"m-{cycle}-{i}", messages=[], stream=True):
                        pass
                assert otelstream.flush(timeout=30.0)
            finally:
                otelstream.uninstrument()
        data = reader.get_metrics_data()
    finally:
        mp.shutdown()
    assert data is not None
    values = {
        point.attributes.get(attribute)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        for point in metric.data.data_points
    }
    values.discard(None)
    assert len(values) <= 20 + 1 and names.MODEL_OTHER in values, sorted(map(str, values))
    assert {f"m-0-{i}" for i in range(20)} <= values  # the first 20 ever seen keep their names
