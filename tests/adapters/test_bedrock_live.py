"""Bedrock streams observed live: the real boto3 (sync) and aiobotocore (async) clients against the stand-in server
(tests/support/bedrock_server.py), ConverseStream and InvokeModelWithResponseStream (an Anthropic model: messages;
a Llama one: an unsupported payload), chunked and content-length (``sized.``) bodies. Each test asserts the one
report against what the contract defines for the script, and that the caller received exactly what it receives with
otelstream off."""

from __future__ import annotations

import gc
import importlib.util
from typing import Any
from urllib.parse import urlsplit

import pytest

from otelstream import adapters, names
from otelstream.core.report import StreamReport
from tests.adapters.bedrock_driver import Seen, run, sync_client
from tests.support.bedrock_server import PAUSE_S, REQUEST_ID, BedrockServer
from tests.support.eventstream import event
from tests.support.recording import RecordingListener

# aiobotocore pins the botocore it patches: the older botocore releases [bedrock] allows (.ci/sdk-matrix.sh) run sync
HAS_AIOBOTOCORE = importlib.util.find_spec("aiobotocore") is not None
MODES = ("sync", "async") if HAS_AIOBOTOCORE else ("sync",)


@pytest.fixture(scope="module")
def server() -> Any:
    with BedrockServer() as s:
        yield s


@pytest.fixture(scope="module")
def client(server: BedrockServer) -> Any:
    return sync_client(server)


def observed(
    rec: RecordingListener, server: BedrockServer, mode: str, op: str, model: str, action: str = "drain"
) -> tuple[StreamReport, Seen]:
    """Run instrumented, then with otelstream off: the caller's view must not differ; the one report."""
    seen = run(server, mode, op, model, action)
    if action == "drop":
        gc.collect()
    report = rec.one()
    assert len(rec.started) == 1
    adapters.uninstall()
    bare = run(server, mode, op, model, action)
    assert seen.caller_view() == bare.caller_view()
    gc.collect()
    assert len(rec.reports) == 1  # nothing more, whatever is collected later
    return report, seen


# script -> (outcome, error_class, error_type, finish reasons)
CONVERSE = {
    "completed": (names.COMPLETED, None, None, ("end_turn",)),
    "pause": (names.COMPLETED, None, None, ("end_turn",)),
    "reasoning": (names.COMPLETED, None, None, ("end_turn",)),
    "cut": (names.CUT, names.EC_CUT, None, ()),
    "error": (names.ERROR, names.EC_SERVER_ERROR, "modelStreamErrorException", ()),
    "throttled": (names.ERROR, names.EC_RATE_LIMITED, "throttlingException", ()),
    "max_tokens": (names.INCOMPLETE, None, None, ("max_tokens",)),
    "stall": (names.TRANSPORT_ERROR, names.EC_TIMEOUT, None, ()),
    "reset": (names.TRANSPORT_ERROR, names.EC_CONNECTION, None, ()),
}
HTTP = {
    "http_429": (names.EC_RATE_LIMITED, "ThrottlingException"),
    "http_503": (names.EC_OVERLOADED, "ServiceUnavailableException"),
}
INVOKE = {  # an Anthropic model's invoke stream: the Messages surface
    "completed": (names.COMPLETED, None, None, ("end_turn",)),
    "pause": (names.COMPLETED, None, None, ("end_turn",)),
    "cut": (names.CUT, names.EC_CUT, None, ()),
    "error": (names.ERROR, names.EC_SERVER_ERROR, "modelStreamErrorException", ()),
    "throttled": (names.ERROR, names.EC_RATE_LIMITED, "throttlingException", ()),
    "max_tokens": (names.INCOMPLETE, None, None, ("max_tokens",)),
    "stall": (names.TRANSPORT_ERROR, names.EC_TIMEOUT, None, ()),
    "reset": (names.TRANSPORT_ERROR, names.EC_CONNECTION, None, ()),
}


