"""The tracker itself: timing with an injected clock, end reasons, exactly-one report, caps, buckets."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from otelstream import names
from otelstream.core.report import StreamStart
from otelstream.core.tracker import StreamTracker
from otelstream.names import END_REASONS
from tests.core.harness import MS, FakeClock, counts, run, tracker

DELTA = {"type": "response.output_text.delta", "delta": "x"}


def resp(typ: str, seq: int, **kw: object) -> dict[str, object]:
    return {"type": typ, "sequence_number": seq, **kw}


def test_times_from_request_with_fake_clock(clock: FakeClock) -> None:
    t = tracker(names.RESPONSES, clock)
    t_req = clock()
    # the caller asks at +1 ms, the first (non-delta) event arrives at +51 ms
    clock.advance(1 * MS)
    t.t_pull = clock()
    clock.advance(50 * MS)
    t.event(resp("response.created", 0))
    # the caller spends 5 ms with it, asks again, waits 200 ms for the first delta
    clock.advance(5 * MS)
    t.t_pull = clock()
    clock.advance(200 * MS)
    t.event({**DELTA, "sequence_number": 1})
    # consumer 2 ms, wait 10 ms, second delta
    clock.advance(2 * MS)
    t.t_pull = clock()
    clock.advance(10 * MS)
    t.event({**DELTA, "sequence_number": 2})
    clock.advance(1 * MS)
    t.t_pull = clock()
    clock.advance(3 * MS)
    t.event(resp("response.completed", 3, response={"id": "resp_1"}))
    r = t.end("eof")
    assert r is not None
    assert r.t_request_ns == t_req
    assert r.time_to_first_event_ns == 51 * MS
    assert r.time_to_first_delta_ns == 256 * MS
    assert r.wait_ns == (50 + 200 + 10 + 3) * MS
    assert r.max_wait_ns == 200 * MS
    assert r.consumer_ns == (5 + 2 + 1) * MS
    assert r.t_end_ns - r.t_request_ns == 272 * MS  # the terminal event ends the answer
    assert r.outcome == names.COMPLETED
    assert r.events == 4 and r.deltas == 2


def test_frame_stamp_ends_the_wait_and_the_pre_pull_gap_is_the_callers(clock: FakeClock) -> None:
    """The adapter's tap stamps each frame's decoding (``t_frame``): the wait ends there, the SDK's work from then
    to the caller is neither wait nor consumer time; the gap from the stream being handed over to its first pull is
    consumer time. TTFE/TTFD stay what the caller experienced."""
    t = tracker(names.RESPONSES, clock)
    t_req = clock()
    clock.advance(4 * MS)
    t.t_handed = clock()  # headers: the stream reaches the caller
    clock.advance(1000 * MS)  # the caller sets up for a second
    t.first_pull(clock())
    clock.advance(3 * MS)
    t.t_frame = clock()  # decoded after a 3 ms wait...
    clock.advance(700 * MS)  # ...and the SDK builds its models for 0.7 s
    t.event(resp("response.created", 0))
    clock.advance(2 * MS)  # the caller, 2 ms
    t.t_pull = clock()
    clock.advance(5 * MS)
    t.t_frame = clock()
    clock.advance(1 * MS)
    t.event({**DELTA, "sequence_number": 1})  # the flat path
    clock.advance(1 * MS)
    t.t_pull = clock()
    clock.advance(2 * MS)
    t.t_frame = clock()
    clock.advance(1 * MS)
    t.event(resp("response.completed", 2, response={"id": "resp_1"}))
    r = t.end("eof")
    assert r is not None
    assert r.wait_ns == (3 + 5 + 2) * MS and r.max_wait_ns == 5 * MS
    assert r.consumer_ns == (1000 + 2 + 1) * MS
    assert r.time_to_first_event_ns == (4 + 1000 + 3 + 700) * MS
    assert r.time_to_first_delta_ns == r.time_to_first_event_ns + (2 + 5 + 1) * MS
    assert r.t_request_ns == t_req
    assert t.sdk_ns == (700 + 1 + 1) * MS


def test_an_event_without_a_frame_stamp_ends_its_wait_when_it_arrives(clock: FakeClock) -> None:
    """A stamp is used once: an item the tap did not see (WebSocket, offline, a second item from one frame) is timed
    when it arrives, never against an older frame."""
    t = tracker(names.RESPONSES, clock)
    t.first_pull(clock())
    clock.advance(2 * MS)
    t.t_frame = clock()
    t.event(resp("response.created", 0))
    t.t_pull = clock()
    clock.advance(9 * MS)
    t.event({**DELTA, "sequence_number": 1})
    r = t.end("eof")
    assert r is not None
    assert r.wait_ns == (2 + 9) * MS and t.sdk_ns == 0
    assert r.consumer_ns == 0  # never handed over (offline): no pre-pull gap


def test_wait_in_progress_at_end_counts(clock: FakeClock) -> None:
    t = tracker(names.RESPONSES, clock)
    t.t_pull = clock()
    clock.advance(40 * MS)
    r = t.end("eof")
    assert r is not None
    assert r.wait_ns == 40 * MS and r.max_wait_ns == 40 * MS
    assert r.outcome == names.CUT and r.time_to_first_event_ns is None and r.time_to_first_delta_ns is None


def test_stalls_recorded_and_capped(clock: FakeClock) -> None:
    t = StreamTracker(StreamStart(surface=names.RESPONSES), clock=clock, stall_threshold_ns=100 * MS)
    for i in range(names.MAX_RECORDED_STALLS + 3):
        t.t_pull = clock()
        clock.advance(150 * MS)
        t.event({**DELTA, "sequence_number": i})
    r = t.end("close")
    assert r is not None
    assert r.stall_count == names.MAX_RECORDED_STALLS + 3
    assert len(r.stalls) == names.MAX_RECORDED_STALLS
    assert r.stalls[0].wait_s == pytest.approx(0.15)


def test_time_per_output_chunk_buckets_exact(clock: FakeClock) -> None:
    t = tracker(names.RESPONSES, clock)
    gaps_ms = [0.5, 0.5, 3, 7, 7, 100, 100_000]  # the last one overflows into +Inf
    t.event({**DELTA, "sequence_number": 0})  # the first delta starts the clock, it is not a chunk interval
    for i, g in enumerate(gaps_ms, start=1):
        clock.advance(int(g * MS))
        t.event({**DELTA, "sequence_number": i})
    t.event(resp("keepalive", len(gaps_ms) + 1))  # not a delta: no interval
    r = t.end("eof")
    assert r is not None
    bounds = names.TIME_PER_CHUNK_BUCKETS
    assert len(r.chunk_counts) == len(bounds) + 1
    assert sum(r.chunk_counts) == len(gaps_ms)
    assert sum(r.chunk_sums_ns) == sum(int(g * MS) for g in gaps_ms)
    expected = [0] * (len(bounds) + 1)
    for g in gaps_ms:
        i = next((k for k, b in enumerate(bounds) if g / 1000 <= b), len(bounds))
        expected[i] += 1
    assert list(r.chunk_counts) == expected
    # per-bucket sums are derived at the end (the hot path keeps counts only): each bucket's mean lies inside the
    # bucket, so recording the mean `count` times keeps count, total sum and bucket placement exact
    lows = (0.0, *bounds)
    for i, (count, total) in enumerate(r.chunk_buckets()):
        if count:
            mean = total / count
            assert lows[i] < mean or (i == 0 and mean >= 0)
            assert i == len(bounds) or mean <= bounds[i]


def test_bucket_boundary_is_inclusive(clock: FakeClock) -> None:
    """Prometheus buckets are `le`: a gap exactly on a bound lands in that bound's bucket."""
    t = tracker(names.RESPONSES, clock)
    t.event({**DELTA, "sequence_number": 0})
    clock.advance(int(names.TIME_PER_CHUNK_BUCKETS[1] * 1e9))
    t.event({**DELTA, "sequence_number": 1})
    r = t.end("eof")
    assert r is not None
    assert r.chunk_counts[1] == 1


