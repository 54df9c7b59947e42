"""Which per-event path runs: the compiled accelerator (``otelstream._speedups``, built at install when the machine
can build it) or the pure-Python reference. Chosen once, at import: ``OTELSTREAM_PURE_PYTHON=1`` forces the pure path
(``config.py``'s table); a module that is missing or fails to load leaves it pure too, with one DEBUG line.
``describe()`` is the line ``otelstream doctor`` prints."""

from __future__ import annotations

import logging
import os
from types import ModuleType

logger = logging.getLogger("otelstream")

PURE_ENV = "OTELSTREAM_PURE_PYTHON"


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get(PURE_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return None, f"pure Python ({PURE_ENV}=1)"
    try:
        from otelstream import _speedups  # type: ignore[attr-defined]
    except ImportError as exc:  # not built at install (no compiler), or built for another interpreter
        logger.debug("otelstream: compiled accelerator not loaded (%s); pure Python", exc)
        return None, "pure Python (compiled accelerator: not built)"
    return _speedups, f"compiled accelerator ({os.path.basename(getattr(_speedups, '__file__', '') or '?')})"


native, _why = _load()


def describe() -> str:
    """Which path runs, and why."""
    return _why