def _common(r: StreamReport, server: BedrockServer, model: str) -> None:
    assert r.provider == names.PROVIDER_BEDROCK
    assert r.request_model == model
    assert r.request_id == REQUEST_ID
    assert (r.server_address, r.server_port) == ("127.0.0.1", urlsplit(server.base_url).port)
    assert r.retries == 0
    assert r.unobserved == ()


# A content-length body cut by a reset reads as a clean, short end in both clients (neither checks the length on an
# event stream): what the caller sees is a stream that stopped without its terminal event. A stalled one races the
# read timeout against the stand-in's own connection handling, so it is left to the chunked body.
SIZED_RESET = (names.CUT, names.EC_CUT, None, ())
SIZED_SKIP = {"stall"}


def _expect(r: StreamReport, want: tuple[str, str | None, str | None, tuple[str, ...]]) -> None:
    outcome, klass, error_type, reasons = want
    assert (r.outcome, r.error_class, r.error_type) == (outcome, klass, error_type), r
    assert r.finish_reasons == reasons


def _cases(scripts: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s, b) for s in scripts for b in ("chunked", "sized") if not (b == "sized" and s in SIZED_SKIP)]


@pytest.mark.parametrize(("script", "body"), _cases(CONVERSE))
@pytest.mark.parametrize("mode", MODES)
def test_converse(
    rec: RecordingListener, server: BedrockServer, mode: str, script: str, body: str
) -> None:
    model = script if body == "chunked" else f"sized.{script}"
    r, seen = observed(rec, server, mode, "converse", model)
    assert r.surface == names.CONVERSE
    _common(r, server, model)
    _expect(r, SIZED_RESET if model == "sized.reset" else CONVERSE[script])
    assert r.response_model == model  # the stream names none: the request's stands for it
    assert r.events == len(seen.events)
    if script == "completed":
        assert (r.deltas, r.usage.input_tokens, r.usage.output_tokens) == (2, 5 + 2 + 1, 3)
        assert (r.usage.cache_read_input_tokens, r.usage.cache_write_input_tokens) == (2, 1)
        assert r.provider_latency_ms == 321  # the stand-in's metadata.metrics.latencyMs
    if script == "pause":
        # the first delta reached the caller after the pause, whatever came before it (messageStart)
        ttfd = r.time_to_first_delta_s
        assert ttfd is not None and ttfd >= PAUSE_S
        first_delta_at = seen.at[1]
        assert ttfd <= first_delta_at
    if script == "reasoning":
        ttfd, ttfo = r.time_to_first_delta_s, r.time_to_first_output_s
        assert ttfd is not None and ttfo is not None and ttfd < ttfo
        assert r.deltas == 3 and r.usage.output_tokens == 9
    if script in ("cut", "error", "throttled", "stall", "reset"):
        assert r.usage.input_tokens is None


@pytest.mark.parametrize("script", list(HTTP))
@pytest.mark.parametrize("op", ["converse", "invoke"])
@pytest.mark.parametrize("mode", MODES)
def test_http_errors(
    rec: RecordingListener, server: BedrockServer, mode: str, op: str, script: str
) -> None:
    r, seen = observed(rec, server, mode, op, script)
    klass, error_type = HTTP[script]
    assert (r.outcome, r.error_class, r.error_type) == (names.HTTP_ERROR, klass, error_type)
    assert r.request_id == REQUEST_ID and r.events == 0
    assert seen.error is not None and error_type in seen.error


@pytest.mark.parametrize(("script", "body"), _cases(INVOKE))
@pytest.mark.parametrize("mode", MODES)
def test_invoke_anthropic(
    rec: RecordingListener, server: BedrockServer, mode: str, script: str, body: str
) -> None:
    model = f"anthropic.{script}" if body == "chunked" else f"sized.{script}"  # sized: the body names the family
    r, seen = observed(rec, server, mode, "invoke", model)
    assert r.surface == names.MESSAGES
    _common(r, server, model)
    _expect(r, SIZED_RESET if model == "sized.reset" else INVOKE[script])
    assert r.events == len(seen.events)
    if script in ("completed", "pause", "max_tokens"):
        assert (r.usage.input_tokens, r.usage.output_tokens) == (5, 3)
        assert (r.response_model, r.response_id) == ("claude-test", "msg_bdrk_01")
    if script == "pause":
        ttfd = r.time_to_first_delta_s
        assert ttfd is not None and ttfd >= PAUSE_S