@pytest.mark.parametrize(
    ("how", "outcome", "reason"),
    [
        ("eof", names.CUT, None),
        ("close", names.ABANDONED, names.ABANDON_CLOSE),
        ("gc", names.ABANDONED, names.ABANDON_GC),
        ("cancel", names.ABANDONED, names.ABANDON_CANCEL),
        ("idle", names.ABANDONED, names.ABANDON_IDLE),
        ("transport_error", names.TRANSPORT_ERROR, None),
        ("http_error", names.HTTP_ERROR, None),
        ("error", names.ERROR, None),
        ("something-new", names.TRANSPORT_ERROR, None),
    ],
)
def test_end_reason_without_terminal(how: str, outcome: str, reason: str | None) -> None:
    r = run(names.RESPONSES, [resp("response.created", 0), {**DELTA, "sequence_number": 1}], how=how)
    assert r.outcome == outcome
    assert r.abandoned_reason == reason
    # no provider code was seen: error_type is null, never the outcome's name; the class says what broke
    assert r.error_type is None
    want = {"eof": names.EC_CUT, "transport_error": names.EC_CONNECTION, "error": names.EC_OTHER,
            "http_error": names.EC_OTHER, "something-new": names.EC_CONNECTION}  # fmt: skip
    assert r.error_class == want.get(how)


