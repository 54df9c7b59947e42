"""Which metric readers a MeterProvider has: the SDK has no public way to ask.

Read only, never written: the pipeline asks whether an OTel ``PrometheusMetricReader`` already exports into the
registry the native Prometheus sink would write to (then the two would collide on the same family names). On a
provider or release without these names the answer is "no collision seen", and the registry's own duplicate check
still stands.
"""

from __future__ import annotations

from typing import Any


def reader_exports_into(provider: Any, registry: Any) -> bool:
    """Does ``provider`` have an OTel PrometheusMetricReader writing into ``registry``?"""
    # where the readers live moved between SDK releases: the provider itself, then its config
    readers = getattr(provider, "_metric_readers", None)
    if readers is None:
        readers = getattr(getattr(provider, "_sdk_config", None), "metric_readers", ())
    for reader in readers or ():
        # by name (the exporter is optional), subclasses included: opentelemetry-instrument's auto-configured
        # reader is one
        is_prometheus = any(k.__name__ == "PrometheusMetricReader" for k in type(reader).__mro__)
        if is_prometheus and getattr(reader, "_registry", None) is registry:
            return True
    return False
