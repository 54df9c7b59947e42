"""Cheap field access shared by the protocol modules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otelstream.core.state import StreamState

OTHER = 0
DELTA = 1
KEEPALIVE = 2

EMPTY: dict[str, Any] = {}  # the fields of something that has none


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


def nonempty(value: object) -> bool:
    return isinstance(value, str) and value != ""


def error_code(err: object) -> str | None:
    """The provider's error code or type from an error object (``{"code", "type", "message"}``)."""
    f = fields(err)
    for key in ("code", "type"):
        value = f.get(key)
        if isinstance(value, str) and value:
            return value
        if type(value) is int:
            return str(value)
    return None


def inband_error(tracker: StreamState, err: object) -> None:
    """An ``{"error": …}`` object after HTTP 200 (any surface)."""
    from otelstream import names

    tracker.set_error_type(error_code(err) or (err if isinstance(err, str) else None))
    tracker.outcome_seen(names.ERROR, terminal=True)
