"""The fake provider's Gemini and Bedrock routes: the bodies it serves for each fault as ``otelstream check`` reads
them offline (Gemini SSE with CRLF line ends, Bedrock event-stream frames with both CRCs checked), each cloud's HTTP
error shape, and the demo's own callers (google-genai; boto3 sync and aiobotocore async, Bedrock converse and an
Anthropic model through invoke) observed live: one report per stream, with the outcome the fault table promises."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo import plan as P
from otelstream.demo.cloud_drive import open_async
from otelstream.demo.drive import close_clients, make_clients, run_async_job, run_sync_job
from otelstream.demo.exchange import FAULT_HEADER
from otelstream.demo.provider import FakeProvider
from otelstream.offline.analysis import analyse
from tests.demo.harness import TAG_HEADER, record_for, tag
from tests.support.recording import RecordingListener

pytest.importorskip("google.genai", reason="google-genai not installed (it is in the demo and test extras)")
pytest.importorskip("boto3", reason="boto3 not installed (it is in the demo and test extras)")

# (surface, via): the three cloud lanes
GEMINI = (names.GENERATE_CONTENT, "")
CONVERSE = (names.CONVERSE, "")
INVOKE = (names.MESSAGES, P.BEDROCK_INVOKE)
LANES = {"gemini": GEMINI, "converse": CONVERSE, "invoke": INVOKE}
PATHS = {
    "gemini": "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    "converse": "/model/amazon.nova-pro-v1%3A0/converse-stream",
    "invoke": "/model/anthropic.claude-sonnet-4-5-v1%3A0/invoke-with-response-stream",
}
HTTP_FAULTS = {F.HTTP_500: names.EC_SERVER_ERROR, F.HTTP_429: names.EC_RATE_LIMITED, F.OVERLOADED: names.EC_OVERLOADED,
               F.NO_HEADERS: names.EC_TIMEOUT}  # fmt: skip


def _faults(lane: str) -> list[str]:
    surface, via = LANES[lane]
    return [f for f in F.FAULTS if (f in F.INVOKE_FAULTS if via else F.is_supported(f, surface))]


def _post(provider: FakeProvider, lane: str, fault: str) -> tuple[httpx2.Response, bytes, str]:
    tag_value = tag()
    body = {"contents": [{"parts": [{"text": "hi"}], "role": "user"}]} if lane == "gemini" else {"messages": []}
    headers = {FAULT_HEADER: fault, TAG_HEADER: tag_value}
    with (
        httpx2.Client(base_url=provider.base_url, timeout=10.0) as client,
        client.stream("POST", PATHS[lane], json=body, headers=headers) as r,
    ):
        try:
            data = r.read()
        except httpx2.RemoteProtocolError:  # `reset`: the body ends without its terminating chunk
            assert fault == F.RESET
            data = b""
    return r, data, tag_value


@pytest.mark.parametrize("lane", list(LANES))
def test_bodies_read_offline_as_the_fault_table_says(provider: FakeProvider, tmp_path: Path, lane: str) -> None:
    """Every fault the lane serves with a body (one test per lane: the suite's time is tight)."""
    for fault in [f for f in _faults(lane) if f in F.SERVER_FAULTS and f not in HTTP_FAULTS]:
        response, _, tag_value = _post(provider, lane, fault)
        assert response.status_code == 200, fault
        rec = record_for(provider, tag_value)
        assert rec.surface == LANES[lane][0] and rec.fault == fault
        if lane == "gemini":
            assert response.headers["content-type"] == names.SSE_CONTENT_TYPE and rec.suffix == ".sse"
            lines = rec.wire.split(b"\r\n\r\n")
            assert lines[-1] == b"" and all(line.startswith(b"data: {") for line in lines[:-1]), fault
        else:
            assert response.headers["content-type"] == names.EVENTSTREAM_CONTENT_TYPE
            assert rec.suffix == ".eventstream"
        path = tmp_path / f"{fault}{rec.suffix}"
        path.write_bytes(rec.wire)
        (report,) = analyse(str(path)).reports
        assert report.surface == LANES[lane][0]
        # offline, a reset body is what arrived before the break: a stream without its terminal event
        assert report.outcome == (names.CUT if fault == F.RESET else F.EXPECTED_OUTCOME[fault]), (fault, report)
        if fault == F.REASONING:
            assert report.first_output_event is not None and report.first_output_event > 1
        if F.EXPECTED_OUTCOME[fault] == names.COMPLETED:
            assert report.usage.input_tokens and report.usage.output_tokens, (fault, report)


@pytest.mark.parametrize("lane", list(LANES))
@pytest.mark.parametrize("fault", [F.HTTP_429, F.OVERLOADED])
def test_http_errors_in_each_clouds_shape(provider: FakeProvider, lane: str, fault: str) -> None:
    response, data, _ = _post(provider, lane, fault)
    status = 429 if fault == F.HTTP_429 else 503
    assert response.status_code == status
    if lane == "gemini":
        expected = "RESOURCE_EXHAUSTED" if status == 429 else "UNAVAILABLE"
        assert json.loads(data)["error"] == {"code": status, "message": json.loads(data)["error"]["message"],
                                             "status": expected}  # fmt: skip
    else:
        kind = "ThrottlingException" if status == 429 else "ServiceUnavailableException"
        assert response.headers["x-amzn-errortype"].split(":")[0] == kind
        assert set(json.loads(data)) == {"message"} and response.headers[names.BEDROCK_REQUEST_ID_HEADER]


def test_invoke_refuses_a_keepalive_it_cannot_serve(provider: FakeProvider) -> None:
    response, data, _ = _post(provider, "invoke", F.KEEPALIVE)
    assert response.status_code == 400 and b"does not apply" in data


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("lane", list(LANES))
def test_the_demos_callers_are_observed_as_planned(
    provider: FakeProvider, rec: RecordingListener, lane: str, is_async: bool
) -> None:
    """The demo's own caller code, every fault of the lane (cancel: async only), one report each."""
    surface, via = LANES[lane]
    jobs = [P.Job(i, surface, f, is_async, via) for i, f in enumerate(_faults(lane)) if is_async or f != F.CANCEL]
    clients = make_clients(provider, 2, P.ALL_LANES)

    async def run_all() -> list[tuple[Any, Any]]:
        await open_async(clients.cloud)
        try:
            return [await _one(rec, run_async_job(clients, job)) for job in jobs]
        finally:
            await close_clients(clients)

    if is_async:
        seen = asyncio.run(run_all())
    else:
        seen = []
        for job in jobs:
            rec.clear()
            raised = run_sync_job(clients, job)
            seen.append((rec.one(), raised))
        asyncio.run(close_clients(clients))
    for job, (report, raised) in zip(jobs, seen, strict=True):
        fault = job.fault
        assert (report.surface, report.request_model) == (surface, job.model)
        assert report.provider == (names.PROVIDER_GEMINI if lane == "gemini" else names.PROVIDER_BEDROCK)
        assert report.outcome == F.EXPECTED_OUTCOME[fault], (fault, report, raised)
        assert report.error_class == HTTP_FAULTS.get(fault, report.error_class), fault
        if fault in (F.ABANDON, F.CANCEL):
            assert report.abandoned_reason == (names.ABANDON_CANCEL if fault == F.CANCEL else names.ABANDON_CLOSE)
            assert raised == ("CancelledError" if fault == F.CANCEL else None)
        if fault == F.REASONING:
            ttfd, ttfo = report.time_to_first_delta_ns, report.time_to_first_output_ns
            assert ttfd is not None and ttfo is not None and ttfd < ttfo


async def _one(rec: RecordingListener, job: Any) -> tuple[Any, Any]:
    """One job's report and what its caller raised."""
    rec.clear()
    raised = await job
    return rec.one(), raised
