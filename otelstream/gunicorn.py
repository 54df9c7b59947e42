"""Ready-made gunicorn server hooks: prometheus_client's standard multiprocess practice, for those who want it.

otelstream does not need them (its live gauges drop an exited worker within seconds on their own), but
``child_exit`` makes that immediate, and for the application's own ``livesum``/``liveall`` gauges too. In
``gunicorn.conf.py``::

    from otelstream.gunicorn import child_exit  # noqa: F401  (gunicorn looks the hook up by name)
"""

from __future__ import annotations

import contextlib
from typing import Any


def child_exit(server: Any, worker: Any) -> None:
    """gunicorn's ``child_exit`` hook: the exited worker's live gauges stop counting now."""
    from prometheus_client import multiprocess

    from otelstream.export.multiproc import directory

    with contextlib.suppress(Exception):  # a hook must never take the server down
        if directory() is not None:
            multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


__all__ = ["child_exit"]
