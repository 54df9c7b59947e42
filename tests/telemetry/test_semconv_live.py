"""The semantic-convention switch end to end: ``OTEL_SEMCONV_STABILITY_OPT_IN`` set in the environment, real SDK
streams of every SSE surface, and ``/metrics`` as otelstream serves it over HTTP; the span side on the same streams."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families as parse_text

import otelstream
from otelstream import names
from otelstream.demo.provider import FakeProvider
from tests.support.clients import client_for
from tests.support.surfaces import SSE_SURFACES
from tests.telemetry.harness import Telemetry, consume_sync

OUTCOMES = (names.COMPLETED, names.CUT, names.HTTP_ERROR)
OLD_FAMILIES = ("gen_ai_client_operation_duration_seconds", "gen_ai_client_token_usage",
                "gen_ai_client_operation_time_to_first_chunk_seconds",
                "gen_ai_client_operation_time_per_output_chunk_seconds")  # fmt: skip
NEW_FAMILIES = ("gen_ai_client_inference_duration_seconds", "gen_ai_client_inference_time_to_first_chunk_seconds",
                "gen_ai_client_inference_time_per_output_chunk_seconds",
                "gen_ai_client_inference_usage_input_tokens", "gen_ai_client_inference_usage_output_tokens",
                "gen_ai_client_inference_usage_cache_read_input_tokens",
                "gen_ai_client_inference_usage_cache_write_input_tokens",
                "gen_ai_client_inference_usage_reasoning_output_tokens",
                "gen_ai_client_inference_operation_input_tokens",
                "gen_ai_client_inference_operation_output_tokens")  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def served(
    instrument: Callable[..., Telemetry], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str | None], tuple[Telemetry, str]]]:
    """``served(opt_in)``: instrument with ``OTEL_SEMCONV_STABILITY_OPT_IN=opt_in`` (unset for None), then serve
    ``/metrics``; returns the telemetry and the URL."""
    servers: list[Any] = []

    def make(opt_in: str | None) -> tuple[Telemetry, str]:
        if opt_in is None:
            monkeypatch.delenv(names.SEMCONV_ENV, raising=False)
        else:
            monkeypatch.setenv(names.SEMCONV_ENV, opt_in)
        tel = instrument()
        # read once, at instrument(): a later change of the environment changes nothing
        monkeypatch.setenv(names.SEMCONV_ENV, "gen_ai_latest_experimental/dup" if opt_in is None else "")
        port = _free_port()
        started = otelstream.start_metrics_server(port)
        servers.append(started)
        return tel, f"http://127.0.0.1:{port}/metrics"

    yield make
    for started in servers:
        if isinstance(started, tuple):
            started[0].shutdown()


def _run_all(tel: Telemetry, provider: FakeProvider) -> None:
    for surface in SSE_SURFACES:
        client = client_for(provider, surface)
        try:
            for outcome in OUTCOMES:
                consume_sync(client, surface, outcome, tel.tracer)
        finally:
            client.close()
    tel.flush()


def _scrape(url: str) -> tuple[str, dict[str, Any]]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return text, {f.name: f for f in parse_text(text)}


def _total(family: Any, sample: str) -> float:
    return float(sum(s.value for s in family.samples if s.name == sample))


def _span_usage(tel: Telemetry, key: str) -> int:
    return sum(int(s.attributes.get(key, 0)) for s in tel.ours())  # type: ignore[union-attr, arg-type]


def test_latest_on_metrics_endpoint(served: Any, provider: FakeProvider) -> None:
    tel, url = served("http,gen_ai_latest_experimental")
    _run_all(tel, provider)
    text, families = _scrape(url)
    assert set(NEW_FAMILIES) <= set(families), sorted(set(NEW_FAMILIES) - set(families))
    assert "gen_ai_client_operation_" not in text and "gen_ai_client_token_usage" not in text
    streams = len(SSE_SURFACES) * len(OUTCOMES)
    assert _total(families["otelstream_streams"], "otelstream_streams_total") == streams
    duration = families["gen_ai_client_inference_duration_seconds"]
    assert _total(duration, "gen_ai_client_inference_duration_seconds_count") == streams
    # the counters hold every call's tokens as the spans report them, failed calls included (a cut Messages stream
    # has its input tokens from message_start); their modality is unknown
    for counter, key in (("input", names.ATTR_USAGE_INPUT), ("output", names.ATTR_USAGE_OUTPUT)):
        family = families[f"gen_ai_client_inference_usage_{counter}_tokens"]
        assert _total(family, f"gen_ai_client_inference_usage_{counter}_tokens_total") == _span_usage(tel, key) > 0
        assert {s.labels[names.LABEL_TOKEN_MODALITY] for s in family.samples} == {names.TOKEN_MODALITY_UNKNOWN}
    # the per-call histograms: successful calls whose usage is known, only
    good = [s for s in tel.ours() if s.attributes[names.ATTR_OUTCOME] == names.COMPLETED]  # type: ignore[index]
    want = sum(1 for s in good if names.ATTR_USAGE_INPUT in (s.attributes or {}))
    hist = families["gen_ai_client_inference_operation_input_tokens"]
    assert _total(hist, "gen_ai_client_inference_operation_input_tokens_count") == want > 0
    bad_input = sum(int(s.attributes.get(names.ATTR_USAGE_INPUT, 0)) for s in tel.ours()  # type: ignore[union-attr, arg-type]
                    if s.attributes[names.ATTR_OUTCOME] != names.COMPLETED)  # type: ignore[index]  # fmt: skip
    assert bad_input > 0  # (so the line above shows the failed calls' tokens kept out of the histogram)
    # the span side follows the switch: a cut stream's finish reasons say `error`
    cut = [s for s in tel.ours() if s.attributes[names.ATTR_OUTCOME] == names.CUT]  # type: ignore[index]
    assert len(cut) == len(SSE_SURFACES)
    for span in cut:
        assert tuple(span.attributes[names.ATTR_RESPONSE_FINISH_REASONS]) == ("error",)  # type: ignore[index, arg-type]


def test_dup_on_metrics_endpoint(served: Any, provider: FakeProvider) -> None:
    tel, url = served("gen_ai_latest_experimental/dup")
    _run_all(tel, provider)
    _, families = _scrape(url)
    assert set(OLD_FAMILIES) | set(NEW_FAMILIES) <= set(families)
    for old, new in (("gen_ai_client_operation_duration_seconds", "gen_ai_client_inference_duration_seconds"),
                     ("gen_ai_client_operation_time_to_first_chunk_seconds",
                      "gen_ai_client_inference_time_to_first_chunk_seconds")):  # fmt: skip
        assert _total(families[old], old + "_count") == _total(families[new], new + "_count") > 0
    old_input = sum(s.value for s in families["gen_ai_client_token_usage"].samples
                    if s.name == "gen_ai_client_token_usage_sum"
                    and s.labels[names.LABEL_TOKEN_TYPE] == names.TOKEN_TYPE_INPUT)  # fmt: skip
    new_input = _total(families["gen_ai_client_inference_usage_input_tokens"],
                       "gen_ai_client_inference_usage_input_tokens_total")  # fmt: skip
    assert old_input == new_input > 0


def test_default_when_unset(served: Any, provider: FakeProvider) -> None:
    tel, url = served(None)  # then /dup set after instrument(): not read
    _run_all(tel, provider)
    text, families = _scrape(url)
    assert set(OLD_FAMILIES) <= set(families)
    assert "gen_ai_client_inference_" not in text
    cut = [s for s in tel.ours() if s.attributes[names.ATTR_OUTCOME] == names.CUT]  # type: ignore[index]
    assert cut and all(names.ATTR_RESPONSE_FINISH_REASONS not in (s.attributes or {}) for s in cut)
