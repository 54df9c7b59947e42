"""Bedrock event-stream bodies read by a client that is not botocore (litellm's own Bedrock provider speaks httpx):
the HTTP-level observer recognises the two stream paths, decodes the framing with both CRCs checked, and reads each
message by the same rules as ``otelstream check``. A plain httpx2 client against the Bedrock stand-in, sync and
async; the caller's bytes are the same with otelstream off."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest

from otelstream import adapters, names
from otelstream.core.report import StreamReport
from tests.support.bedrock_server import REQUEST_ID, BedrockServer
from tests.support.eventstream import event
from tests.support.recording import RecordingListener

ANTHROPIC_BODY = b'{"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64, "messages": []}'


@pytest.fixture(scope="module")
def server() -> Any:
    with BedrockServer() as s:
        yield s


def _read(server: BedrockServer, path: str, body: bytes, is_async: bool) -> tuple[int, bytes, str | None]:
    url = server.base_url + path
    if not is_async:
        with httpx2.Client() as client, client.stream("POST", url, content=body) as response:
            try:
                return response.status_code, b"".join(response.iter_bytes()), None
            except httpx2.HTTPError as exc:
                return response.status_code, b"", type(exc).__name__

    async def go() -> tuple[int, bytes, str | None]:
        async with httpx2.AsyncClient() as client, client.stream("POST", url, content=body) as response:
            try:
                return response.status_code, b"".join([c async for c in response.aiter_bytes()]), None
            except httpx2.HTTPError as exc:
                return response.status_code, b"", type(exc).__name__

    return asyncio.run(go())


def observed(rec: RecordingListener, server: BedrockServer, path: str, body: bytes, is_async: bool) -> StreamReport:
    seen = _read(server, path, body, is_async)
    report = rec.one()
    adapters.uninstall()
    assert _read(server, path, body, is_async) == seen  # what the caller gets, with otelstream off
    return report


# (path, body) -> (surface, outcome, error class, error type, deltas)
CASES = {
    "converse.completed": ("/model/completed/converse-stream", b"{}",
                           (names.CONVERSE, names.COMPLETED, None, None, 2)),
    "converse.cut": ("/model/cut/converse-stream", b"{}", (names.CONVERSE, names.CUT, names.EC_CUT, None, 2)),
    "converse.error": ("/model/error/converse-stream", b"{}",
                       (names.CONVERSE, names.ERROR, names.EC_SERVER_ERROR, "modelStreamErrorException", 1)),
    "converse.http_429": ("/model/http_429/converse-stream", b"{}",
                          (names.CONVERSE, names.HTTP_ERROR, names.EC_RATE_LIMITED, "ThrottlingException", 0)),
    "invoke.anthropic": ("/model/anthropic.completed/invoke-with-response-stream", ANTHROPIC_BODY,
                         (names.MESSAGES, names.COMPLETED, None, None, 2)),
    "invoke.anthropic_body": ("/model/sized.completed/invoke-with-response-stream", ANTHROPIC_BODY,
                              (names.MESSAGES, names.COMPLETED, None, None, 2)),
    "invoke.meta": ("/model/meta.completed/invoke-with-response-stream", b'{"prompt": "hi"}',
                    (names.CONVERSE, names.COMPLETED, None, None, 0)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_bedrock_bodies_over_httpx2(rec: RecordingListener, server: BedrockServer, case: str, is_async: bool) -> None:
    path, body, (surface, outcome, klass, error_type, deltas) = CASES[case]
    r = observed(rec, server, path, body, is_async)
    assert (r.surface, r.outcome, r.error_class, r.error_type, r.deltas) == (surface, outcome, klass, error_type,
                                                                            deltas), r  # fmt: skip
    assert r.provider == names.PROVIDER_BEDROCK and r.request_id == REQUEST_ID
    assert r.request_model == path.split("/")[2]
    if case == "converse.completed":
        assert (r.usage.input_tokens, r.usage.output_tokens) == (8, 3)
    if case == "invoke.meta":
        assert dict(r.anomaly_counts).get(names.ANOM_UNSUPPORTED_PAYLOAD) == 1


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_bad_crc_is_a_protocol_error(rec: RecordingListener, server: BedrockServer, is_async: bool) -> None:
    good = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}})
    bad = bytearray(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "lo"}}))
    bad[-6] ^= 0xFF  # a payload byte: the message CRC no longer matches
    model = server.add_stream([event("messageStart", {"role": "assistant"}), good, bytes(bad)])
    r = observed(rec, server, f"/model/{model}/converse-stream", b"{}", is_async)
    assert (r.outcome, r.error_class) == (names.TRANSPORT_ERROR, names.EC_PROTOCOL), r
    assert (r.events, r.deltas) == (2, 1)
    assert dict(r.anomaly_counts).get(names.ANOM_UNDECODABLE) == 1


def test_other_paths_are_not_bedrock(rec: RecordingListener, server: BedrockServer) -> None:
    with httpx2.Client() as client:
        client.post(server.base_url + "/model/completed/converse", content=b"{}")
    assert rec.started == []
