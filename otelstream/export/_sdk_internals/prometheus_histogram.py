"""Observations written straight into a prometheus_client histogram child's bucket and sum values.

``Histogram.observe`` scans the bounds linearly and validates the exemplar on every call, and there is no weighted
observe: time per output chunk arrives as per-bucket counts, which through the public API would be one
``observe()`` per chunk. ``parts()`` hands out a child's bounds, bucket values and sum value; ``observe`` and
``add_buckets`` write into them what ``observe()`` would have written.

Used only after ``_self_check()`` has shown, on the installed prometheus_client, that the exposition is the same
either way (on and around every bound, with and without exemplars, weighted and one by one); otherwise, or for a
child whose internals are not what this writes into, ``parts()`` is None and every observation takes the public API.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

from prometheus_client import Histogram
from prometheus_client.samples import Exemplar

from otelstream.export._sdk_internals.check_once import SelfCheck

Parts = tuple[list[float], list[Any], Any]  # upper bounds (+Inf last), bucket values, sum value
Merge = Iterable[tuple[int, int, float, float]]  # (bucket index, count, exact sum, mean) per non-empty bucket


class NoCreated:
    """Mixin: no ``_created`` sample (the OTel Prometheus exporter makes none, and the documented series are the same
    either way). Per family: prometheus_client's own switch is process-wide and would change the application's
    metrics too. Should a release stop calling ``_child_samples`` the sample reappears, nothing breaks."""

    def _child_samples(self) -> tuple[Any, ...]:
        return tuple(s for s in super()._child_samples() if s.name != "_created")  # type: ignore[misc]


def parts(child: Any) -> Parts | None:
    """A labelled Histogram's bounds and values, or None when the public API has to be used for it."""
    if not usable():
        return None
    return _parts(child)


def _parts(child: Any) -> Parts | None:
    bounds = getattr(child, "_upper_bounds", None)
    buckets = getattr(child, "_buckets", None)
    total = getattr(child, "_sum", None)
    if not isinstance(child, Histogram) or not isinstance(bounds, list) or not isinstance(buckets, list):
        return None
    if len(bounds) != len(buckets) or not bounds or bounds[-1] != math.inf or not hasattr(total, "inc"):
        return None
    return bounds, buckets, total


def observe(child: Any, parts: Parts | None, value: float, exemplar: dict[str, str] | None, now: float) -> None:
    """``child.observe(value, exemplar)`` with the same result; ``exemplar`` must be valid (otelstream's own fixed
    shape: it is not validated again)."""
    if parts is None or value != value:  # (NaN: prometheus_client decides, as for any caller)
        child.observe(value, exemplar)
        return
    bounds, buckets, total = parts
    i = bisect_left(bounds, value)  # the first bound >= value: ``le`` is inclusive
    total.inc(value)
    buckets[i].inc(1)
    if exemplar is not None:
        buckets[i].set_exemplar(Exemplar(exemplar, value, now))


def add_buckets(child: Any, parts: Parts | None, merge: Merge, exemplar: dict[str, str] | None, now: float) -> None:
    """Each bucket's ``count`` observations at once (sum exact); ``parts`` None: each mean ``count`` times through
    ``observe()``. The exemplar goes on the last bucket given (the slowest gaps are the ones worth a trace link)."""
    merge = list(merge)
    if not merge:
        return
    if parts is None:
        for _, count, _, mean in merge:
            for _ in range(count):
                child.observe(mean)
        return
    _, buckets, total = parts
    for i, count, _, _ in merge:
        buckets[i].inc(count)
    total.inc(sum(s for _, _, s, _ in merge))
    if exemplar is not None:
        i, _, _, mean = merge[-1]
        buckets[i].set_exemplar(Exemplar(exemplar, mean, now))


def _self_check() -> bool:
    """The same values (on, below and above every bound, one by one and weighted, with an exemplar) through both
    ways into two registries: the collected samples must be equal."""
    from prometheus_client import CollectorRegistry

    bounds = (0.001, 0.1, 1.0)
    values = [0.0, *bounds, *(math.nextafter(b, 0.0) for b in bounds), *(math.nextafter(b, math.inf) for b in bounds)]
    exemplar = {"trace_id": "1" * 32, "span_id": "2" * 16}
    merge = [(0, 3, 0.0015, 0.0005), (3, 2, 5.0, 2.5)]
    got = []
    for direct in (False, True):
        registry = CollectorRegistry()
        child = Histogram("h", "h", ["k"], registry=registry, buckets=bounds).labels("v")
        found = _parts(child) if direct else None
        if direct and found is None:
            return False
        for v in values:
            observe(child, found, v, exemplar, 1.0)
        add_buckets(child, found, merge, None, 1.0)  # (the public way has no exemplar for these: see observe)
        samples = []
        for metric in registry.collect():
            for s in metric.samples:
                if s.name.endswith("_created"):
                    continue
                ex = None if s.exemplar is None else (dict(s.exemplar.labels), s.exemplar.value)
                samples.append((s.name, dict(s.labels), round(s.value, 12), ex))
        got.append(sorted(samples, key=repr))
    # (values rounded: a weighted sum adds the exact total where one by one adds the means)
    return got[0] == got[1] and len(got[0]) == len(bounds) + 1 + 2


# whether the direct writes give what observe() gives on the installed prometheus_client (checked once per process)
usable = SelfCheck(_self_check)
