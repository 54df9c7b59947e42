"""The fake provider tests' harness: tagged requests, their records, the SSE bodies it served."""

from __future__ import annotations

import json
import uuid
from typing import Any

from otelstream.demo.exchange import RequestRecord
from otelstream.demo.pacing import Pacing
from otelstream.demo.provider import FakeProvider

TAG_HEADER = "x-test-tag"
# fast but not zero: slow_first / stall must still be measurable from the client side
TEST_PACING = Pacing(ttfd_s=0.005, gap_s=0.001, pause_s=0.08, no_headers_s=5.0)


def tag() -> str:
    return uuid.uuid4().hex


def record_for(provider: FakeProvider, tag_value: str) -> RequestRecord:
    """The record of the request that carried ``x-test-tag: tag_value`` (after it was fully served)."""
    assert provider.wait_idle(10.0)
    found = [r for r in provider.requests if r.request_headers.get(TAG_HEADER) == tag_value]
    assert len(found) == 1, f"expected one request tagged {tag_value}, got {len(found)}"
    return found[0]


def sse_blocks(body: bytes) -> list[dict[str, Any]]:
    """Split an SSE body into blocks: {"event": name|None, "data": str|None, "comments": [..]}."""
    text = body.decode()
    assert text == "" or text.endswith("\n\n"), "every block the server sends ends with a blank line"
    blocks = []
    for raw in text.split("\n\n"):
        if not raw:
            continue
        block: dict[str, Any] = {"event": None, "data": None, "comments": []}
        for line in raw.split("\n"):
            if line.startswith(":"):
                block["comments"].append(line[1:].strip())
            elif line.startswith("event: "):
                block["event"] = line[len("event: ") :]
            elif line.startswith("data: "):
                block["data"] = line[len("data: ") :]
        blocks.append(block)
    return blocks


def payloads(body: bytes) -> list[Any]:
    """The JSON data payloads of an SSE body (``[DONE]`` as the string)."""
    out: list[Any] = []
    for block in sse_blocks(body):
        if block["data"] is None:
            continue
        out.append(block["data"] if block["data"] == "[DONE]" else json.loads(block["data"]))
    return out