@pytest.mark.parametrize("script", ["completed", "cut", "max_tokens"])
@pytest.mark.parametrize("mode", MODES)
def test_invoke_other_family(
    rec: RecordingListener, server: BedrockServer, mode: str, script: str
) -> None:
    """A Llama model's chunks: counted, not read; the outcome is the transport's (a clean end completes it)."""
    model = f"meta.{script}"
    r, seen = observed(rec, server, mode, "invoke", model)
    assert r.surface == names.CONVERSE
    _common(r, server, model)
    assert (r.outcome, r.error_class) == (names.COMPLETED, None)
    assert dict(r.anomaly_counts).get(names.ANOM_UNSUPPORTED_PAYLOAD) == 1
    assert r.events == len(seen.events) and r.deltas == 0
    assert r.usage.input_tokens is None and r.finish_reasons == ()


# action -> (outcome, abandoned reason)
ACTIONS = {
    "break_close": (names.ABANDONED, names.ABANDON_CLOSE),
    "close_unread": (names.ABANDONED, names.ABANDON_CLOSE),
    "drop": (names.ABANDONED, names.ABANDON_GC),
    "break_resume": (names.COMPLETED, None),  # a break is no end: the caller read on to the end
}


@pytest.mark.parametrize("action", list(ACTIONS))
@pytest.mark.parametrize("op", ["converse", "invoke"])
@pytest.mark.parametrize("mode", MODES)
def test_caller_ends(
    rec: RecordingListener, server: BedrockServer, mode: str, op: str, action: str
) -> None:
    model = "completed" if op == "converse" else "anthropic.completed"
    r, seen = observed(rec, server, mode, op, model, action)
    assert (r.outcome, r.abandoned_reason) == ACTIONS[action], r
    assert r.error_class is None and seen.error is None


@pytest.mark.skipif(not HAS_AIOBOTOCORE, reason="aiobotocore is not installed")
@pytest.mark.parametrize("op", ["converse", "invoke"])
def test_task_cancel(rec: RecordingListener, server: BedrockServer, op: str) -> None:
    """The caller's task is cancelled while it waits for the first delta (after messageStart: aiobotocore hands
    each chunk over as it comes)."""
    model = "pause" if op == "converse" else "anthropic.pause"
    r, seen = observed(rec, server, "async", op, model, "cancel")
    assert (r.outcome, r.abandoned_reason, r.error_class) == (names.ABANDONED, names.ABANDON_CANCEL, None)
    assert seen.error == "CancelledError" and r.deltas == 0


@pytest.mark.parametrize("mode", MODES)
def test_message_stop_without_metadata(rec: RecordingListener, server: BedrockServer, mode: str) -> None:
    model = server.add_stream([
        event("messageStart", {"role": "assistant"}),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
        event("contentBlockStop", {"contentBlockIndex": 0}),
        event("messageStop", {"stopReason": "end_turn"}),
    ])  # fmt: skip
    r, _ = observed(rec, server, mode, "converse", model)
    assert (r.outcome, r.deltas) == (names.COMPLETED, 1)
    assert dict(r.anomaly_counts).get(names.ANOM_USAGE_MISSING) == 1
    assert r.usage.input_tokens is None


@pytest.mark.parametrize("mode", MODES)
def test_other_operations_pass_untouched(rec: RecordingListener, server: BedrockServer, client: Any, mode: str) -> None:
    """A non-streaming call of the same client (``converse``) makes no report."""
    if mode == "sync":
        from botocore.exceptions import ClientError

        with pytest.raises(ClientError):  # the stand-in serves only the streaming routes: a 404 from botocore
            client.converse(modelId="completed", messages=[{"role": "user", "content": [{"text": "hi"}]}])
    assert rec.reports == [] and rec.started == []
