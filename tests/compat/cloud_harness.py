"""The compat method (harness.py) on the Gemini and Bedrock stand-ins (tests/support/gemini_server.py,
bedrock_server.py): there the model name picks the script, so a framework under test is a function
``run(base_url, model, early_break) -> Seen`` that builds the framework's model on that endpoint and model, streams
and collects. Each case runs twice on the same script, otelstream off then on: what the framework yielded, returned
and raised must be the same, and the instrumented run must leave exactly one otelstream span (and one
``otelstream_streams_total`` sample) with the case's outcome, the surface, the provider, TTFD and usage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from otelstream import names
from tests.compat.harness import BREAK_PAUSE_S, Seen, _scrub, check_span, with_and_without
from tests.support import bedrock_server, eventstream, gemini_server
from tests.support.bedrock_server import BedrockServer
from tests.support.cloud_server import Pause, ScriptedCloudServer
from tests.support.gemini_server import GeminiServer

PAUSE_S = gemini_server.PAUSE_S  # both stand-ins' pause script waits this long before the first delta
assert bedrock_server.PAUSE_S == PAUSE_S
OUTPUT_TOKENS = 3  # both stand-ins' completed and pause scripts report 3 output tokens


@dataclass(frozen=True)
class CloudCase:
    name: str
    outcome: str  # what otelstream must report
    script: str  # the stand-in's script (the model name); "" for the early break's own body


CLOUD_CASES = [
    CloudCase("complete", names.COMPLETED, "completed"),
    CloudCase("cut", names.CUT, "cut"),
    CloudCase("in_band_error", names.ERROR, "error"),
    CloudCase("http_503", names.HTTP_ERROR, "http_503"),
    CloudCase("early_break", names.ABANDONED, ""),
    CloudCase("ttfd_pause", names.COMPLETED, "pause"),
]
CLOUD_IDS = [c.name for c in CLOUD_CASES]


@dataclass(frozen=True)
class Stand:
    """A stand-in as the harness uses it: its surface and provider, and how to script the early break."""

    surface: str
    provider: str
    early_break: Callable[[ScriptedCloudServer], str]  # registers the body; returns its model name


def _gemini_break(server: ScriptedCloudServer) -> str:
    assert isinstance(server, GeminiServer)
    c, t = gemini_server.chunk, gemini_server.text
    steps = [c([t("Hel")]), Pause(BREAK_PAUSE_S), c([t("lo")]), c([t("!")], "STOP", gemini_server.usage(5, 3))]
    return server.add_stream(list(steps))


def _bedrock_break(server: ScriptedCloudServer) -> str:
    assert isinstance(server, BedrockServer)
    ev = eventstream.event
    steps = [
        ev("messageStart", {"role": "assistant"}),
        ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}}),
        Pause(BREAK_PAUSE_S),
        ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "lo"}}),
        ev("contentBlockStop", {"contentBlockIndex": 0}),
        ev("messageStop", {"stopReason": "end_turn"}),
        ev("metadata", {"usage": {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8}, "metrics": {"latencyMs": 1}}),
    ]
    return server.add_stream(list(steps))


GEMINI = Stand(names.GENERATE_CONTENT, names.PROVIDER_GEMINI, _gemini_break)
BEDROCK = Stand(names.CONVERSE, names.PROVIDER_BEDROCK, _bedrock_break)

CloudRun = Callable[[str, str, bool], Seen]


def check_cloud(server: ScriptedCloudServer, stand: Stand, case: CloudCase, run: CloudRun) -> None:
    """The suite's one assertion on a stand-in (``with_and_without``): identical with and without otelstream, one
    span with the case's outcome, on the stand-in's surface and provider, with TTFD and usage where the stream has
    them."""
    early_break = case.name == "early_break"
    model = case.script or stand.early_break(server)  # one name for both runs (it may show in the output)
    before = len(server.requests)
    plain_run, attrs = with_and_without(
        lambda: _scrub(run(server.base_url, model, early_break), server.base_url), case.outcome, collect=early_break
    )
    # one request per run: the framework's and the SDK's retries are off (a retried 503 would be two streams)
    assert [r.script for r in server.requests[before:]] == [model, model], server.requests[before:]
    if case.name == "cut":  # the deltas before the EOF came (langchain-aws then raises on its own: no messageStop)
        assert plain_run.items, plain_run
    check_span(attrs, case.name, stand.surface, PAUSE_S, OUTPUT_TOKENS)
    assert attrs[names.ATTR_PROVIDER_NAME] == stand.provider, attrs
    if case.name != "http_503":  # a stream that never started has no first delta
        assert attrs[names.ATTR_RESPONSE_TTFC] > 0, attrs
