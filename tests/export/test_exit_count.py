"""What the exit drain says when the export cannot finish: the reports it really left, counted before it gave up
(an exporter that took a report in and hangs has emptied the queue without exporting anything)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from otelstream.export.dispatcher import Dispatcher

EXIT_S = 0.2  # the exit drain's bound in these tests


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "otelstream"]


def test_a_hung_exporter_at_exit_is_reported_with_every_report_it_left(caplog: pytest.LogCaptureFixture) -> None:
    """Seven reports: one in the hung handler, six queued behind it, plus the marker of an earlier flush that timed
    out: seven not exported, neither six (the one taken in) nor eight (the marker)."""
    release, taken = threading.Event(), threading.Event()

    def hung(item: Any) -> None:
        taken.set()
        release.wait(30)

    d: Dispatcher[int] = Dispatcher(hung, 100, atexit_timeout=EXIT_S)
    try:
        assert d.submit(0) and taken.wait(5.0)
        for i in range(1, 7):
            assert d.submit(i)
        assert not d.flush(0.05)  # leaves its marker behind the items
        with caplog.at_level(logging.WARNING, logger="otelstream"):
            d._at_exit()
        assert _warnings(caplog) == [
            f"otelstream: 7 stream report(s) not exported at exit (the export did not finish within {EXIT_S:g} s)"
        ]
    finally:
        release.set()
        d.shutdown(5.0)


def test_reports_handed_to_a_provider_whose_flush_hangs_are_not_said_to_be_zero(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The span thread handed every span end over (a batch processor took them in), then the provider's flush hangs
    on an endpoint that is down: otelstream holds no report, and must not say "0 stream report(s)"."""
    handed: list[int] = []
    release = threading.Event()
    flushes: list[float] = []

    def provider_flush(deadline: float) -> bool:
        flushes.append(deadline)
        if len(flushes) == 1:
            return True  # the endpoint answered once; it is down by the exit
        release.wait(30)
        return False

    spans: Dispatcher[int] = Dispatcher(handed.append, 100, name="spans", on_flush=provider_flush)
    metrics: Dispatcher[int] = Dispatcher(spans.submit, 100, atexit_timeout=EXIT_S, downstream=spans)
    try:
        for i in range(7):
            assert metrics.submit(i)
        assert metrics.flush(5.0)  # every span end handed over
        with caplog.at_level(logging.WARNING, logger="otelstream"):
            metrics._at_exit()
        assert handed == list(range(7))
        (said,) = _warnings(caplog)
        assert "0 stream report" not in said
        assert said == (
            f"otelstream: the exporters did not finish flushing at exit within {EXIT_S:g} s: what they still held "
            "may not be exported"
        )
    finally:
        release.set()
        metrics.shutdown(5.0)


def test_reports_queued_when_the_exit_began_count_though_a_hung_exporter_took_them_in(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Queued at exit, then taken in by the exporter during the drain, which then hangs: they count, as read when
    the exit began."""
    gate, release = threading.Event(), threading.Event()
    handed: list[int] = []

    def provider_flush(deadline: float) -> bool:
        release.wait(30)
        return False

    def handle(item: int) -> None:
        gate.wait(30)  # held until the exit has counted
        handed.append(item)

    d: Dispatcher[int] = Dispatcher(handle, 100, atexit_timeout=EXIT_S, on_flush=provider_flush)
    try:
        for i in range(5):
            assert d.submit(i)
        original = d._unhandled_all
        calls: list[int] = []

        def counted() -> int:
            n = original()
            calls.append(n)
            gate.set()  # the first count is taken: let the exporter take every report in
            return n

        d._unhandled_all = counted  # type: ignore[method-assign]
        with caplog.at_level(logging.WARNING, logger="otelstream"):
            d._at_exit()
        assert handed == list(range(5)) and calls[-1] == 0  # all taken in, none left in the queue
        assert _warnings(caplog) == [
            f"otelstream: 5 stream report(s) not exported at exit (the export did not finish within {EXIT_S:g} s)"
        ]
    finally:
        gate.set()
        release.set()
        d.shutdown(5.0)
