"""Every setting otelstream has, in one table. Precedence: explicit argument > environment > default.

| setting | environment variable | default | meaning |
|---|---|---|---|
| ``enabled`` | ``OTELSTREAM_ENABLED`` | ``true`` | kill switch: ``false`` makes ``instrument()`` a no-op |
| ``abandon_after_s`` | ``OTELSTREAM_ABANDON_AFTER_S`` | ``600`` | a stream with no pull for this long, body still open, is reported ``abandoned`` (``idle``) |
| ``stall_threshold_s`` | ``OTELSTREAM_STALL_THRESHOLD_S`` | ``30`` | a single wait inside the SDK longer than this is a stall |
| ``watchdog_interval_s`` | ``OTELSTREAM_WATCHDOG_INTERVAL_S`` | ``1`` | how often the watchdog refreshes the live gauges and checks idleness |
| ``queue_size`` | ``OTELSTREAM_QUEUE_SIZE`` | ``10000`` | finished reports waiting for export; beyond it they are dropped and counted |
| ``model_label_cap`` | ``OTELSTREAM_MODEL_LABEL_CAP`` | ``20`` | distinct values per registry and per meter provider (across ``instrument()`` cycles) of each open-ended label (request and response model, server address, each metric attribute), then ``_OTHER`` |
| ``model_allowlist`` | ``OTELSTREAM_MODEL_ALLOWLIST`` | (empty) | comma-separated models always kept as label values, outside the cap |
| ``model_label_max_length`` | ``OTELSTREAM_MODEL_LABEL_MAX_LENGTH`` | ``64`` | longer values of those labels are truncated |
| ``prometheus_port`` | ``OTELSTREAM_PROMETHEUS_PORT`` | (unset) | ``otelstream.auto`` serves ``/metrics`` on this port |
| ``prometheus_addr`` | ``OTELSTREAM_PROMETHEUS_ADDR`` | ``127.0.0.1`` | address the metrics server binds |
| ``prometheus_metrics`` | ``OTELSTREAM_PROMETHEUS_METRICS`` | ``true`` | record the native Prometheus series |
| ``otel_metrics`` | ``OTELSTREAM_OTEL_METRICS`` | ``false`` | also record OTel metrics (on whenever a ``meter_provider`` is passed) |
| ``http_spans`` | ``OTELSTREAM_HTTP_SPANS`` | ``true`` | ``otelstream.auto`` turns on ``HTTPX2ClientInstrumentor`` (and ``HTTPXClientInstrumentor`` when an installed SDK sends with ``httpx``: openai 2.x) |
| ``http_streams`` | ``OTELSTREAM_HTTP_STREAMS`` | ``true`` | observe LLM streams at the ``httpx`` / ``httpx2`` client that no SDK adapter sees (litellm's own providers, plain ``httpx``) |
| ``span_events`` | ``OTELSTREAM_SPAN_EVENTS`` | ``true`` | first-delta, anomaly and stall span events (at most 16 per span) |
| ``baggage_attributes`` | ``OTELSTREAM_BAGGAGE_ATTRIBUTES`` | (empty) | comma-separated OTel baggage keys copied onto each stream as application attributes |
| ``metric_attributes`` | ``OTELSTREAM_METRIC_ATTRIBUTES`` | (empty) | comma-separated application attribute keys that become metric labels (``.`` → ``_``), each capped like the model label |
| ``self_check`` | ``OTELSTREAM_SELF_CHECK`` | ``true`` | after ``instrument()``, run a small fault matrix once in the background through the SDKs the process imported (``otelstream doctor``'s; its streams reach no span or series); a mismatch logs one WARNING and sets ``otelstream_self_check_failures`` |
| ``slo_objective`` | ``OTELSTREAM_SLO_OBJECTIVE`` | ``0.99`` | the share of streams that must end well over 30 days: ``otelstream dashboards`` writes it into the error-budget rules (between 0 and 1) |
| ``semconv`` | ``OTEL_SEMCONV_STABILITY_OPT_IN`` | ``default`` | the GenAI semantic conventions of the ``gen_ai.client.*`` metrics and span attributes: ``default``, ``latest`` (the environment's list holds ``gen_ai_latest_experimental``: v0.1.0's names) or ``dup`` (``gen_ai_latest_experimental/dup``: both); read once by ``instrument()`` |
| ``pure_python`` | ``OTELSTREAM_PURE_PYTHON`` | ``false`` | (environment only, read once at import) run the pure-Python per-event path even where the optional compiled accelerator was built; ``otelstream doctor`` prints which path runs |
| ``on_report`` | (argument only) | (none) | ``callback(report)`` once per finished stream, on its own thread, with the ``otelstream.StreamReport`` |
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from otelstream import names

logger = logging.getLogger("otelstream")

ENV_PREFIX = "OTELSTREAM_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# (variable, value) pairs already warned about: the settings are loaded more than once per process (otelstream.auto,
# then instrument(); the instrumentor), and a wrong value is one mistake, worth one warning.
_warned: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Settings:
    enabled: bool = True
    abandon_after_s: float = 600.0
    stall_threshold_s: float = 30.0
    watchdog_interval_s: float = 1.0
    queue_size: int = 10_000
    model_label_cap: int = 20
    model_allowlist: tuple[str, ...] = ()
    model_label_max_length: int = 64
    prometheus_port: int | None = None
    prometheus_addr: str = "127.0.0.1"
    prometheus_metrics: bool = True
    otel_metrics: bool = False
    http_spans: bool = True
    http_streams: bool = True
    span_events: bool = True
    baggage_attributes: tuple[str, ...] = ()
    metric_attributes: tuple[str, ...] = ()
    slo_objective: float = 0.99
    self_check: bool = True
    semconv: str = names.SEMCONV_DEFAULT
    pure_python: bool = False
    on_report: Callable[[Any], object] | None = None


# settings that only an argument can give (a callable has no environment form)
_ARGUMENT_ONLY = frozenset({"on_report"})
# settings that only the environment can give: chosen at import, before any argument exists (otelstream/accelerator.py)
_ENVIRONMENT_ONLY = frozenset({"pure_python"})
# settings read from a standard OpenTelemetry variable rather than an OTELSTREAM_* one (the user sets it once for
# every instrumentation in the process)
_ENV_NAMES = {"semconv": names.SEMCONV_ENV}


def env_name(name: str) -> str:
    """The environment variable of a setting."""
    return _ENV_NAMES.get(name) or ENV_PREFIX + name.upper()


def semconv_from_opt_in(raw: str) -> str:
    """The ``semconv`` setting an ``OTEL_SEMCONV_STABILITY_OPT_IN`` value selects: a comma-separated list, in which
    ``gen_ai_latest_experimental/dup`` wins over ``gen_ai_latest_experimental`` (as OTel's own instrumentations read
    it); values for other signal types (``http``, ``database``…) are theirs, not ours."""
    values = {part.strip().lower() for part in raw.split(",")}
    if names.SEMCONV_OPT_IN_DUP in values:
        return names.SEMCONV_DUP
    if names.SEMCONV_OPT_IN_LATEST in values:
        return names.SEMCONV_LATEST
    return names.SEMCONV_DEFAULT


def _valid_seconds(name: str, value: float) -> bool:
    """Durations are finite and not negative (every one becomes integer nanoseconds or a timer); the watchdog's
    interval is also above zero (zero would be a busy loop). The SLO objective is a share strictly between 0 and 1
    (1 would leave no error budget to burn)."""
    if name == "slo_objective":
        return 0 < value < 1
    return math.isfinite(value) and (value > 0 if name == "watchdog_interval_s" else value >= 0)


def _parse(name: str, default: Any, raw: str) -> Any:
    """Convert an environment string to the type of ``default``; a bad value keeps the default (logged)."""
    raw = raw.strip()
    try:
        if isinstance(default, bool):
            low = raw.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError(raw)
        if isinstance(default, tuple):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        if isinstance(default, float):
            value = float(raw)
            if not _valid_seconds(name, value):
                raise ValueError(raw)
            return value
        if isinstance(default, int) or name == "prometheus_port":
            return int(raw)
        return raw
    except ValueError:
        key = (env_name(name), raw)
        if key not in _warned:
            _warned.add(key)
            logger.warning("otelstream: ignoring %s=%r (not a valid value)", key[0], raw)
        return default


def load(overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Build the settings: ``overrides`` (keyword arguments) > ``OTELSTREAM_*`` environment > defaults."""
    env = os.environ if environ is None else environ
    overrides = dict(overrides or {})
    known = {f.name: f for f in fields(Settings)}
    unknown = set(overrides) - set(known)
    if unknown:
        raise TypeError(f"unknown otelstream setting(s): {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    defaults = Settings()
    for name in known:
        default = getattr(defaults, name)
        if name in overrides and overrides[name] is not None:
            value = overrides[name]
            if name in _ENVIRONMENT_ONLY:
                raise TypeError(f"otelstream setting {name}: set {env_name(name)} in the environment (read at import)")
            if name in _ARGUMENT_ONLY:
                if not callable(value):
                    raise TypeError(f"otelstream setting {name}={value!r}: a callable is needed")
                values[name] = value
                continue
            if name == "semconv" and value not in names.SEMCONV_MODES:
                raise ValueError(f"otelstream setting semconv={value!r}: one of {', '.join(names.SEMCONV_MODES)}")
            if isinstance(default, tuple) and isinstance(value, str):
                value = _parse(name, default, value)
            elif isinstance(default, float) and (not isinstance(value, (int, float)) or not _valid_seconds(name, value)):
                need = "a share between 0 and 1" if name == "slo_objective" else "a finite number of seconds"
                raise ValueError(f"otelstream setting {name}={value!r}: {need} is needed")
            values[name] = tuple(value) if isinstance(default, tuple) else value
            continue
        if name in _ARGUMENT_ONLY:
            continue
        raw = env.get(env_name(name))
        if raw is not None and raw.strip() != "":
            values[name] = semconv_from_opt_in(raw) if name == "semconv" else _parse(name, default, raw)
    return Settings(**values)
