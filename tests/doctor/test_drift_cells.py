"""The doctor under each drift reshaping (tests/support/drift_shapes.py), applied before its patches as at a start-up
on such a release: the self-check's smaller matrix (completed, cut, reset, break + close, cancel, on the four SSE
surfaces, sync and async) holds, and the reshaping ran.

These cells are the ones that tell whether a release's reshaping moved what otelstream reports: with the older
close rule (who closed the body decided from the stack and the running task) they fail under every reshaping here:

- foreign-close: cut and reset read ``close`` (the SDK's own ``finally: response.close()`` ran on another thread);
- read-ahead: nearly every cell (the body's reads and closes run in the library's own thread or task);
- lookahead: reset counts and the cancel cell (and, in the whole matrix, `[DONE]` on Chat and Completions);
- close-closes-generator: break + close reads ``gc``;
- close-keeps-response: break + close reads ``gc``, and no report was there as the caller's ``close()`` returned.

And the cells must not fail where otelstream is right: a release that reads ahead reaches the server's hold before
the caller's pull does, and one that looks one frame ahead hands over fewer items before a failure or a hold; the
doctor's caller judges by what it received (``callers.Watch``), not by what the server sent.
"""

from __future__ import annotations

import pytest

from otelstream import names
from otelstream.core.report import StreamReport
from otelstream.doctor import faults, runner
from tests.support.drift_shapes import HITS, SHAPES, patches_for


@pytest.mark.parametrize("shape", SHAPES)
def test_small_matrix_holds_under_reshaping(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for owner, attr, func in patches_for(shape):
        monkeypatch.setattr(owner, attr, func)
    HITS.clear()
    result = runner.run(small=True)
    failed = {r.cell.key: (r.problem, {m: (r.expected[m], r.observed and r.observed[m]) for m in r.mismatches})
              for r in result.failed}  # fmt: skip
    assert result.ok and not failed, failed
    # the SSE surfaces' cells (the drift reshapes are openai's and anthropic's); Gemini and Bedrock cells join them
    assert len([r for r in result.rows if r.cell.surface in faults.SSE_SURFACES]) == 36
    assert HITS[shape], f"the {shape} reshaping never ran"


def test_a_close_is_judged_as_it_returns() -> None:
    """The close cells compare how many reports there were as ``close()`` returned: a report that comes later (from
    the collector, or an idle fallback) is a mismatch even with the right reason."""
    cell = next(c for c in runner.cells() if c.key == "messages/sync/break_close")
    served = runner.bodies.serve(cell.surface, cell.fault)
    expected = runner.expected_of(cell, served)
    assert expected["reported_at_close"] == 1
    late = StreamReport(surface=cell.surface, provider="anthropic", outcome=names.ABANDONED,
                        abandoned_reason=names.ABANDON_CLOSE)  # fmt: skip
    assert "reported_at_close" in runner.compare(cell, expected, [late], at_close=0).mismatches


def test_expected_counts_follow_what_the_caller_received() -> None:
    """A drain that received one item fewer than the server sent before a reset expects that many events and
    deltas; one that received them all, all of them."""
    cell = next(c for c in runner.cells() if c.key == "chat_completions/sync/reset")
    served = runner.bodies.serve(cell.surface, cell.fault)
    whole = runner.expected_of(cell, served)
    assert runner.expected_of(cell, served, whole["events"]) == whole
    short = runner.expected_of(cell, served, whole["events"] - 1)
    assert (short["events"], short["deltas"]) == (whole["events"] - 1, whole["deltas"] - 1)
