"""The end of a stream: the anomalies only the end can judge (a missing usage chunk, ``[DONE]`` or finish reason, an
answer without a delta), and the one ``StreamReport`` assembled from the state. Runs once per stream, on the thread
that ends it. Pure module.
"""

from __future__ import annotations

from otelstream import names
from otelstream.core import protocols
from otelstream.core.choices import MAX_CHOICES
from otelstream.core.chunk_time import N_CHUNK_BUCKETS, spread_sums
from otelstream.core.report import SequenceStats, StreamReport, Usage, assemble
from otelstream.core.sequence_numbers import NO_SEQUENCE
from otelstream.core.side_objects import NO_RARE, NO_TOKENS
from otelstream.core.state import StreamState


def final_anomalies(s: StreamState, outcome: str) -> None:
    """The anomalies only the end can judge, now that ``outcome`` is known."""
    surface = s.surface
    answered = outcome in (names.COMPLETED, names.INCOMPLETE)
    if surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS):
        if (s.done_ended or s.all_choices_finished()) and not s.usage_seen:
            s.add_anomaly(names.ANOM_USAGE_MISSING)
        if s.done_ended and answered:
            _missing_finish_reasons(s)
        if answered and s.done_observable and not s.done_seen:
            s.add_anomaly(names.ANOM_MISSING_DONE)
    if surface == names.CONVERSE and answered and s.terminal and not s.usage_seen:
        s.add_anomaly(names.ANOM_USAGE_MISSING)  # messageStop came, the metadata event after it did not
    if answered and s.deltas == 0 and not protocols.transport_decides(s):
        s.add_anomaly(names.ANOM_NO_DELTA)  # a payload otelstream does not read has no deltas it could count


def _missing_finish_reasons(s: StreamState) -> None:
    """One ``missing_finish_reason`` per choice (seen, or expected from the request's ``n``) that [DONE] ended
    without a finish reason."""
    r = s._rare or NO_RARE
    finished = r._choices_finished or {}
    seen = set(r.choices_seen) if r.choices_seen is not None else set()
    if s.last_choice is not None:
        seen.add(s.last_choice)  # type: ignore[arg-type]
    for index in sorted(seen.difference(finished)):
        s.add_anomaly(names.ANOM_MISSING_FINISH_REASON, f"choice {index}")
    expected = min(s.expected_choices or 0, MAX_CHOICES)
    for _ in range(expected - len(seen.union(finished))):
        s.add_anomaly(names.ANOM_MISSING_FINISH_REASON, "a requested choice never seen")


def build_report(
    s: StreamState, outcome: str, abandoned_reason: str | None, t_end: int, error_class: str | None
) -> StreamReport:
    """The stream's one report: every field of ``StreamReport`` from the state."""
    start = s.start
    t0 = s.t_request
    # the side objects (their defaults when never made), read directly: the forwarding properties cost a call each
    r = s._rare or NO_RARE
    q = s._seq or NO_SEQUENCE
    u = s._tokens or NO_TOKENS
    ttfe = s.t_first_event - t0 if s.t_first_event else None
    ttfd = s.t_first_delta - t0 if s.t_first_delta else None
    ttfo = s.t_first_output - t0 if s.t_first_output else None
    retries: int | None = s.retries
    keepalives: int | None = s.keepalives
    keepalive_gap: int | None = r.max_keepalive_gap_ns or None
    done: bool | None = s.done_seen
    unobserved = s.unobserved
    if unobserved:  # a patch point is missing from the SDK: what rests on it is unknown, not zero or guessed
        if names.MEASURE_TIME_TO_FIRST_EVENT in unobserved:
            ttfe = None
        if names.MEASURE_TIME_TO_FIRST_DELTA in unobserved:
            ttfd = ttfo = None  # both rest on t_request stamped at the send
        if names.MEASURE_RETRIES in unobserved:
            retries = None
        if names.MEASURE_KEEPALIVES in unobserved:
            keepalives = keepalive_gap = None
        if names.MEASURE_DONE_SENTINEL in unobserved and not s.done_seen:
            done = None
        if names.MEASURE_USAGE in unobserved:
            u = NO_TOKENS
    counts = r._anomaly_counts
    chunk_counts = s._chunk_counts or [0] * N_CHUNK_BUCKETS
    chunk_total = s.t_prev_delta - s.t_first_delta if s.t_first_delta else 0
    sequence = assemble(
        SequenceStats,
        {
            "first": q.seq_first,
            "last": s.last_sequence(),
            "gaps": q.seq_gaps,
            "skipped": q.seq_skipped,
            "duplicates": q.seq_duplicates,
            "out_of_order": q.seq_out_of_order,
            "bad_start": q.seq_bad_start,
            "missing": q.seq_missing,
        },
    )
    usage = assemble(
        Usage,
        {
            "input_tokens": u.usage_input,
            "output_tokens": u.usage_output,
            "cache_read_input_tokens": u.usage_cache_read,
            "cache_write_input_tokens": u.usage_cache_write,
            "reasoning_output_tokens": u.usage_reasoning,
        },
    )
    return assemble(
        StreamReport,
        {
            "surface": s.surface,
            "provider": start.provider,
            "outcome": outcome,
            "request_model": start.request_model,
            "response_model": s.response_model,
            "response_id": s.response_id,
            "request_id": s.request_id,
            "stream_id": start.stream_id,
            "server_address": start.server_address,
            "server_port": start.server_port,
            "api_type": start.api_type,
            "service_tier": s.service_tier,
            "provider_latency_ms": s.provider_latency_ms,
            "system_fingerprint": s.system_fingerprint,
            "attributes": start.attributes,
            "abandoned_reason": abandoned_reason,
            "error_type": r.error_type,  # the provider's, as sent: never an outcome name
            "error_class": error_class,
            "finish_reasons": tuple(r.finish_reasons),
            "resumed": start.resumed or r.starting_after is not None or s.client_filter_after is not None,
            "retries": retries,
            "t_request_ns": t0,
            "t_end_ns": max(t_end, t0),
            "time_to_first_event_ns": ttfe,
            "time_to_first_delta_ns": ttfd,
            "time_to_first_output_ns": ttfo,
            "first_output_event": s.first_output_event if s.t_first_output else None,
            "max_wait_ns": max(0, s.max_wait_ns),
            "wait_ns": max(0, s.wait_ns),  # never negative, even with an injected clock that went backwards
            "consumer_ns": max(0, r.consumer_ns),
            "events": s.events,
            "deltas": s.deltas,
            "keepalives": keepalives,
            "max_keepalive_gap_ns": keepalive_gap,
            "done_sentinel": done,
            "sequence": sequence,
            "usage": usage,
            "usage_requested": bool(s.usage_requested),
            "anomalies": tuple(r._anomalies or ()),
            "anomaly_counts": tuple(sorted(counts.items())) if counts else (),
            "stalls": tuple(r._stalls or ()),
            "stall_count": r.stall_count,
            "chunk_counts": tuple(chunk_counts),
            "chunk_sums_ns": spread_sums(chunk_counts, chunk_total),
            "ratelimits": s.ratelimits,
            "unobserved": tuple(sorted(unobserved)) if unobserved else (),
        },
    )

