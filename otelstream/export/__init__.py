"""Export side: span, Prometheus and OTel-metric sinks behind one background dispatcher, plus the stall watchdog.

``build_pipeline(settings, tracer_provider=None, meter_provider=None, registry=None)`` returns the ``Pipeline``
that ``instrument()`` hands to the adapters as their ``StreamListener``.
"""

from __future__ import annotations

from otelstream.export.pipeline import Pipeline, build_pipeline
from otelstream.export.prometheus import start_metrics_server

__all__ = ["Pipeline", "build_pipeline", "start_metrics_server"]
