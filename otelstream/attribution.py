"""Application attributes: which feature, tenant or user a stream belongs to.

``otelstream.attributes(**attrs)`` sets them for the streams started inside its ``with`` block; they live in a
context variable, so they nest (inner keys win) and follow threads started with a copied context and asyncio tasks
exactly as contextvars do. ``baggage_attributes`` names OTel baggage entries copied the same way (an explicit
``attributes()`` value wins over baggage with the same key). A stream captures them once, when its request is sent.

Validation happens when a ``with`` block is entered, once, not per stream: keys are non-empty printable strings
outside otelstream's own namespaces, values str / int / float / bool (bool stays bool), strings cleaned and cut to
``names.MAX_TEXT_LENGTH``. An invalid entry is dropped with one warning per key: attribution must never break the
caller's request.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Iterable, Mapping
from types import TracebackType

from otelstream.core.report import NO_ATTRIBUTES, Attributes, AttributeValue
from otelstream.core.sanitize import clean_text

logger = logging.getLogger("otelstream")

MAX_KEY_LENGTH = 128
# keys otelstream sets itself: an application attribute must not overwrite them on the span
RESERVED_PREFIXES = ("otelstream.", "gen_ai.", "server.", "error.", "openai.")

_CURRENT: contextvars.ContextVar[Attributes] = contextvars.ContextVar("otelstream_attributes", default=NO_ATTRIBUTES)
_warned: set[str] = set()


def _warn_once(key: str, why: str) -> None:
    if key not in _warned and len(_warned) < 1000:
        _warned.add(key)
        logger.warning("otelstream: ignoring application attribute %r (%s)", key, why)


def valid_key(key: object) -> str | None:
    """Why ``key`` cannot be an application attribute key, or None when it can."""
    if not isinstance(key, str) or not key:
        return "the key must be a non-empty string"
    if len(key) > MAX_KEY_LENGTH or not key.isprintable():
        return f"the key must be printable and at most {MAX_KEY_LENGTH} characters"
    if key.startswith(RESERVED_PREFIXES):
        return "otelstream sets keys in that namespace itself"
    return None


def clean_value(value: object) -> AttributeValue | None:
    """The value as it goes on spans, or None when it is not a str / int / float / bool (or not finite)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, int):
        # beyond int64 no exporter can encode it
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def validated(attrs: Mapping[str, object]) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    for key, value in attrs.items():
        why = valid_key(key)
        if why is not None:
            _warn_once(str(key)[:MAX_KEY_LENGTH], why)
            continue
        clean = clean_value(value)
        if clean is None:
            _warn_once(key, f"a value of type {type(value).__name__}: str, int, float or bool only")
            continue
        out[key] = clean
    return out


def attributes(attrs: Mapping[str, object] | None = None, /, **more: object) -> AttributesBlock:
    """``with otelstream.attributes(**{"app.feature": "summarize", "tenant.id": "acme"}):`` — every stream started
    inside the block carries these attributes (on its span; as metric labels for the keys named in
    ``metric_attributes``). A mapping may be passed positionally; keyword arguments win over it."""
    merged: dict[str, object] = dict(attrs or {})
    merged.update(more)
    return AttributesBlock(validated(merged))


class AttributesBlock:
    """The context manager ``attributes()`` returns; entering it returns the attributes now current."""

    __slots__ = ("_attrs", "_tokens")

    def __init__(self, attrs: Attributes) -> None:
        self._attrs = attrs
        self._tokens: list[contextvars.Token[Attributes]] = []  # the same block may be entered again inside itself

    def __enter__(self) -> Attributes:
        outer = _CURRENT.get()
        current = {**outer, **self._attrs} if outer else self._attrs
        self._tokens.append(_CURRENT.set(current))
        return current

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._tokens:
            _CURRENT.reset(self._tokens.pop())


def current() -> Attributes:
    """The attributes set by the enclosing ``attributes()`` blocks of this thread / task."""
    return _CURRENT.get()


def capture(baggage_keys: Iterable[str] = ()) -> Attributes:
    """What a stream starting now carries: the baggage entries named in ``baggage_keys``, then ``attributes()``
    on top. Once per stream, on the caller's thread (the context that is current at the send)."""
    attrs = _CURRENT.get()
    if not baggage_keys:
        return attrs
    from opentelemetry import baggage  # only when baggage keys are configured

    found: dict[str, AttributeValue] = {}
    for key in baggage_keys:
        if key in attrs:
            continue
        value = baggage.get_baggage(key)
        if value is not None:
            clean = clean_value(value)
            if clean is not None:
                found[key] = clean
    if not found:
        return attrs
    found.update(attrs)
    return found


def valid_keys(keys: Iterable[str], setting: str) -> tuple[str, ...]:
    """The usable keys of a ``baggage_attributes`` / ``metric_attributes`` setting (the others warned about)."""
    out: list[str] = []
    for key in keys:
        why = valid_key(key)
        if why is not None:
            logger.warning("otelstream: %s: ignoring %r (%s)", setting, key, why)
        elif key not in out:
            out.append(key)
    return tuple(out)


__all__ = ["AttributesBlock", "attributes", "capture", "current"]
