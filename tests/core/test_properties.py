"""Hypothesis properties of the tracker: any input, any cut point, any end reason → exactly one well-formed report.

The generated events mix arbitrary JSON-ish values with realistic shapes of every surface (known and unknown types,
wrong field types, NaN/inf/negative usage, huge choice indexes), so both the "garbage" and the "almost right" paths
are exercised.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelstream import names
from otelstream.core.chunk_time import CHUNK_BOUNDS_NS, spread_sums
from otelstream.core.report import StreamStart
from otelstream.core.tracker import StreamTracker
from otelstream.names import END_REASONS
from tests.core.harness import MS, FakeClock

# OTELSTREAM_HYPOTHESIS_EXAMPLES=4000 for a longer hunt (4 000 examples ran clean, about 90 s)
SETTINGS = settings(
    max_examples=int(os.environ.get("OTELSTREAM_HYPOTHESIS_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
)  # fmt: skip
json_ish = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)

TYPES = [
    "response.created", "response.in_progress", "response.output_text.delta", "response.refusal.delta",
    "response.function_call_arguments.delta", "response.completed", "response.incomplete", "response.failed",
    "error", "ping", "keepalive", "response.output_item.added", "response.future.delta", "response.mystery",
    "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
    "message_stop", "response.reasoning_summary_text.delta", "response.reasoning_text.delta",
]  # fmt: skip
token_values = st.one_of(st.integers(min_value=-5, max_value=10**6), st.floats(), st.none(), st.text(max_size=3))
usage = st.fixed_dictionaries(
    {},
    optional={
        "input_tokens": token_values, "output_tokens": token_values, "prompt_tokens": token_values,
        "completion_tokens": token_values, "cache_read_input_tokens": token_values,
        "cache_creation_input_tokens": token_values,
        "input_tokens_details": st.fixed_dictionaries({}, optional={"cached_tokens": token_values}),
        "prompt_tokens_details": st.one_of(st.none(), st.fixed_dictionaries({"cached_tokens": token_values})),
    },
)  # fmt: skip
choice = st.fixed_dictionaries(
    {},
    optional={
        "index": st.one_of(st.integers(min_value=-2, max_value=300), st.none(), st.text(max_size=2)),
        "delta": st.one_of(json_ish, st.fixed_dictionaries({}, optional={
            "content": st.one_of(st.none(), st.text(max_size=3)), "refusal": st.one_of(st.none(), st.text(max_size=2)),
            "reasoning_content": st.text(max_size=2),
            "tool_calls": st.lists(st.fixed_dictionaries({"index": st.integers(0, 3), "function": st.fixed_dictionaries(
                {}, optional={"arguments": st.one_of(st.none(), st.text(max_size=3))})}), max_size=3),
        })),
        "text": st.one_of(st.none(), st.text(max_size=3)),
        "finish_reason": st.one_of(st.none(), st.sampled_from(["stop", "length", "content_filter", "tool_calls",
                                                               "abort", "error"]), st.integers()),
    },
)  # fmt: skip
realistic = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(st.sampled_from(TYPES), st.text(max_size=10), st.lists(st.integers(), max_size=2)),
        "sequence_number": st.one_of(st.integers(min_value=-3, max_value=200), st.none(), st.text(max_size=2)),
        "delta": st.one_of(st.text(max_size=4), st.none(), json_ish),
        "response": st.fixed_dictionaries({}, optional={
            "id": st.one_of(st.text(max_size=300), st.integers()), "model": st.text(max_size=5), "usage": usage,
            "error": json_ish, "incomplete_details": json_ish}),
        "message": st.fixed_dictionaries({}, optional={"id": st.text(max_size=5), "usage": usage}),
        "usage": st.one_of(st.none(), usage, json_ish),
        "choices": st.one_of(st.lists(choice, max_size=3), json_ish),
        "error": st.one_of(st.none(), json_ish, st.fixed_dictionaries({"type": st.text(max_size=5),
                                                                       "code": st.one_of(st.text(), st.integers())})),
        "code": json_ish,
        "stream_id": st.one_of(st.none(), st.text(max_size=3)),
    },
)  # fmt: skip
event = st.one_of(realistic, realistic, json_ish)
names_ = st.one_of(st.none(), st.sampled_from(TYPES), st.text(max_size=6))
item = st.one_of(
    st.tuples(st.just("event"), event, names_),
    st.tuples(st.just("keepalive"), st.integers(min_value=1, max_value=3), st.none()),
    st.tuples(st.just("done"), st.none(), st.none()),
)
surfaces = st.sampled_from([*names.SURFACES, "not_a_surface"])
end_reasons = st.one_of(st.sampled_from(END_REASONS), st.text(max_size=5))


def feed(surface: str, items: list[tuple[str, Any, Any]], **kw: Any) -> tuple[StreamTracker, int, int, FakeClock]:
    clock = FakeClock()
    t = StreamTracker(StreamStart(surface=surface), clock=clock, **kw)
    n_events = n_keepalive = 0
    for kind, value, name in items:
        clock.advance(MS)
        t.t_pull = clock()
        clock.advance(MS)
        if kind == "event":
            t.event(value, name)
            n_events += 1
        elif kind == "keepalive":
            t.keepalive(value)
            n_keepalive += value
        else:
            t.done_sentinel()
    return t, n_events, n_keepalive, clock


@SETTINGS
@given(surfaces, st.lists(item, max_size=40), end_reasons, st.one_of(st.none(), st.text(max_size=5)), st.data())
def test_any_input_exactly_one_wellformed_report(
    surface: str, items: list[tuple[str, Any, Any]], how: str, error_type: str | None, data: st.DataObject
) -> None:
    # any cut point: the stream may end after any prefix
    cut = data.draw(st.integers(min_value=0, max_value=len(items)))
    kw = data.draw(st.fixed_dictionaries({}, optional={
        "usage_requested": st.one_of(st.none(), st.booleans()), "expected_choices": st.integers(0, 3),
        "starting_after": st.integers(-1, 5), "client_filter_after": st.integers(-1, 5)}))  # fmt: skip
    t, n_events, n_keepalive, _ = feed(surface, items[:cut], **kw)
    report = t.end(how, error_type)
    assert report is not None
    assert t.end("eof") is None and t.end(how, error_type) is None  # exactly one report
    assert report.outcome in names.OUTCOMES
    if report.outcome == names.ABANDONED:
        assert report.abandoned_reason in names.ABANDON_REASONS
    # counters add up: every event() call is an event or a keepalive; events = deltas + other events
    assert report.events + report.keepalives == n_events + n_keepalive
    assert 0 <= report.deltas <= report.events
    assert sum(report.chunk_counts) == max(report.deltas - 1, 0)
    assert (report.time_to_first_delta_ns is None) == (report.deltas == 0)
    # TTFO: a delta that is not reasoning, so never before the first delta, and never without one
    assert (report.time_to_first_output_ns is None) == (report.first_output_event is None)
    if report.time_to_first_output_ns is not None:
        assert report.time_to_first_delta_ns is not None
        assert report.time_to_first_delta_ns <= report.time_to_first_output_ns
        assert report.first_output_event is not None and 0 <= report.first_output_event < report.events
    # one failure phase per bad outcome; before_output when no delta reached the caller
    assert (report.failure_phase in names.FAILURE_PHASES) == (report.outcome in names.BAD_OUTCOMES)
    if report.failure_phase is not None and report.deltas == 0:
        assert report.failure_phase == names.PHASE_BEFORE_OUTPUT
    # bounded: capped lists, exact counts
    assert len(report.anomalies) <= names.MAX_REPORTED_ANOMALIES
    assert sum(c for _, c in report.anomaly_counts) >= len(report.anomalies)
    assert len(report.finish_reasons) <= 128 and len(report.stalls) <= names.MAX_RECORDED_STALLS
    assert all(len(a.detail) <= 200 for a in report.anomalies)
    assert report.response_id is None or len(report.response_id) <= 128
    assert report.error_type is None or len(report.error_type) <= 64
    kinds = {k for k, _ in report.anomaly_counts}
    assert kinds <= set(names.PROTOCOL_ANOMALY_KINDS) | set(names.SEQUENCE_ANOMALY_BY_KIND.values())
    # one error class per bad outcome, from the closed set; none for a good one
    assert (report.error_class in names.ERROR_CLASSES) == (report.outcome in names.BAD_OUTCOMES)
    assert report.error_class is None or report.outcome in names.BAD_OUTCOMES
    report.to_json()  # serialisable without error
    # the tracker assembles its report without the generated __init__ (report.assemble): every field, same object
    for obj in (report, report.sequence, report.usage):
        values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        assert vars(obj) == values and obj == type(obj)(**values) and hash(obj) == hash(type(obj)(**values))


@SETTINGS
@given(st.lists(st.integers(min_value=1, max_value=5), max_size=60))
def test_skipped_numbers_equal_true_gaps(steps: list[int]) -> None:
    seqs = [0]
    for s in steps:
        seqs.append(seqs[-1] + s)
    t, *_ = feed(names.RESPONSES, [("event", {"type": "response.output_text.delta", "delta": "x",
                                              "sequence_number": n}, None) for n in seqs])  # fmt: skip
    r = t.end("eof")
    assert r is not None
    true_gaps = [b - a - 1 for a, b in itertools.pairwise(seqs) if b - a > 1]
    assert r.sequence.gaps == len(true_gaps) and r.sequence.skipped == sum(true_gaps)
    assert r.sequence.duplicates == 0 and r.sequence.out_of_order == 0 and not r.sequence.bad_start
    assert r.sequence.first == 0 and r.sequence.last == seqs[-1]


@SETTINGS
@given(st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=60))
def test_repeats_are_duplicates(repeats: list[int]) -> None:
    """Each number sent 1 + k times in a row: k duplicates, no gaps, nothing out of order."""
    seqs = [n for n, k in enumerate(repeats) for _ in range(1 + k)]
    t, *_ = feed(names.RESPONSES, [("event", {"type": "response.created", "sequence_number": n}, None) for n in seqs])
    r = t.end("eof")
    assert r is not None
    assert r.sequence.duplicates == sum(repeats) and r.sequence.gaps == 0 and r.sequence.out_of_order == 0


@settings(max_examples=20, deadline=None)
@given(surfaces, st.lists(realistic, min_size=1, max_size=8))
def test_memory_bounded_whatever_the_length(surface: str, pool: list[dict[str, Any]]) -> None:
    """Replay a small pool of events 3 000 times: every container inside the tracker stays capped."""
    clock = FakeClock()
    t = StreamTracker(StreamStart(surface=surface), clock=clock)
    for i in range(3_000):
        clock.advance(MS)
        ev = dict(pool[i % len(pool)])
        if "sequence_number" in ev:
            ev["sequence_number"] = i * 2  # keeps producing gaps: anomalies keep coming
        t.event(ev)
    assert len(t._anomalies or ()) <= names.MAX_REPORTED_ANOMALIES
    assert len(t._anomaly_counts or {}) <= len(names.PROTOCOL_ANOMALY_KINDS) + len(names.SEQUENCE_KINDS)
    assert len(t.choices_seen or ()) <= 128 and len(t._choices_finished or {}) <= 128
    assert len(t.finish_reasons) <= 128 and len(t._stalls or ()) <= names.MAX_RECORDED_STALLS
    assert t.seq_window < 2**64
    assert t.end("eof") is not None


around_bounds = st.sampled_from(CHUNK_BOUNDS_NS).flatmap(lambda b: st.integers(b - 2, b + 2))


@SETTINGS
@given(st.lists(st.one_of(st.integers(0, 2**42), around_bounds), max_size=80))
def test_spread_sums_keep_count_sum_and_placement(gaps: list[int]) -> None:
    """Per-bucket sums from counts and their total: the total is kept, and each bucket's mean lies in the bucket."""
    counts = [0] * (len(CHUNK_BOUNDS_NS) + 1)
    for g in gaps:
        counts[bisect.bisect_left(CHUNK_BOUNDS_NS, g)] += 1
    sums = spread_sums(counts, sum(gaps))
    assert sum(sums) == sum(gaps)
    for i, (c, s) in enumerate(zip(counts, sums, strict=True)):
        if not c:
            assert s == 0
            continue
        low = CHUNK_BOUNDS_NS[i - 1] if i else -1
        assert low * c < s  # every value of the bucket is above the previous bound ...
        if i < len(CHUNK_BOUNDS_NS):
            assert s <= CHUNK_BOUNDS_NS[i] * c  # ... and at most its own (le is inclusive)
