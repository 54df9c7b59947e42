"""otelstream: observability for streamed LLM responses.

    import otelstream.auto            # everything on, configured from OTELSTREAM_* / OTEL_* environment

    import otelstream
    otelstream.instrument()           # or with tracer_provider=, meter_provider=, registry=, **settings
    otelstream.flush(timeout=5.0)
    otelstream.start_metrics_server(port=9464)
    otelstream.uninstrument()

    with otelstream.attributes(**{"app.feature": "summarize", "tenant.id": "acme"}):
        stream = client.chat.completions.create(..., stream=True)   # carries them (spans; named metric labels)
    otelstream.report_of(stream)      # its StreamReport once it has ended, else None
    otelstream.instrument(on_report=callback)   # callback(report) once per finished stream
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public names resolve lazily so that ``import otelstream`` (and ``otelstream check``) stays free of the SDKs and
# exporters until instrumentation is asked for.
_LAZY = {
    "instrument": "otelstream.instrumentation",
    "uninstrument": "otelstream.instrumentation",
    "flush": "otelstream.instrumentation",
    "start_metrics_server": "otelstream.instrumentation",
    "OtelStreamInstrumentor": "otelstream.instrumentation",
    "report_of": "otelstream.instrumentation",
    "attributes": "otelstream.attribution",
    "StreamReport": "otelstream.core.report",
}

__all__ = [
    "OtelStreamInstrumentor", "StreamReport", "__version__", "attributes", "flush", "instrument", "report_of",
    "start_metrics_server", "uninstrument",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'otelstream' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolve once
    return value
