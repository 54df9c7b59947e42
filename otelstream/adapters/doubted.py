"""The measures the runtime self-check found wrong on this stack, per patch scope (``_patch.OPENAI`` & co.).

When a self-check cell differs, what that cell compares is no longer to be trusted for the streams of its SDK and
mode: from the next stream on they report those measures as unknown (``StreamReport.unobserved``), as for a missing
patch point. A verdict holds for the rest of the process (the libraries do not change under it), across
``uninstrument()`` / ``instrument()``.

Published from the self-check's thread: the map is replaced whole under a lock, then folded by the patcher into the
one per-scope set a stream reads once at its start; the per-stream cost stays one dict lookup per scope.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

_lock = threading.Lock()  # serialises writers; readers take the map as it is (replaced whole, never mutated)
_by_scope: dict[str, frozenset[str]] = {}


def by_scope() -> Mapping[str, frozenset[str]]:
    """Scope -> the measures the self-check doubts for its streams (empty when every cell held)."""
    return _by_scope


def doubt(found: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """Add ``found`` (scope -> measures) to the doubted measures; returns what is new, per scope. Later streams of
    those scopes report the measures unknown."""
    global _by_scope
    with _lock:
        merged = dict(_by_scope)
        added: dict[str, frozenset[str]] = {}
        for scope, measures in found.items():
            new = frozenset(measures) - merged.get(scope, frozenset())
            if new:
                added[scope] = new
                merged[scope] = merged.get(scope, frozenset()) | new
        if not added:
            return added
        _by_scope = merged
    _refresh()
    return added


def reset() -> None:
    """Forget every verdict (tests: as in a new process)."""
    global _by_scope
    with _lock:
        _by_scope = {}
    _refresh()


def _refresh() -> None:
    from otelstream.adapters._patch import PATCHER

    PATCHER.refresh_unobserved()
