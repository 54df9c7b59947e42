"""Text that reaches telemetry: valid UTF-8, bounded, free of control and format characters.

Models, ids, finish reasons, error codes and request ids come from the caller or the server. One lone surrogate
(``"gpt-4o\\udce9"``, e.g. read from a surrogate-escaped environment variable or file name) cannot be encoded as
UTF-8: as a Prometheus label it makes every later ``generate_latest()`` raise, and on a span it makes the OTLP
encoder drop the whole batch. Newlines, NUL and bidi overrides in a span name or a label mislead whoever reads them.

So every string bound for a label, a span name, an attribute or a span event passes through ``clean_text`` once per
stream (at the send, or on the export thread), never per event. Pure module.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from otelstream import names


def clean_text(value: str, limit: int = names.MAX_TEXT_LENGTH) -> str:
    """``value`` cut to ``limit`` characters, each non-printable one replaced by U+FFFD.

    Non-printable is ``str.isprintable``'s meaning: control (NUL, newlines, DEL, C1), format (bidi overrides,
    zero-width), surrogate, private-use and unassigned code points, and separators other than the ASCII space. The
    result always encodes as UTF-8, and cleaning it again returns it unchanged.
    """
    if len(value) > limit:
        value = value[:limit]
    if value.isprintable():  # the common case: one C-level scan, no copy
        return value
    return "".join(ch if ch.isprintable() else names.TEXT_REPLACEMENT for ch in value)


def is_clean(value: str, limit: int = names.MAX_TEXT_LENGTH) -> bool:
    return len(value) <= limit and value.isprintable()


# what needs no cleaning: most of a report's attributes are numbers
_PLAIN = frozenset({int, float, bool})
_SEQUENCES = (tuple, list)


def clean_attributes(attributes: MutableMapping[str, Any], limit: int = names.MAX_TEXT_LENGTH) -> None:
    """Clean, in place, every string value and every string in a tuple or list value of a span attribute dict."""
    dirty: list[tuple[str, Any]] = []
    for key, value in attributes.items():
        # inlined is_clean: this runs for every attribute of every span (about 30 per stream)
        if type(value) in _PLAIN:
            continue
        if isinstance(value, str):
            if len(value) > limit or not value.isprintable():
                dirty.append((key, clean_text(value, limit)))
        elif isinstance(value, _SEQUENCES) and not all(is_clean(v, limit) for v in value if isinstance(v, str)):
            dirty.append((key, tuple(clean_text(v, limit) if isinstance(v, str) else v for v in value)))
    for key, value in dirty:  # after the walk: a dict must not change while it is iterated
        attributes[key] = value
