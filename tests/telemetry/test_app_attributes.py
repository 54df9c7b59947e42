"""Application attributes through the real SDKs and the fake provider: ``otelstream.attributes()`` reaches
exactly the streams started inside its block (sync, asyncio tasks, threads, WebSocket responses), inner blocks win,
baggage keys named in ``baggage_attributes`` are copied, and only the keys named in ``metric_attributes`` become
metric labels, capped, on the native and the OTel path alike."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client import CollectorRegistry

import otelstream
from otelstream import names
from otelstream.demo.exchange import WS_FAULT_KEY
from otelstream.demo.provider import FakeProvider
from tests.support.clients import client_for
from tests.support.sdk_features import OPENAI_WEBSOCKET_OBSERVED, WITHOUT_WEBSOCKET
from tests.telemetry.harness import MODELS, Telemetry, consume_async, consume_sync

CH = names.CHAT_COMPLETIONS
FEATURE, TENANT = "app.feature", "tenant.id"



def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in (span.attributes or {}).items() if k in (FEATURE, TENANT, "user.tier")}


def _by_marker(tel: Telemetry) -> dict[str, dict[str, Any]]:
    """Each stream span's application attributes, keyed by the ``marker`` attribute every test stream sets."""
    out = {}
    for span in tel.ours():
        a = dict(span.attributes or {})
        out[str(a.get("marker", "none"))] = _attrs(span)
    return out


def _stream(client: Any, marker: str | None = None) -> None:
    if marker is None:
        consume_sync(client, CH, names.COMPLETED)
        return
    with otelstream.attributes(marker=marker):
        consume_sync(client, CH, names.COMPLETED)


def test_block_reaches_exactly_its_streams_and_inner_keys_win(
    instrument: Callable[..., Telemetry], provider: FakeProvider
) -> None:
    tel = instrument()
    client = client_for(provider, CH)
    try:
        _stream(client, "before")
        with otelstream.attributes(**{FEATURE: "summarize", TENANT: "acme"}) as current:
            assert current == {FEATURE: "summarize", TENANT: "acme"}
            _stream(client, "outer")
            with otelstream.attributes({TENANT: "globex"}, **{"user.tier": 3}):
                _stream(client, "inner")
            _stream(client, "outer-again")
        _stream(client, "after")
    finally:
        client.close()
    tel.flush()
    assert _by_marker(tel) == {
        "before": {},
        "outer": {FEATURE: "summarize", TENANT: "acme"},
        "inner": {FEATURE: "summarize", TENANT: "globex", "user.tier": 3},
        "outer-again": {FEATURE: "summarize", TENANT: "acme"},
        "after": {},
    }


def test_invalid_values_are_dropped_not_raised(instrument: Callable[..., Telemetry], provider: FakeProvider) -> None:
    tel = instrument()
    client = client_for(provider, CH)
    try:
        with otelstream.attributes(
            **{TENANT: "a\x00b" + "x" * 1000, FEATURE: None, "otelstream.outcome": "forged", "marker": "m"}
        ):
            consume_sync(client, CH, names.COMPLETED)
    finally:
        client.close()
    tel.flush()
    [span] = tel.ours()
    a = dict(span.attributes or {})
    assert a[TENANT] == "a\ufffdb" + "x" * (names.MAX_TEXT_LENGTH - 3)  # cleaned and length-limited
    assert FEATURE not in a  # None is not an attribute value
    assert a[names.ATTR_OUTCOME] == names.COMPLETED  # otelstream's own keys cannot be overwritten


