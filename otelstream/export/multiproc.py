"""Multiprocess mode that cannot go stale: live gauges of processes that are gone stop counting.

prometheus_client keeps each process's ``livesum`` gauges in ``gauge_livesum_<pid>.db`` and sums every such file
it finds; it removes one only when the application calls ``mark_process_dead(pid)`` (a gunicorn ``child_exit``
hook). Without that hook a worker killed with streams open counted in ``otelstream_streams_active`` / ``_stalled``
for good, and a restart on the same directory brought the old values back. Here, with no hook:

- ``sweep()`` removes the live-gauge files of every process that no longer exists (exactly what
  ``mark_process_dead`` does for each; counters and histograms, the record of finished streams, stay). It runs when
  otelstream starts in a process (a new run marks the previous run's files stale), before every scrape of
  otelstream's ``/metrics``, and every few seconds on each process's watchdog, so an application serving its own
  ``/metrics`` is covered too. A zombie (killed, not yet reaped by its parent) counts as gone.
- ``stale_own_gauges()`` finds otelstream's gauge values in this process's own file that this process did not
  write: a previous process with the same pid left them (containers restart with the same pids); the caller sets
  them to 0.

The directory must belong to one host (one pid namespace), as prometheus_client already requires.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterable
from typing import Any

logger = logging.getLogger("otelstream")

SWEEP_EVERY_S = 5.0  # a dead worker is gone from the gauges within this (plus a scrape interval) of its death
_LIVE_FILE = re.compile(r"^gauge_live[a-z]*_(\d+)\.db$")

_lock = threading.Lock()
_last_sweep = -SWEEP_EVERY_S


def directory() -> str | None:
    """The directory prometheus_client writes into (its own variable names, the legacy lower-case one too)."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir")  # noqa: SIM112
    return path if path and os.path.isdir(path) else None


def process_exists(pid: int) -> bool:
    """Running (or stopped): True. Gone, or a zombie waiting for its parent to reap it: False."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, under another user
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (not Linux): os.kill's answer stands
        return True
    # "pid (comm) state ...": comm may hold spaces and parentheses; the state follows the last ")"
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


def sweep(path: str | None = None, *, force: bool = True) -> list[int]:
    """Remove the live-gauge files of processes that no longer exist; the pids removed. ``force=False``: at most
    once per ``SWEEP_EVERY_S`` in this process (the watchdog's tick)."""
    global _last_sweep
    path = path or directory()
    if path is None:
        return []
    now = time.monotonic()
    with _lock:
        if not force and now - _last_sweep < SWEEP_EVERY_S:
            return []
        _last_sweep = now
    own = os.getpid()
    gone: set[int] = set()
    try:
        entries = os.listdir(path)
    except OSError:
        return []
    for name in entries:
        m = _LIVE_FILE.match(name)
        if m is None:
            continue
        pid = int(m.group(1))
        if pid == own or (pid not in gone and process_exists(pid)):
            continue
        gone.add(pid)
        with contextlib.suppress(FileNotFoundError):  # another process's sweep may have been first
            os.remove(os.path.join(path, name))
    if gone:
        logger.debug("otelstream: removed the live gauges of exited processes %s", sorted(gone))
    return sorted(gone)


def stale_own_gauges(families: Iterable[str], path: str | None = None) -> list[tuple[str, dict[str, str]]]:
    """(family, labels) of every non-zero value of ``families`` in this process's ``livesum`` file."""
    path = path or directory()
    if path is None:
        return []
    own_file = os.path.join(path, f"gauge_livesum_{os.getpid()}.db")
    if not os.path.exists(own_file):
        return []
    from prometheus_client.multiprocess import MultiProcessCollector

    wanted = set(families)
    found: list[tuple[str, dict[str, str]]] = []
    metric: Any
    for metric in MultiProcessCollector.merge([own_file], accumulate=False):  # type: ignore[no-untyped-call]
        if metric.name not in wanted:
            continue
        for sample in metric.samples:
            if sample.value:
                found.append((metric.name, {k: v for k, v in sample.labels.items() if k != "pid"}))
    return found
