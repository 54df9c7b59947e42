"""Which per-event path runs: the compiled accelerator (``otelstream._speedups``, built at install when the machine
can build it) or the pure-Python reference. Chosen once, at import: ``OTELSTREAM_PURE_PYTHON=1`` forces the pure path
(``config.py``'s table); a module that is missing or fails to load leaves it pure too, with one DEBUG line.
``describe()`` is the line ``otelstream doctor`` prints."""

from __future__ import annotations

import logging
import os
from types import ModuleType

from otelstream import config

logger = logging.getLogger("otelstream")


def _load() -> tuple[ModuleType | None, str]:
    if config.load().pure_python:
        return None, f"pure Python ({config.env_name('pure_python')} is set)"
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
