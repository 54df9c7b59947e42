"""The demo's table logic: quantiles from histogram buckets (PromQL semantics) and per-surface figures from a
registry's exposition text."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from otelstream import names
from otelstream.demo import table as T

INF = math.inf


def test_histogram_quantile_matches_promql() -> None:
    # 10 observations: 4 in (0, 0.1], 4 in (0.1, 0.2], 2 in (0.2, 0.4]
    buckets = [(0.1, 4.0), (0.2, 8.0), (0.4, 10.0), (INF, 10.0)]
    assert T.histogram_quantile(0.5, buckets) == pytest.approx(0.125)  # rank 5: 1/4 into (0.1, 0.2]
    assert T.histogram_quantile(0.2, buckets) == pytest.approx(0.05)  # first bucket starts at 0
    assert T.histogram_quantile(0.95, buckets) == pytest.approx(0.35)
    assert T.histogram_quantile(1.0, buckets) == pytest.approx(0.4)
    # a rank in +Inf answers the highest finite bound
    assert T.histogram_quantile(0.99, [(0.1, 1.0), (INF, 5.0)]) == 0.1
    assert T.histogram_quantile(0.5, [(0.1, 0.0), (INF, 0.0)]) is None
    assert T.histogram_quantile(0.5, []) is None
    assert T.histogram_quantile(0.5, [(0.1, 3.0)]) is None  # no +Inf bucket: not a histogram


def _registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    common = [names.LABEL_PROVIDER, names.LABEL_OPERATION, names.LABEL_MODEL]
    streams = Counter(names.PROM_STREAMS, "s", [*common, names.LABEL_SURFACE, names.LABEL_OUTCOME], registry=reg)
    ttfd = Histogram(names.PROM_TIME_TO_FIRST_CHUNK, "t", common, buckets=names.DURATION_BUCKETS, registry=reg)
    wait = Histogram(names.PROM_MAX_WAIT, "w", [*common, names.LABEL_SURFACE], buckets=names.DURATION_BUCKETS,
                     registry=reg)  # fmt: skip
    seq = Counter(names.PROM_SEQUENCE_ANOMALIES, "q", [*common, names.LABEL_SURFACE, names.LABEL_KIND], registry=reg)
    tokens = Histogram(names.PROM_TOKEN_USAGE, "k", [*common, names.LABEL_TOKEN_TYPE], buckets=names.TOKEN_BUCKETS,
                       registry=reg)  # fmt: skip
    resp = ("openai", "chat", "gpt-4o-mini")
    msg = ("anthropic", "chat", "claude")
    streams.labels(*resp, names.RESPONSES, names.COMPLETED).inc(7)
    streams.labels(*resp, names.RESPONSES, names.CUT).inc(2)
    streams.labels(*msg, names.MESSAGES, names.ERROR).inc(1)
    for v in (0.05, 0.05, 0.15, 0.15, 0.15, 0.3, 0.3, 0.3, 0.3):
        ttfd.labels(*resp).observe(v)
    ttfd.labels(*msg).observe(9.0)  # another model: must not leak into responses' quantiles
    for v in (0.01, 1.5):
        wait.labels(*resp, names.RESPONSES).observe(v)
    seq.labels(*resp, names.RESPONSES, names.SEQ_GAP).inc(3)
    tokens.labels(*resp, names.TOKEN_TYPE_INPUT).observe(100)
    tokens.labels(*resp, names.TOKEN_TYPE_OUTPUT).observe(40)
    tokens.labels(*resp, names.TOKEN_TYPE_OUTPUT).observe(2)
    return reg


def test_collect_and_render_from_exposition() -> None:
    samples = T.parse_exposition(generate_latest(_registry()).decode())
    stats = T.collect(samples, {names.RESPONSES: "gpt-4o-mini", names.MESSAGES: "claude"})
    assert list(stats) == [names.RESPONSES, names.MESSAGES]
    r = stats[names.RESPONSES]
    assert r.streams == 9 and r.outcomes[names.COMPLETED] == 7 and r.outcomes[names.CUT] == 2
    assert r.ttfd[0] is not None and 0.08 < r.ttfd[0] <= 0.16  # rank 4.5 of 9 falls in (0.08, 0.16]
    assert r.ttfd[2] is not None and 0.16 < r.ttfd[2] <= 0.32
    assert r.max_wait_p95 is not None and 1.28 < r.max_wait_p95 <= 2.56
    assert r.sequence == {names.SEQ_GAP: 3}
    assert (r.tokens_in, r.tokens_out) == (100, 42)
    assert stats[names.MESSAGES].ttfd[0] is not None and stats[names.MESSAGES].ttfd[0] > 5.12
    text = T.render(stats)
    assert T.parse_outcome_table(text) == {
        names.RESPONSES: {**dict.fromkeys(names.OUTCOMES, 0), names.COMPLETED: 7, names.CUT: 2},
        names.MESSAGES: {**dict.fromkeys(names.OUTCOMES, 0), names.ERROR: 1},
        "total": {**dict.fromkeys(names.OUTCOMES, 0), names.COMPLETED: 7, names.CUT: 2, names.ERROR: 1},
    }


def test_the_error_class_table() -> None:
    reg = CollectorRegistry()
    labels = [names.LABEL_PROVIDER, names.LABEL_OPERATION, names.LABEL_MODEL, names.LABEL_SURFACE,
              names.LABEL_OUTCOME, names.LABEL_ERROR_TYPE]  # fmt: skip
    streams = Counter(names.PROM_STREAMS, "s", labels, registry=reg)
    streams.labels("openai", "chat", "m", names.CHAT_COMPLETIONS, names.COMPLETED, "").inc(5)
    streams.labels("openai", "chat", "m", names.CHAT_COMPLETIONS, names.HTTP_ERROR, names.EC_RATE_LIMITED).inc(2)
    streams.labels("anthropic", "chat", "c", names.MESSAGES, names.HTTP_ERROR, names.EC_OVERLOADED).inc(1)
    stats = T.collect(T.parse_exposition(generate_latest(reg).decode()))
    assert stats[names.CHAT_COMPLETIONS].error_classes == {names.EC_RATE_LIMITED: 2}
    assert stats[names.MESSAGES].error_classes == {names.EC_OVERLOADED: 1}
    text = T.render(stats)
    lines = text.splitlines()
    at = lines.index("Failed streams by error class  (error_type label)")
    assert lines[at + 1].split() == ["surface", names.EC_RATE_LIMITED, names.EC_OVERLOADED]
    assert lines[at + 3].split() == [names.CHAT_COMPLETIONS, "2", "0"]
    # healthy traffic: no class table at all
    healthy = CollectorRegistry()
    Counter(names.PROM_STREAMS, "s", labels, registry=healthy).labels("openai", "chat", "m", names.RESPONSES,
                                                                      names.COMPLETED, "").inc()  # fmt: skip
    assert "error class" not in T.render(T.collect(T.parse_exposition(generate_latest(healthy).decode())))