def test_end_reasons_listed() -> None:
    assert set(END_REASONS) >= {"eof", "close", "gc", "cancel", "idle", "transport_error", "http_error", "error"}


@pytest.mark.parametrize("how", END_REASONS)
def test_an_end_reason_and_its_plain_string_end_a_stream_alike(how: names.EndReason) -> None:
    """The adapters may still pass the plain string: the same outcome, reason and class; each member prints as it."""
    assert str(how) == f"{how}" == how.value
    events = [resp("response.created", 0), {**DELTA, "sequence_number": 1}]
    by_member, by_string = run(names.RESPONSES, events, how=how), run(names.RESPONSES, events, how=how.value)
    assert by_member.outcome != names.COMPLETED
    assert (by_member.outcome, by_member.abandoned_reason, by_member.error_class) == (
        by_string.outcome, by_string.abandoned_reason, by_string.error_class)  # fmt: skip


@pytest.mark.parametrize("how", ["close", "gc", "cancel", "eof", "transport_error"])
def test_close_after_terminal_keeps_outcome(how: str) -> None:
    r = run(names.RESPONSES, [resp("response.created", 0), resp("response.completed", 1)], how=how)
    assert r.outcome == names.COMPLETED and r.abandoned_reason is None


def test_error_end_beats_completed() -> None:
    """An SDK exception carrying an in-band error outranks what was seen before (error > completed)."""
    clk = FakeClock()
    t = tracker(names.MESSAGES, clk)
    t.event({"type": "message_start", "message": {"id": "m"}})
    r = t.end("error", "overloaded_error")
    assert r is not None and r.outcome == names.ERROR and r.error_type == "overloaded_error"


def test_exactly_one_report_and_nothing_after(clock: FakeClock) -> None:
    t = tracker(names.RESPONSES, clock)
    t.event(resp("response.created", 0))
    first = t.end("close")
    assert first is not None
    assert t.end("eof") is None
    t.event({**DELTA, "sequence_number": 1})
    t.keepalive()
    t.done_sentinel()
    assert t.end("error") is None
    assert first.events == 1 and first.keepalives == 0 and first.deltas == 0


def test_conclude_records_the_end_and_the_report_is_assembled_later(clock: FakeClock) -> None:
    """The end (caller's thread) only records how the stream ended; the report comes from ``final_report``, assembled
    once, from the state as the end left it: what comes later (events, anomalies, a clock that moved on) is not in."""
    t = tracker(names.CHAT_COMPLETIONS, clock)
    assert t.final_report() is None  # open: nothing to assemble
    t.event({"choices": [{"index": 0, "delta": {"content": "a"}}]})
    clock.advance(MS)
    end_ns = clock()
    assert t.conclude("close") and t.report is None
    assert not t.conclude("eof")
    clock.advance(1000 * MS)
    t.event({"choices": [{"index": 0, "delta": {"content": "b"}}]})
    t.anomaly(names.ANOM_BAD_FIELD, "after the end")
    report = t.final_report()
    assert report is not None and t.final_report() is report and t.report is report
    assert (report.outcome, report.abandoned_reason) == (names.ABANDONED, names.ABANDON_CLOSE)
    assert report.t_end_ns == end_ns and report.deltas == 1
    assert names.ANOM_BAD_FIELD not in counts(report)
    assert t.end("eof") is None


