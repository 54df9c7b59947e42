"""Span attributes from a report, set without the SDK cleaning each value again.

``Span.set_attributes`` sends every value through the SDK's generic cleaning (type checks, sequences copied to tuples,
truncation) and ``BoundedAttributes``' per-key bookkeeping: about 80 bytecodes per attribute, the largest part of
what a span costs otelstream per stream. A report's attributes are already clean: strings, ints, floats, bools and
tuples of strings, a couple of dozen of them. With the SDK's own span, no length limit on values and room below the
count limit, ``set_attributes`` here adds them to the span's attribute dict under the span's and the dict's locks,
which is what the SDK would store.

Internals again, so it is used only after ``_self_check()`` has shown, on the installed SDK, that both ways give the
same attributes and dropped count; any other span, limit or layout goes through ``span.set_attributes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from otelstream import _guard
from otelstream.export.selfcheck import SelfCheck

try:
    from opentelemetry.attributes import BoundedAttributes as _BOUNDED
except ImportError:  # another API layout: set_attributes always
    _BOUNDED = None  # type: ignore[assignment,misc]


def set_attributes(span: Any, attributes: Mapping[str, AttributeValue]) -> None:
    """``span.set_attributes(attributes)``; the values must be what the SDK's cleaning keeps unchanged."""
    try:
        if usable() and _direct(span, attributes):
            return
    except Exception as exc:  # not the SDK the self-check saw: set_attributes from now on (it repairs this span)
        usable.disable()
        _guard.report("export.span_direct", exc)
    span.set_attributes(attributes)


def _direct(span: Any, attributes: Mapping[str, AttributeValue]) -> bool:
    bounded: Any = getattr(span, "_attributes", None)
    if _BOUNDED is None or type(bounded) is not _BOUNDED or bounded.max_value_len is not None or bounded._immutable:
        return False
    with span._lock:
        if span._end_time is not None:
            return False  # the SDK warns about setting attributes on an ended span: let it
        with bounded._lock:
            values = bounded._dict
            if bounded.maxlen is not None and len(values) + len(attributes) > bounded.maxlen:
                return False  # the SDK drops the oldest and counts them
            for key in attributes.keys() & values.keys():
                del values[key]  # as the SDK does: a key set again moves to the end
            values.update(attributes)
    return True


def _self_check() -> bool:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class FixedIds(IdGenerator):  # the application's random sequence is not ours to draw from
        def generate_span_id(self) -> int:
            return 0x2F

        def generate_trace_id(self) -> int:
            return 0x1F

    tracer = TracerProvider(id_generator=FixedIds()).get_tracer("otelstream.selfcheck")
    start: dict[str, AttributeValue] = {"a": "x", "n": 1}
    later: dict[str, AttributeValue] = {"n": 2, "f": 0.5, "b": True, "s": ("stop", "length"), "e": ""}
    got = []
    for fast in (False, True):
        span: Any = tracer.start_span("s", attributes=start)
        if fast:
            if not _direct(span, later):
                return False
        else:
            span.set_attributes(later)
        span.end()
        got.append((list(span.attributes.items()), span.dropped_attributes))
    return got[0] == got[1]


# whether the direct paths give what the API gives on the installed SDK (checked once per process)
usable = SelfCheck(_self_check)
