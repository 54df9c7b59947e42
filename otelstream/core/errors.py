"""The error class of a stream (DESIGN §2, "Error classes"): which of ``names.ERROR_CLASSES`` a bad outcome is, from
the provider's code, the HTTP status, the exception and the outcome. Derived once per stream, at its end. Pure
module: exceptions are matched by the names of the classes in their MRO, so no SDK or httpx import is needed.
"""

from __future__ import annotations

from otelstream import names

# the one table (names.ERROR_CLASS_TABLE), indexed: the first row naming a code / status / exception wins; codes and
# statuses map to their row's index (the lower of the two wins), exceptions to their class
_BY_CODE: dict[str, int] = {}
_BY_STATUS: dict[int, int] = {}
_BY_EXCEPTION: dict[str, str] = {}
_CLASS_OF_ROW: tuple[str, ...] = tuple(row[0] for row in names.ERROR_CLASS_TABLE)
for _row, (_cls, _statuses, _codes, _excs) in enumerate(names.ERROR_CLASS_TABLE):
    for _code in _codes:
        _BY_CODE.setdefault(_code, _row)
    for _status in _statuses:
        _BY_STATUS.setdefault(_status, _row)
    for _exc in _excs:
        _BY_EXCEPTION.setdefault(_exc, _cls)
_NO_ROW = len(_CLASS_OF_ROW)

_BAD = frozenset(names.BAD_OUTCOMES)


def exception_class(exc: BaseException | None) -> str | None:
    """The class the most specific type in the exception's MRO maps to (None: not in the table)."""
    if exc is None:
        return None
    for t in type(exc).__mro__:
        found = _BY_EXCEPTION.get(t.__name__)
        if found is not None:
            return found
    return None


def status_of(exc: BaseException | None) -> int | None:
    """The HTTP status an SDK exception carries (``APIStatusError.status_code``), if any."""
    status = getattr(exc, "status_code", None) if exc is not None else None
    return status if type(status) is int else None


def error_class(outcome: str, code: str | None, status: int | None, exc: BaseException | None) -> str | None:
    """DESIGN §2: None for a good outcome; else the more specific of what the provider's code and the HTTP status
    (or a status-like numeric code sent in-band, as OpenRouter does) say, then the exception, then the outcome."""
    if outcome not in _BAD:
        return None
    row = _NO_ROW
    if code is not None:
        row = _BY_CODE.get(code.lower(), _NO_ROW)
        if status is None and len(code) == 3 and code.isdigit():
            status = int(code)
    if status is not None:
        row = min(row, _BY_STATUS.get(status, _NO_ROW))
    if row < _NO_ROW:
        return _CLASS_OF_ROW[row]
    found = exception_class(exc)
    if found is not None:
        return found
    if outcome == names.CUT:
        return names.EC_CUT
    if outcome == names.TRANSPORT_ERROR:
        # the client side broke without an exception we can name (a WebSocket closed abnormally, say)
        return names.EC_CONNECTION
    return names.EC_OTHER