def test_report_assembled_exactly_once_across_threads(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    """The export thread and ``report_of`` may ask at the same moment: one assembly, one object for all."""
    from otelstream.core import stream_end as tracker_module

    built: list[str] = []
    real = tracker_module.build_report

    def slow_build(*args: Any) -> Any:
        built.append(threading.current_thread().name)
        time.sleep(0.05)  # every other thread arrives while this one assembles
        return real(*args)

    monkeypatch.setattr(tracker_module, "build_report", slow_build)
    t = tracker(names.CHAT_COMPLETIONS, clock)
    t.event({"choices": [{"index": 0, "delta": {"content": "a"}}]})
    t.done_sentinel()  # [DONE] without usage: the end judges it missing
    assert t.conclude("eof")
    go = threading.Barrier(8)
    got: list[object] = []

    def ask() -> None:
        go.wait()
        got.append(t.final_report())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
    assert len(built) == 1 and len(got) == 8
    assert got[0] is not None and all(r is got[0] for r in got)
    # the anomalies only the end judges were added once (a second assembly would add them again)
    assert counts(got[0])[names.ANOM_USAGE_MISSING] == 1


def test_anomalies_capped_counts_exact() -> None:
    events = [resp("response.created", 0)] + [{"type": f"response.future_{i}", "sequence_number": i} for i in
                                              range(1, 101)]  # fmt: skip
    r = run(names.RESPONSES, events)
    assert len(r.anomalies) == names.MAX_REPORTED_ANOMALIES
    assert counts(r)[names.ANOM_UNKNOWN_EVENT] == 100
    assert r.anomalies[0].event_index == 1
    assert r.events == 101


def test_keepalive_and_done_not_events() -> None:
    r = run(names.CHAT_COMPLETIONS, [("ping", {"type": "ping"}), {"choices": []}, "[DONE]"])
    assert r.keepalives == 1 and r.events == 1 and r.done_sentinel


def test_non_mapping_event_is_bad_field_not_crash() -> None:
    r = run(names.RESPONSES, [42, "text", None, [1, 2]])
    assert r.events == 4 and r.deltas == 0
    assert counts(r)[names.ANOM_BAD_FIELD] == 4


def test_sdk_like_object_read_through_dict() -> None:
    class Ev:
        def __init__(self, **kw: object) -> None:
            self.__dict__.update(kw)

    r = run(names.RESPONSES, [Ev(type="response.created", sequence_number=0),
                              Ev(type="response.output_text.delta", sequence_number=1, delta="hi"),
                              Ev(type="response.completed", sequence_number=2, response=None)])  # fmt: skip
    assert r.outcome == names.COMPLETED and r.deltas == 1


def test_backwards_clock_is_ignored(clock: FakeClock) -> None:
    t = tracker(names.RESPONSES, clock)
    t.t_pull = clock()
    clock.advance(-5 * MS)
    t.event(resp("response.created", 0))
    r = t.end("eof")
    assert r is not None and r.wait_ns == 0 and r.max_wait_ns == 0


@pytest.mark.parametrize(
    ("value", "ok"),
    [(5, 5), (5.0, 5), (-1, None), (float("nan"), None), (float("inf"), None), ("7", None), (True, None)],
)
def test_token_validation(value: object, ok: int | None) -> None:
    r = run(names.RESPONSES, [resp("response.completed", 0, response={"usage": {"input_tokens": value}})])
    assert r.usage.input_tokens == ok
    if ok is None:
        assert counts(r)[names.ANOM_BAD_FIELD] == 1


CHAT_DONE = [
    {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
]


def test_unobserved_measures_are_unknown_not_zero() -> None:
    """A patch point missing from the SDK: what rests on it is None in the report, its anomalies are not raised."""
    unobserved = frozenset(
        {names.MEASURE_TIME_TO_FIRST_EVENT, names.MEASURE_TIME_TO_FIRST_DELTA, names.MEASURE_RETRIES,
         names.MEASURE_KEEPALIVES, names.MEASURE_DONE_SENTINEL, names.MEASURE_DURATION}
    )  # fmt: skip
    r = run(names.CHAT_COMPLETIONS, CHAT_DONE, unobserved=unobserved)
    assert r.outcome == names.COMPLETED
    assert (r.time_to_first_event_ns, r.time_to_first_delta_ns, r.retries, r.keepalives, r.done_sentinel) == (
        None, None, None, None, None,
    )  # fmt: skip
    assert names.ANOM_MISSING_DONE not in dict(r.anomaly_counts)
    assert r.unobserved == tuple(sorted(unobserved))
    assert r.output_tokens_per_second is None
    # the same stream fully observed: every one of them is known
    full = run(names.CHAT_COMPLETIONS, CHAT_DONE)
    assert full.time_to_first_delta_ns is not None and full.retries == 0 and full.keepalives == 0
    assert full.done_sentinel is False and dict(full.anomaly_counts)[names.ANOM_MISSING_DONE] == 1
    assert full.unobserved == ()