def test_asyncio_tasks_and_threads_as_contextvars_behave(
    instrument: Callable[..., Telemetry], provider: FakeProvider
) -> None:
    tel = instrument()

    async def task(tenant: str) -> None:
        with otelstream.attributes(**{TENANT: tenant, "marker": tenant}):
            aclient = client_for(provider, CH, is_async=True)
            try:
                await consume_async(aclient, CH, names.COMPLETED)
            finally:
                await aclient.close()

    async def main() -> None:
        with otelstream.attributes(**{FEATURE: "batch"}):
            # concurrent tasks: each carries its own tenant and the feature it inherited at creation
            await asyncio.gather(task("t1"), task("t2"), task("t3"))

    asyncio.run(main())

    client = client_for(provider, CH)
    try:
        with otelstream.attributes(**{FEATURE: "threads"}):
            # a copied context carries the attributes into the thread; a plain new thread starts without them
            ctx = contextvars.copy_context()
            copied = threading.Thread(target=ctx.run, args=(_stream, client, "copied"))
            plain = threading.Thread(target=_stream, args=(client, "plain"))
            for t in (copied, plain):
                t.start()
            for t in (copied, plain):
                t.join(30)
    finally:
        client.close()
    tel.flush()
    assert _by_marker(tel) == {
        "t1": {FEATURE: "batch", TENANT: "t1"},
        "t2": {FEATURE: "batch", TENANT: "t2"},
        "t3": {FEATURE: "batch", TENANT: "t3"},
        "copied": {FEATURE: "threads"},
        "plain": {},
    }


def test_baggage_keys_are_copied(instrument: Callable[..., Telemetry], provider: FakeProvider) -> None:
    tel = instrument(baggage_attributes=f"{TENANT},{FEATURE}")
    client = client_for(provider, CH)
    try:
        ctx = baggage.set_baggage(TENANT, "acme")
        ctx = baggage.set_baggage("not.named", "secret", ctx)
        ctx = baggage.set_baggage(FEATURE, "from-baggage", ctx)
        token = otel_context.attach(ctx)
        try:
            _stream(client, "baggage")
            with otelstream.attributes(**{FEATURE: "explicit"}):  # an explicit value wins over baggage
                _stream(client, "both")
        finally:
            otel_context.detach(token)
        _stream(client, "none")
    finally:
        client.close()
    tel.flush()
    assert _by_marker(tel) == {
        "baggage": {TENANT: "acme", FEATURE: "from-baggage"},
        "both": {TENANT: "acme", FEATURE: "explicit"},
        "none": {},
    }
    assert all("not.named" not in (s.attributes or {}) for s in tel.ours())


