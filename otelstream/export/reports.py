"""``on_report``: the application's callback, once per finished stream, with the stream's ``StreamReport``.

The callback is the application's code: it may raise, or block (a database write, a queue that is full). So it runs
on a thread of its own, fed by a bounded queue from the export thread after the sinks have recorded the report:
a callback that blocks delays only later callbacks, never a span, a metric or the caller's stream; when its queue
is full, reports are dropped for the callback only (counted in ``dropped``, one warning a minute). An exception it
raises is logged (one warning a minute, with the count) and the next report is delivered as usual.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from otelstream.core.report import StreamReport
from otelstream.export.dispatcher import Dispatcher

logger = logging.getLogger("otelstream")

_WARN_EVERY_S = 60.0
# how long shutdown and interpreter exit wait for callbacks still queued: a blocked callback must not hold either
_DRAIN_S = 1.0


class ReportCallback:
    def __init__(self, callback: Callable[[StreamReport], object], maxsize: int) -> None:
        self.callback = callback
        self.dropped = 0  # reports the callback never saw (its queue was full)
        self.failed = 0  # calls that raised
        self._last_drop_warning = -_WARN_EVERY_S
        self._last_fail_warning = -_WARN_EVERY_S
        self._worker = Dispatcher(self._call, maxsize, name="otelstream-on-report", atexit_timeout=_DRAIN_S)

    def submit(self, report: StreamReport) -> None:
        """On the export thread: never blocks."""
        if self._worker.submit(report):
            return
        self.dropped += 1
        now = time.monotonic()
        if now - self._last_drop_warning >= _WARN_EVERY_S:
            self._last_drop_warning = now
            logger.warning(
                "otelstream: on_report callback is not keeping up: %d report(s) not delivered to it so far "
                "(telemetry is unaffected)",
                self.dropped,
            )

    def flush(self, timeout: float) -> bool:
        """Wait until every report submitted so far was handed to the callback (and it returned)."""
        return self._worker.flush(timeout)

    def shutdown_until(self, deadline: float) -> None:
        """Stop after the callbacks already queued, waiting at most until ``deadline`` (and never above 1 s)."""
        self._worker.shutdown_until(min(deadline, time.monotonic() + _DRAIN_S))

    def _call(self, report: Any) -> None:
        try:
            self.callback(report)
        except Exception as exc:  # the application's error: logged, never ours to raise (nor to count as ours)
            self.failed += 1
            now = time.monotonic()
            if now - self._last_fail_warning >= _WARN_EVERY_S:
                self._last_fail_warning = now
                logger.warning(
                    "otelstream: on_report callback raised %r (%d time(s) so far); telemetry is unaffected",
                    exc,
                    self.failed,
                )
