"""A check that runs once per process, the first time its answer is needed.

Each write into another library's private state in this package is used only after such a check has shown, on the
installed release, that it gives what the public API gives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class SelfCheck:
    """``check()``'s answer, computed on the first call (thread-safe); False when it raises. ``disable()`` makes the
    answer False for good: a direct path that failed later is not used again."""

    def __init__(self, check: Callable[[], bool]) -> None:
        self._check = check
        self._result: bool | None = None
        self._lock = threading.Lock()

    def __call__(self) -> bool:
        result = self._result
        if result is None:
            with self._lock:
                if self._result is None:
                    try:
                        self._result = bool(self._check())
                    except Exception:  # an SDK the check cannot even run on: the API, always
                        self._result = False
                result = self._result
        return result

    def disable(self) -> None:
        self._result = False
