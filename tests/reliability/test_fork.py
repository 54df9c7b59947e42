"""``os.fork()`` with a stream open: the inherited stream is the parent's. The child reports only the streams it
starts itself: dropping the inherited one (collection, the idle fallback, its body's close) exports nothing and
counts nothing there, while the parent still reports it once, under its own span id."""

from __future__ import annotations

import gc
import json
import os
import time
from typing import Any

import openai
import pytest

from otelstream import _guard, names
from tests.support.instrumented import Instrumented, instrumented, outcome_of
from tests.support.raw_server import raw_server

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

BODY = (
    b'data: {"type":"response.created","sequence_number":0,"response":{"id":"r","model":"m"}}\n\n'
    b'data: {"type":"response.output_text.delta","sequence_number":1,"delta":"Hi"}\n\n'
    b'data: {"type":"response.completed","sequence_number":2,'
    b'"response":{"id":"r","usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
)
ABANDON_AFTER_S = 1.0


def _open(base: str, model: str) -> Any:
    oa = openai.OpenAI(api_key="sk-test", base_url=base + "/v1", max_retries=0)
    return oa.responses.create(model=model, input="x", stream=True)


def _spans(ins: Instrumented) -> list[dict[str, Any]]:
    return [
        {
            "model": (s.attributes or {}).get(names.ATTR_REQUEST_MODEL),
            "span_id": s.context.span_id if s.context is not None else None,
            "outcome": outcome_of(s),
            "reason": (s.attributes or {}).get(names.ATTR_ABANDONED_REASON),
        }
        for s in ins.finished()
    ]


def _child(ins: Instrumented, base: str, held: list[Any], how: str) -> dict[str, Any]:
    """What the child exports after the fork, having waited past the idle deadline and then dropped the inherited
    stream (``drop``: its last reference, then a collection) or read it to its end and closed it (``read``)."""
    ins.spans.clear()  # the parent's spans exported before the fork are in this copy of the exporter
    out: dict[str, Any] = {
        "streams_at_fork": ins.streams_total(),
        "active_at_fork": ins.sample(names.PROM_STREAMS_ACTIVE),
    }
    time.sleep(ABANDON_AFTER_S * 1.5)  # past the idle fallback's deadline: the watchdog must leave it alone
    if how == "read":
        with held[0] as inherited:
            out["inherited_items"] = sum(1 for _ in inherited)  # the parent has not read the socket: all here
    held.clear()  # the child's last reference to the inherited stream
    gc.collect()  # openai's Stream sits in a cycle: only a cyclic collection finalizes it
    # The child's own stream must be collected well within the idle deadline, or the idle fallback ends it first. A
    # full collection of the test session's heap took over a second on a loaded machine: freezing what exists now
    # leaves the next one only the objects made since, this stream's among them.
    gc.freeze()
    own = _open(base, "child-model")
    next(own)  # idleness counts from its last event: from here, not from the send (an HTTP round trip earlier)
    out["active_own_open"] = ins.sample(names.PROM_STREAMS_ACTIVE)
    del own
    gc.collect()
    out["spans"] = _spans(ins)
    out["streams_after"] = ins.streams_total()
    out["active_after"] = ins.sample(names.PROM_STREAMS_ACTIVE)
    out["internal_errors"] = [f"{where}: {exc!r}" for where, exc in _guard.errors]
    return out


@pytest.mark.parametrize("how", ["drop", "read"])
def test_forked_child_reports_only_its_own_streams(how: str) -> None:
    with raw_server(BODY) as base, instrumented(abandon_after_s=ABANDON_AFTER_S, watchdog_interval_s=0.05) as ins:
        held = [_open(base, "parent-model")]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(r)
                os.write(w, json.dumps(_child(ins, base, held, how)).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r, "rb") as reader:
            raw = reader.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0 and raw, "the child failed"
        child = json.loads(raw)

        # the child: nothing for the parent's stream (no span, no count, not active), its own one reported as usual
        assert child["internal_errors"] == []
        assert child.get("inherited_items", 3) == 3  # the read case really read the inherited stream to its end
        assert [s["model"] for s in child["spans"]] == ["child-model"], child["spans"]
        assert child["spans"][0]["outcome"] == names.ABANDONED and child["spans"][0]["reason"] == names.ABANDON_GC
        assert child["streams_after"] - child["streams_at_fork"] == 1
        assert child["active_at_fork"] == 0 and child["active_own_open"] == 1 and child["active_after"] == 0

        # the parent: its stream is still its own, open until the idle fallback ends it, reported once
        deadline = time.monotonic() + 10
        while ins.streams_total() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        spans = _spans(ins)
        assert [(s["model"], s["outcome"], s["reason"]) for s in spans] == [
            ("parent-model", names.ABANDONED, names.ABANDON_IDLE)
        ]
        assert spans[0]["span_id"] not in {s["span_id"] for s in child["spans"]}
        held.clear()
