"""Applying and removing the wrapt patches: defensively, in any import order, idempotently, exactly undone.

Each ``Patch`` names a module and a dotted attribute path in it. Patches are applied from a wrapt post-import hook
on their module (registered once per process; it runs at once when the module is already imported), so
``instrument()`` may come before or after ``import openai``. A path that does not resolve in the installed SDK
version skips that one surface with a debug log; nothing here ever raises into the importing program.
``remove()`` unwraps exactly the wrappers it installed (by identity) and leaves the hooks registered but inert.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import wrapt

from otelstream import _guard

logger = logging.getLogger("otelstream")

Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


@dataclass(frozen=True)
class Patch:
    module: str
    path: str  # "Class.method"
    wrapper: Wrapper
    # called with the original attribute once it is wrapped: per-process work done at the import, not in a stream
    prepare: Callable[[Any], object] | None = None


class Patcher:
    def __init__(self) -> None:
        self._lock = threading.RLock()  # RLock: a hook may run synchronously inside install()
        self._patches: dict[str, list[Patch]] = {}
        self._applied: dict[tuple[str, str], Any] = {}  # (module, path) -> the wrapt wrapper (the unwrap handle)
        self._hooked: set[str] = set()
        self._active = False

    @property
    def active(self) -> bool:
        return self._active

    def applied(self) -> dict[tuple[str, str], Any]:
        with self._lock:
            return dict(self._applied)

    def install(self, patches: Iterable[Patch]) -> None:
        with self._lock:
            self._active = True
            for patch in patches:
                group = self._patches.setdefault(patch.module, [])
                if patch not in group:
                    group.append(patch)
            for module in list(self._patches):
                if module not in self._hooked:
                    self._hooked.add(module)
                    # runs now when the module is already imported, else right after its import
                    wrapt.register_post_import_hook(self._on_import, module)
                elif module in sys.modules:
                    self._apply(sys.modules[module])

    def _on_import(self, module: ModuleType) -> None:
        with _guard.guard("patch.on_import"), self._lock:
            if self._active:
                self._apply(module)

    def _apply(self, module: ModuleType) -> None:
        for patch in self._patches.get(module.__name__, ()):
            key = (patch.module, patch.path)
            if key in self._applied:
                continue
            try:
                original = wrapt.resolve_path(module, patch.path)[2]
            except (AttributeError, ImportError):
                logger.debug("otelstream: %s.%s not found in this SDK version; that surface is not observed", *key)
                continue
            self._applied[key] = wrapt.wrap_function_wrapper(module, patch.path, patch.wrapper)
            if patch.prepare is not None:
                with _guard.guard("patch.prepare"):
                    patch.prepare(original)

    def remove(self) -> None:
        with self._lock:
            self._active = False
            for (module_name, path), handle in list(self._applied.items()):
                module = sys.modules.get(module_name)
                if module is not None:
                    with _guard.guard("patch.remove"):
                        wrapt.unwrap_object(module, path, handle, missing_ok=True)
                del self._applied[(module_name, path)]


PATCHER = Patcher()
