"""Label values that are not a closed enum: bounded per registry and per meter provider, so a server, a caller or a
typo loop can never explode the series count.

Every metric carries ``gen_ai_request_model``, ``server_address`` and ``gen_ai_response_model``, and one label per
application attribute named in ``metric_attributes``. Their values come from the caller's code (models, base URLs,
attributes) or from the server (the response model), so each label has its own table: the first ``cap`` distinct
values keep their name; later ones become ``_OTHER``; an allow-list pins the models that matter outside the cap;
every value is cleaned (``core.sanitize``: valid UTF-8, no control characters) and truncated to ``max_length``: one
unencodable label would make every later scrape of the registry fail. A registry and a meter provider each keep
their tables for good (instrument() again reuses them), so the caps hold across cycles.

The label tuple of a stream, resolved once at the send on the caller's thread (lock-free once a value is known):
``(*COMMON_LABELS values, *attribute label values, surface)``, the response model empty until the report comes
(``finished``, on the export thread).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from otelstream import names
from otelstream.core.report import AttributeValue, StreamStart
from otelstream.core.sanitize import clean_text

RESPONSE_MODEL_INDEX = names.COMMON_LABELS.index(names.LABEL_RESPONSE_MODEL)


class CappedValues:
    """Maps one label's raw values to label values. Lookups are lock-free; only admitting a new value locks."""

    def __init__(self, cap: int = 20, allowlist: Iterable[str] = (), max_length: int = 64, missing: str = "") -> None:
        self._known: dict[str, str] = {}
        self._admitted = 0
        self._lock = threading.Lock()
        self.missing = missing  # the value when there is none
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

    def value(self, raw: str | None) -> str:
        if not raw:
            return self.missing
        label = self._known.get(raw)
        if label is not None:
            return label
        with self._lock:
            label = self._known.get(raw)
            if label is not None:
                return label
            if self._admitted >= self._cap:
                # Not remembered: remembering every rejected value would itself be unbounded memory.
                return names.MODEL_OTHER
            self._admitted += 1
            label = clean_text(raw, self._max_length)
            self._known[raw] = label
            return label


_MAX_STARTS = 256
_REQUEST_MODEL_INDEX, _SERVER_ADDRESS_INDEX = 2, 3  # in at_start's tuple


def _settled(table: CappedValues, raw: str | None, label: str) -> bool:
    """Whether ``label`` is what ``table`` gives ``raw`` for good: none given, or an admitted value's label."""
    return not raw or table._known.get(raw) == label


def attribute_text(value: AttributeValue) -> str:
    """An application attribute's value as a label value (the same text on both metric paths)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


class LabelTables:
    """One registry's or one meter provider's capped tables: request model, response model, server address, and one
    per application attribute key."""

    def __init__(self, cap: int = 20, allowlist: Iterable[str] = (), max_length: int = 64) -> None:
        self.request_model = CappedValues(cap, allowlist, max_length, missing=names.MODEL_UNKNOWN)
        self.response_model = CappedValues(cap, allowlist, max_length)
        self.server_address = CappedValues(cap, (), max_length)
        self._attributes: dict[str, CappedValues] = {}
        self._lock = threading.Lock()
        # at_start's label tuples of streams without application attributes, by what they are made of: the same
        # few per process, resolved on the caller's thread for every stream otherwise
        self._starts: dict[tuple[str, str, str | None, str | None, int | None], tuple[str, ...]] = {}
        self._settings = (cap, tuple(allowlist), max_length)

    def configure(self, cap: int, allowlist: Iterable[str], max_length: int) -> None:
        allow = tuple(allowlist)
        with self._lock:
            self._settings = (cap, allow, max_length)
            tables = list(self._attributes.values())
        self.request_model.configure(cap, allow, max_length)
        self.response_model.configure(cap, allow, max_length)
        self.server_address.configure(cap, (), max_length)
        for table in tables:
            table.configure(cap, (), max_length)

    def attribute(self, key: str) -> CappedValues:
        table = self._attributes.get(key)
        if table is None:
            with self._lock:
                table = self._attributes.get(key)
                if table is None:
                    cap, _, max_length = self._settings
                    table = self._attributes[key] = CappedValues(cap, (), max_length)
        return table

    def at_start(self, start: StreamStart, attribute_keys: Sequence[str]) -> tuple[str, ...]:
        """The stream's label tuple (``surface`` last, the response model still empty)."""
        if not attribute_keys:
            key = (start.provider, start.surface, start.request_model, start.server_address, start.server_port)
            found = self._starts.get(key)
            if found is not None:
                return found
            labels = self._resolve(start, ())
            # kept only when both values are admitted ones: their labels never change (a value over the cap reads
            # as _OTHER now, and may be admitted after a configure() that raises the cap)
            if (
                len(self._starts) < _MAX_STARTS
                and _settled(self.request_model, start.request_model, labels[_REQUEST_MODEL_INDEX])
                and _settled(self.server_address, start.server_address, labels[_SERVER_ADDRESS_INDEX])
            ):
                self._starts[key] = labels
            return labels
        return self._resolve(start, attribute_keys)

    def _resolve(self, start: StreamStart, attribute_keys: Sequence[str]) -> tuple[str, ...]:
        attrs = start.attributes
        values = [
            start.provider,
            start.operation,
            self.request_model.value(start.request_model),
            self.server_address.value(start.server_address),
            "" if start.server_port is None else str(start.server_port),
            "",
        ]
        for key in attribute_keys:
            raw = attrs.get(key)
            values.append("" if raw is None else self.attribute(key).value(attribute_text(raw)))
        values.append(start.surface)
        return tuple(values)

    def response_model_value(self, model: str | None) -> str:
        return self.response_model.value(model)


class JointTables:
    """The tables of a registry and a meter provider that were first used apart (different pipelines brought them):
    a stream's labels go to both, so a value keeps its name only where every table admits it; each store's cap holds.
    """

    def __init__(self, tables: Iterable[LabelTables]) -> None:
        self.tables = tuple(tables)

    def at_start(self, start: StreamStart, attribute_keys: Sequence[str]) -> tuple[str, ...]:
        first, *rest = (t.at_start(start, attribute_keys) for t in self.tables)
        if all(r == first for r in rest):
            return first
        return tuple(v if all(r[i] == v for r in rest) else names.MODEL_OTHER for i, v in enumerate(first))

    def response_model_value(self, model: str | None) -> str:
        first, *rest = (t.response_model_value(model) for t in self.tables)
        return first if all(v == first for v in rest) else names.MODEL_OTHER


def finished(labels: tuple[str, ...], response_model: str) -> tuple[str, ...]:
    """The common label values of a finished stream: its label tuple without ``surface``, the response model in."""
    common = labels[:-1]
    if not response_model:
        return common
    return (*common[:RESPONSE_MODEL_INDEX], response_model, *common[RESPONSE_MODEL_INDEX + 1:])
