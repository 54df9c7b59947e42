"""Model label values: bounded per registry and per meter provider, so a server (or a typo loop) can never explode
the series count.

Every metric carries ``gen_ai_request_model``. Its value comes from the request (the caller's code), not from the
server, but callers can still pass unbounded strings (fine-tune ids, deployment names with dates). The first
``cap`` distinct values keep their name; later ones become ``_OTHER``; an allow-list pins the models that matter
outside the cap; every value is cleaned (``core.sanitize``: valid UTF-8, no control characters) and truncated to
``max_length``: one unencodable label would make every later scrape of the registry fail. A registry and a meter
provider each keep one table for good (instrument() again reuses it), so the cap holds across cycles.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from otelstream import names
from otelstream.core.sanitize import clean_text


class ModelLabels:
    """Maps a request model to its label value. Lookups are lock-free; only admitting a new value locks."""

    def __init__(self, cap: int = 20, allowlist: Iterable[str] = (), max_length: int = 64) -> None:
        self._known: dict[str, str] = {}
        self._admitted = 0
        self._lock = threading.Lock()
        self.configure(cap, allowlist, max_length)

    def configure(self, cap: int, allowlist: Iterable[str], max_length: int) -> None:
        """Apply (new) settings: values already admitted keep their label, so existing series stay as they are."""
        with self._lock:
            self._cap = max(0, cap)
            self._max_length = max(1, max_length)
            # Allow-listed names are admitted up front so they never consume the cap.
            for m in allowlist:
                if m and m not in self._known:
                    self._known[m] = clean_text(m, self._max_length)

    def value(self, model: str | None) -> str:
        if not model:
            return names.MODEL_UNKNOWN
        label = self._known.get(model)
        if label is not None:
            return label
        with self._lock:
            label = self._known.get(model)
            if label is not None:
                return label
            if self._admitted >= self._cap:
                # Not remembered: remembering every rejected name would itself be unbounded memory.
                return names.MODEL_OTHER
            self._admitted += 1
            label = clean_text(model, self._max_length)
            self._known[model] = label
            return label


class JointLabels:
    """The tables of a registry and a meter provider that were first used apart (different pipelines brought them):
    a stream's labels go to both, so a model keeps its name only where every table admits it; each store's cap holds.
    """

    def __init__(self, tables: Iterable[ModelLabels]) -> None:
        self.tables = tuple(tables)

    def value(self, model: str | None) -> str:
        first, *rest = (t.value(model) for t in self.tables)
        return first if all(v == first for v in rest) else names.MODEL_OTHER
