"""Error classes live (issue 17): the real openai / anthropic clients against a scripted server on 127.0.0.1 that
answers with rate limits, exhausted quota, overload, server errors, a read timeout, a reset and undecodable data.
Each stream's class reaches the span (``error.type``: the provider's code, else the class; ``otelstream.error_class``)
and the ``error_type`` label of the duration histogram and of ``otelstream_streams_total`` on both metric paths: the
native Prometheus registry and the OTel meter provider read through ``PrometheusMetricReader``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry

import otelstream
from otelstream import names
from tests.support import bodies
from tests.support.scripted_server import Half, Pause, Reset, ScriptedServer, Step
from tests.support.sdk_features import ANTHROPIC_HTTP, OPENAI_HTTP
from tests.telemetry.harness import Telemetry

MSGS: Any = [{"role": "user", "content": "x"}]
TIMEOUT_S = 0.3


@dataclass(frozen=True)
class Case:
    id: str
    sdk: str  # "openai" (chat completions) or "anthropic" (messages)
    steps: tuple[Step, ...]
    outcome: str
    error_type: str | None  # the report's: the provider's code as sent, or the HTTP status
    error_class: str
    status: int = 200


def _json(body: dict[str, Any]) -> tuple[bytes, ...]:
    return (json.dumps(body).encode(),)


def _oai(code: str | None, typ: str | None = None) -> tuple[bytes, ...]:
    return _json({"error": {"message": "no", "type": typ, "code": code}})


def _ant(typ: str) -> tuple[bytes, ...]:
    return _json({"type": "error", "error": {"type": typ, "message": "no"}})


CHAT = bodies.chat("ok")
MESSAGES = bodies.messages("ok")
UNDECODABLE = b"data: {not json\n\n"
OAI_QUOTA = b'data: {"error": {"message": "q", "type": "insufficient_quota", "code": "insufficient_quota"}}\n\n'
ANT_OVERLOADED = b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "x"}}\n\n'

CASES = [
    Case("openai-429", "openai", _oai("rate_limit_exceeded", "requests"), names.HTTP_ERROR, "rate_limit_exceeded",
         names.EC_RATE_LIMITED, 429),
    Case("anthropic-429", "anthropic", _ant("rate_limit_error"), names.HTTP_ERROR, "rate_limit_error",
         names.EC_RATE_LIMITED, 429),
    Case("openai-429-insufficient-quota", "openai", _oai("insufficient_quota", "insufficient_quota"),
         names.HTTP_ERROR, "insufficient_quota", names.EC_QUOTA_EXCEEDED, 429),
    Case("openai-503-no-code", "openai", _json({"error": {"message": "busy"}}), names.HTTP_ERROR, "503",
         names.EC_OVERLOADED, 503),
    Case("openai-503-generic-type", "openai", _oai(None, "server_error"), names.HTTP_ERROR, "server_error",
         names.EC_OVERLOADED, 503),
    Case("anthropic-529", "anthropic", _ant("overloaded_error"), names.HTTP_ERROR, "overloaded_error",
         names.EC_OVERLOADED, 529),
    Case("anthropic-inband-overloaded", "anthropic", (*MESSAGES[:4], ANT_OVERLOADED), names.ERROR, "overloaded_error",
         names.EC_OVERLOADED),
    Case("openai-500", "openai", _oai(None, "server_error"), names.HTTP_ERROR, "server_error",
         names.EC_SERVER_ERROR, 500),
    Case("anthropic-500", "anthropic", _ant("api_error"), names.HTTP_ERROR, "api_error", names.EC_SERVER_ERROR, 500),
    Case("openai-read-timeout", "openai", (*CHAT[:2], Pause(TIMEOUT_S * 3), *CHAT[2:]), names.TRANSPORT_ERROR, None,
         names.EC_TIMEOUT),
    Case("anthropic-read-timeout", "anthropic", (*MESSAGES[:3], Pause(TIMEOUT_S * 3), *MESSAGES[3:]),
         names.TRANSPORT_ERROR, None, names.EC_TIMEOUT),
    Case("openai-reset", "openai", (*CHAT[:2], Reset()), names.TRANSPORT_ERROR, None, names.EC_CONNECTION),
    Case("anthropic-half-chunk", "anthropic", (*MESSAGES[:3], Half(MESSAGES[3])), names.TRANSPORT_ERROR, None,
         names.EC_CONNECTION),
    Case("openai-undecodable", "openai", (*CHAT[:2], UNDECODABLE), names.TRANSPORT_ERROR, None, names.EC_PROTOCOL),
    Case("openai-inband-quota", "openai", (*CHAT[:2], OAI_QUOTA), names.ERROR, "insufficient_quota",
         names.EC_QUOTA_EXCEEDED),
]  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer().start()
    try:
        yield s
    finally:
        s.close()


@dataclass
class Both:
    tel: Telemetry
    otel_registry: CollectorRegistry


@pytest.fixture
def both() -> Iterator[Both]:
    """Spans, the native registry and an OTel meter provider read by PrometheusMetricReader, all at once."""
    otelstream.uninstrument()
    tel = Telemetry.new()
    otel_registry = CollectorRegistry()
    reader = PrometheusMetricReader(disable_target_info=True, scope_info_enabled=False, registry=otel_registry)
    mp = MeterProvider(metric_readers=[reader])
    otelstream.instrument(tracer_provider=tel.tracer_provider, registry=tel.registry, meter_provider=mp)
    try:
        yield Both(tel, otel_registry)
    finally:
        otelstream.uninstrument()
        tel.tracer_provider.shutdown()
        mp.shutdown()


def _open(server: ScriptedServer, case: Case) -> None:
    ctype = "application/json" if case.status != 200 else "text/event-stream"
    key = server.add(list(case.steps), status=case.status, headers={"content-type": ctype})
    headers = {"x-script": key}
    http = (ANTHROPIC_HTTP if case.sdk == "anthropic" else OPENAI_HTTP).Client(verify=False)
    try:
        if case.sdk == "anthropic":
            a = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0, timeout=TIMEOUT_S,
                                    http_client=http)  # fmt: skip
            stream: Any = a.messages.create(model="claude-x", max_tokens=5, messages=MSGS, stream=True,
                                            extra_headers=headers)  # fmt: skip
        else:
            o = openai.OpenAI(api_key="k", base_url=server.base_url + "/v1", max_retries=0, timeout=TIMEOUT_S,
                              http_client=http)  # fmt: skip
            stream = o.chat.completions.create(model="gpt-x", messages=MSGS, stream=True, extra_headers=headers,
                                               stream_options={"include_usage": True})  # fmt: skip
        with stream:
            for _ in stream:
                pass
    except Exception:  # the SDK's own exception: what the class is derived from
        pass
    finally:
        http.close()


def _labels(registry: CollectorRegistry, family: str) -> list[dict[str, str]]:
    return [dict(s.labels) for fam in registry.collect() for s in fam.samples if s.name == family and s.value]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_error_class_on_span_and_both_metric_paths(server: ScriptedServer, both: Both, case: Case) -> None:
    _open(server, case)
    both.tel.flush()
    (span,) = both.tel.ours()
    a = dict(span.attributes or {})
    assert a[names.ATTR_OUTCOME] == case.outcome
    assert a[names.ATTR_ERROR_CLASS] == case.error_class
    assert a[names.ATTR_ERROR_TYPE] == (case.error_type or case.error_class)
    for registry in (both.tel.registry, both.otel_registry):
        (streams,) = _labels(registry, "otelstream_streams_total")
        (duration,) = _labels(registry, "gen_ai_client_operation_duration_seconds_count")
        assert (streams["outcome"], streams["error_type"]) == (case.outcome, case.error_class)
        assert duration["error_type"] == case.error_class


def test_good_outcome_has_no_error_type_label(server: ScriptedServer, both: Both) -> None:
    _open(server, Case("ok", "openai", tuple(CHAT), names.COMPLETED, None, ""))
    both.tel.flush()
    (span,) = both.tel.ours()
    a = span.attributes or {}
    assert names.ATTR_ERROR_CLASS not in a and names.ATTR_ERROR_TYPE not in a
    for registry in (both.tel.registry, both.otel_registry):
        (streams,) = _labels(registry, "otelstream_streams_total")
        assert streams["outcome"] == names.COMPLETED and streams.get("error_type", "") == ""
