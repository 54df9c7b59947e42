"""Internal-error policy: otelstream's own bugs never reach the caller's stream, but never go unnoticed.

Every hook that runs inside an SDK call goes through ``guard()`` / ``guarded()``, or, where it runs on every stream, a
plain ``try`` / ``except Exception`` that hands the exception to ``report()`` (no call when nothing is raised: a
``with guard`` costs about 1 900 instructions a use). An exception raised by our code is logged once per call site
(rate-limited) and recorded. When ``OTELSTREAM_RAISE_INTERNAL_ERRORS=1`` (the test suite
sets it) it is re-raised instead, so tests see it and it gets fixed.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import ParamSpec, TypeVar

logger = logging.getLogger("otelstream")

P = ParamSpec("P")
R = TypeVar("R")

_STRICT_ENV = "OTELSTREAM_RAISE_INTERNAL_ERRORS"
_LOG_EVERY_S = 60.0
_last_logged: dict[str, float] = {}
_lock = threading.RLock()  # re-entrant: a collection inside it may end a dropped stream, whose end may report
# Recent internal errors (bounded): tests assert this stays empty, operators can inspect it.
errors: list[tuple[str, BaseException]] = []
_MAX_KEPT = 100


def strict() -> bool:
    return os.environ.get(_STRICT_ENV, "") == "1"


def report(where: str, exc: BaseException) -> None:
    """Record and (rate-limited) log an internal error; re-raise it in strict mode."""
    with _lock:
        if len(errors) < _MAX_KEPT:
            errors.append((where, exc))
        now = time.monotonic()
        due = now - _last_logged.get(where, -_LOG_EVERY_S) >= _LOG_EVERY_S
        if due:
            _last_logged[where] = now
    if due:
        logger.warning(
            "otelstream internal error in %s (telemetry for this stream may be partial)", where, exc_info=exc
        )
    if strict():
        raise exc


class guard:
    """``with guard(where):`` records and swallows an ``Exception`` raised in the block (re-raised in strict mode).

    For the sites that do not run on every stream (those that do use ``try`` / ``report``: see above). A class rather
    than ``@contextmanager``: a generator-based context manager costs about five times the bytecodes of two
    slot-class method calls (≈1 900 instructions a use, ≈3 500 with the guard made at the use)."""

    __slots__ = ("where",)

    def __init__(self, where: str) -> None:
        self.where = where

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False  # nothing raised, or KeyboardInterrupt/GeneratorExit & co: not ours to swallow
        report(self.where, exc)
        return True


def guarded(where: str, default: R) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator form of ``guard``: returns ``default`` when the wrapped hook fails."""

    def deco(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                report(where, exc)
                return default

        return wrapper

    return deco
