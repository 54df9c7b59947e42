"""``otelstream_self_check_failures``: how many checks of the runtime self-check (``doctor/runtime_check.py``)
differed from what otelstream must report, in this process; 0 when all held, absent until the check ran.

One value per process (the check runs once per process), shown on every registry and meter provider a pipeline
records into: a Prometheus gauge created when the value is first known (``livemax`` in multiprocess mode: the worst
live worker), and an OTel observable gauge whose callback reports nothing until then.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterable
from typing import Any, Final

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from prometheus_client import CollectorRegistry, Gauge

from otelstream import __version__, names

_DOC: Final = "Runtime self-check cells (and patch points) that differed from what otelstream must report; 0: all held"

_lock = threading.Lock()
_value: int | None = None
_registries: weakref.WeakSet[CollectorRegistry] = weakref.WeakSet()
_gauges: weakref.WeakKeyDictionary[CollectorRegistry, Gauge] = weakref.WeakKeyDictionary()
_instruments: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # meter provider -> its gauge
_global_instrument: list[Any] = []  # the one on the global meter provider (None is not a weak key)


def value() -> int | None:
    return _value


def attach(registry: CollectorRegistry | None, meter_provider: MeterProvider | None, otel: bool) -> None:
    """A pipeline records into ``registry`` (None: no native Prometheus) and, when ``otel``, into ``meter_provider``
    (None: the global one): the gauge is shown there too."""
    with _lock:
        if registry is not None:
            _registries.add(registry)
            if _value is not None:
                _set(registry, _value)
        if otel:
            _observe_on(meter_provider)


def publish(failures: int) -> None:
    """The self-check's result: from now on the gauge reads ``failures`` everywhere."""
    global _value
    with _lock:
        _value = failures
        for registry in list(_registries):
            _set(registry, failures)


def reset() -> None:
    """Back to "the check has not run" (tests): the Prometheus gauges are removed, the OTel ones report nothing."""
    global _value
    with _lock:
        _value = None
        for registry, gauge in list(_gauges.items()):
            with contextlib.suppress(KeyError):
                registry.unregister(gauge)
        _gauges.clear()


def _set(registry: CollectorRegistry, failures: int) -> None:
    gauge = _gauges.get(registry)
    if gauge is None:
        try:
            gauge = Gauge(names.PROM_SELF_CHECK_FAILURES, _DOC, registry=registry, multiprocess_mode="livemax")
        except ValueError:  # the name is taken on that registry (an OTel reader exporting into it shows ours)
            return
        _gauges[registry] = gauge
    gauge.set(failures)


def _observe(options: CallbackOptions) -> Iterable[Observation]:
    failures = _value
    return [] if failures is None else [Observation(failures)]


def _observe_on(meter_provider: MeterProvider | None) -> None:
    if meter_provider is None:
        if _global_instrument:
            return
    elif meter_provider in _instruments:
        return
    meter = metrics.get_meter(names.TRACER_NAME, __version__, meter_provider=meter_provider)
    instrument = meter.create_observable_gauge(
        names.OTEL_SELF_CHECK_FAILURES, callbacks=[_observe], unit="{check}", description=_DOC
    )
    if meter_provider is None:
        _global_instrument.append(instrument)
    else:
        _instruments[meter_provider] = instrument
