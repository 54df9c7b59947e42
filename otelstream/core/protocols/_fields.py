"""Cheap field access shared by the protocol modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from otelstream import names
from otelstream.core.errors import error_fields

if TYPE_CHECKING:
    from otelstream.core.side_objects import Tokens
    from otelstream.core.state import StreamState

# what an observer says an event was
OTHER = 0
DELTA = 1  # a delta of output the user waits for: text, refusal, tool arguments, audio, citations
KEEPALIVE = 2
REASONING = 3  # a delta of reasoning (thinking): a delta, but not yet the answer (TTFO)

EMPTY: dict[str, Any] = {}  # the fields of something that has none


def event_name(name: object) -> str | None:
    """The SSE ``event:`` name an observer was given: a string, or the SSE frame it came from (its ``event``, read
    only here: only untyped events and Chat's ping check need it), or None."""
    if name is None or type(name) is str:
        return name
    name = getattr(name, "event", None)
    return name if type(name) is str else None


def fields(obj: object) -> dict[str, Any]:
    """The field dict of a decoded JSON object or an SDK model (its ``__dict__``); empty for anything else."""
    if type(obj) is dict:
        return obj
    d = getattr(obj, "__dict__", None)
    return d if type(d) is dict else EMPTY


def extra(obj: object, key: str) -> Any:
    """A vendor field the SDK model does not declare (pydantic keeps those in ``__pydantic_extra__``)."""
    if type(obj) is dict:
        return obj.get(key)
    ex = getattr(obj, "__pydantic_extra__", None)
    return ex.get(key) if type(ex) is dict else None


def field_or_extra(obj: object, key: str) -> Any:
    """A field that newer SDK models declare and older ones keep as an extra."""
    value = fields(obj).get(key)
    return extra(obj, key) if value is None else value


def listed(tracker: StreamState, value: object, what: str) -> list[Any] | tuple[()]:
    """The items of a chunk's list field (Chat's ``choices``, Gemini's ``candidates``): the list itself; none, and a
    ``bad_field`` anomaly naming ``what``, when the field is not a list."""
    if type(value) is list:
        return value
    tracker.anomaly(names.ANOM_BAD_FIELD, what)
    return ()


def nonempty(value: object) -> bool:
    return isinstance(value, str) and value != ""


def inband_error(tracker: StreamState, err: object) -> None:
    """An ``{"error": …}`` object after HTTP 200 (any surface)."""
    tracker.error_seen(error_fields(err))
    tracker.outcome_seen(names.ERROR, terminal=True)


def name_response(tracker: StreamState, f: dict[str, Any]) -> None:
    """The response's id and model from ``f`` (a chunk, a message, a response object): the first non-empty values."""
    rid = f.get("id")
    if isinstance(rid, str) and rid and tracker.response_id is None:
        tracker.response_id = rid[:128]
    model = f.get("model")
    if isinstance(model, str) and model and tracker.response_model is None:
        tracker.response_model = model[:128]


def read_usage(
    tracker: StreamState, usage: object, counts: Callable[[StreamState, dict[str, Any], Tokens], None]
) -> None:
    """A usage object, read by ``counts`` (a surface's field names) into the stream's token counts; nothing when it
    has no fields. Every count goes through the state's check (``tracker.tokens``: a plain count as is, else an
    anomaly, or a float made int)."""
    u = fields(usage)
    if u:
        tracker.usage_seen = True
        counts(tracker, u, tracker.token_counts())


def input_with_cache(tracker: StreamState, n: Tokens) -> None:
    """The input count of a surface that reports cache reads and writes apart from the raw input: their sum, known
    only once the raw count is (the sum too must fit every exporter, int64)."""
    if n.usage_input_raw is not None:
        total = n.usage_input_raw + (n.usage_cache_read or 0) + (n.usage_cache_write or 0)
        n.usage_input = tracker.tokens(total, "input_tokens (with cache)")