def _label_values(registry: CollectorRegistry, family: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for fam in registry.collect():
        for s in fam.samples:
            if s.name == family:
                value = s.labels.get(label, "<absent>")
                out[value] = out.get(value, 0) + s.value
    return out


def test_named_metric_attribute_is_a_capped_label_on_both_paths(
    instrument: Callable[..., Telemetry], provider: FakeProvider
) -> None:
    otel_registry = CollectorRegistry()
    reader = PrometheusMetricReader(disable_target_info=True, scope_info_enabled=False, registry=otel_registry)
    mp = MeterProvider(metric_readers=[reader])
    tel = instrument(meter_provider=mp, metric_attributes=f"{TENANT}", model_label_cap=2)
    client = client_for(provider, CH)
    try:
        for tenant in ("acme", "globex", "initech", "umbrella"):
            with otelstream.attributes(**{TENANT: tenant, FEATURE: f"feature-{tenant}"}):
                consume_sync(client, CH, names.COMPLETED)
        consume_sync(client, CH, names.COMPLETED)  # no tenant: the label is absent
    finally:
        client.close()
    tel.flush()
    for registry in (tel.registry, otel_registry):
        tenants = _label_values(registry, "otelstream_streams_total", "tenant_id")
        assert tenants == {"acme": 1, "globex": 1, names.MODEL_OTHER: 2, "": 1}  # empty: absent to Prometheus
        # an attribute not named in metric_attributes is never a label
        for fam in registry.collect():
            for s in fam.samples:
                assert "app_feature" not in s.labels and FEATURE not in s.labels, s
        # the new common labels, the same on both paths
        [sample] = [s for fam in registry.collect() for s in fam.samples
                    if s.name == "otelstream_streams_total" and s.labels.get("tenant_id") == "acme"]  # fmt: skip
        assert sample.labels[names.LABEL_SERVER_ADDRESS] == "127.0.0.1"
        assert sample.labels[names.LABEL_SERVER_PORT] == str(provider.port)
        assert sample.labels[names.LABEL_RESPONSE_MODEL] == MODELS[CH]
    # on the span every attribute is there, as given
    spans = tel.ours()
    assert sorted(dict(s.attributes or {}).get(FEATURE, "") for s in spans) == [
        "", "feature-acme", "feature-globex", "feature-initech", "feature-umbrella"
    ]  # fmt: skip
    mp.shutdown()


def test_metric_attributes_that_cannot_be_labels_are_refused(
    instrument: Callable[..., Telemetry], provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    tel = instrument(metric_attributes=["surface", "tenant.id", "tenant_id", "gen_ai.request.model"])
    assert tel is not None
    pipeline = otelstream.instrumentation._pipeline
    assert pipeline.schema.attribute_keys == ("tenant.id",)
    assert pipeline.schema.attribute_labels == ("tenant_id",)
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "'surface'" in messages and "'tenant_id'" in messages and "'gen_ai.request.model'" in messages


@pytest.mark.skipif(not OPENAI_WEBSOCKET_OBSERVED, reason=WITHOUT_WEBSOCKET)
def test_websocket_response_carries_the_attributes_current_at_its_create(
    instrument: Callable[..., Telemetry], provider: FakeProvider
) -> None:
    pytest.importorskip("websockets")
    import openai

    tel = instrument()
    client = openai.OpenAI(**provider.openai_kwargs(max_retries=0))
    model = MODELS[names.RESPONSES_WEBSOCKET]
    try:
        with client.responses.connect() as conn:
            for tenant in ("first", "second"):
                with otelstream.attributes(**{TENANT: tenant}):
                    conn.response.create(model=model, input="hi", metadata={WS_FAULT_KEY: "ok"})
                # read outside the block: what counts is the context at the create's send
                for event in conn:
                    if event.type == "response.completed":
                        break
    finally:
        client.close()
    tel.flush()
    responses = [s for s in tel.ours() if s.name != names.SPAN_WEBSOCKET]
    assert sorted(dict(s.attributes or {}).get(TENANT, "") for s in responses) == ["first", "second"]
    [conn_span] = [s for s in tel.ours() if s.name == names.SPAN_WEBSOCKET]
    assert TENANT not in (conn_span.attributes or {})


@pytest.mark.parametrize("surface", [CH, names.RESPONSES, names.COMPLETIONS])
def test_request_parameters_as_the_call_passed_them(
    instrument: Callable[..., Telemetry], provider: FakeProvider, surface: str
) -> None:
    from tests.telemetry.harness import FAULT_FOR, create_fn, request_kwargs

    tel = instrument()
    client = client_for(provider, surface)
    params: dict[str, Any] = {"temperature": 0.2, "top_p": 1}
    if surface == names.RESPONSES:
        params["max_output_tokens"] = 50
    elif surface == CH:
        params |= {"max_completion_tokens": 50, "n": 1}  # n = 1: no choice.count
    else:
        params |= {"max_tokens": 50, "n": 2}
    try:
        with create_fn(client, surface)(**request_kwargs(surface, FAULT_FOR[names.COMPLETED]), **params) as stream:
            for _ in stream:
                pass
    finally:
        client.close()
    tel.flush()
    [span] = tel.ours()
    a = dict(span.attributes or {})
    want = {names.ATTR_REQUEST_MAX_TOKENS: 50, names.ATTR_REQUEST_TEMPERATURE: 0.2, names.ATTR_REQUEST_TOP_P: 1.0}
    if surface == names.COMPLETIONS:
        want[names.ATTR_REQUEST_CHOICE_COUNT] = 2
    got = {k: v for k, v in a.items() if k.startswith("gen_ai.request.") and k not in (
        names.ATTR_REQUEST_MODEL, names.ATTR_REQUEST_STREAM)}  # fmt: skip
    assert got == want
