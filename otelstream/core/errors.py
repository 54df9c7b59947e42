"""The error class of a stream ("Error classes"): which of ``names.ERROR_CLASSES`` a bad outcome is, from
the provider's code and type, the HTTP status, a status inside the error body, the exception and the outcome. Derived
once per stream, at its end. Pure module: exceptions are matched by the names of the classes in their MRO, so no SDK
or httpx import is needed.
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
        # matched case-insensitively (gRPC-style statuses are upper case, Bedrock's exception types camel case)
        _BY_CODE.setdefault(_code.lower(), _row)
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


# what an error body says about its class: its ``code``, its ``type`` and a ``status_code`` / ``status`` inside it
ErrorFields = tuple[str | None, str | None, int | None]
NO_ERROR_FIELDS: ErrorFields = (None, None, None)


def code_text(value: object) -> str | None:
    """A code as recorded: a non-empty string (cut to 64), or a numeric code as its digits."""
    if isinstance(value, str):
        return value[:64] if value else None
    if type(value) is int:  # a numeric code (OpenRouter's {"code": 400}), or an SDK that kept the int
        return str(value)
    return None


def status_in_body(value: object) -> int | None:
    """An HTTP status as an error body carries it: an int, or three digits."""
    if type(value) is int:
        return value if 100 <= value <= 599 else None
    if isinstance(value, str) and len(value) == 3 and value.isdigit():
        return int(value)
    return None


def _fields_of(obj: object) -> dict[str, object] | None:
    if type(obj) is dict:
        return obj
    d = getattr(obj, "__dict__", None)
    if type(d) is not dict:
        return None
    extra = getattr(obj, "__pydantic_extra__", None)  # fields an SDK model does not declare (status_code)
    return {**extra, **d} if type(extra) is dict and extra else d


def error_fields(err: object) -> ErrorFields:
    """The code, type and status of an error body (a decoded ``{"code", "type", "message", …}`` dict or an SDK
    model); a bare string is taken as the code. Runs once per in-band error, never per event."""
    if isinstance(err, str):
        return (err[:64] or None, None, None)
    f = _fields_of(err)
    if f is None:
        return NO_ERROR_FIELDS
    status = status_in_body(f.get("status_code"))
    if status is None:
        status = status_in_body(f.get("status"))
    return (code_text(f.get("code")), code_text(f.get("type")), status)


def _exception_fields(exc: BaseException) -> ErrorFields:
    """What an SDK exception carries of its error body: openai's ``code`` / ``type`` and ``body`` (the error object),
    anthropic's ``body`` (``{"type": "error", "error": {…}}``)."""
    d = getattr(exc, "__dict__", None)
    if type(d) is not dict:
        return NO_ERROR_FIELDS
    body = d.get("body")
    if type(body) is dict and type(body.get("error")) is dict:
        body = body["error"]
    code, typ, status = error_fields(body) if type(body) is dict else NO_ERROR_FIELDS
    return (code or code_text(d.get("code")), typ or code_text(d.get("type")), status)


def error_class(
    outcome: str,
    code: str | None,
    status: int | None,
    exc: BaseException | None,
    body: ErrorFields = NO_ERROR_FIELDS,
) -> str | None:
    """None for a good outcome. Else, from what the provider said (``code``: the error type as recorded;
    ``body``: the code, type and status of the error body the stream carried; the exception's own), the first of its
    code, then its type, that the table lists (an unlisted code does not hide a listed type), and the HTTP status: the
    more specific of the two rows wins. Without either, a status inside the error body (or a status-like numeric
    code, as OpenRouter sends in-band), then the exception, then the outcome."""
    if outcome not in _BAD:
        return None
    exc_fields = _exception_fields(exc) if exc is not None else NO_ERROR_FIELDS
    row = _NO_ROW
    body_status: int | None = None
    for key in (code, body[0], body[1], exc_fields[0], exc_fields[1]):
        if key is None:
            continue
        listed = _BY_CODE.get(key.lower())
        if listed is not None:
            row = listed
            break
        if body_status is None:
            body_status = status_in_body(key)
    if status is not None:
        row = min(row, _BY_STATUS.get(status, _NO_ROW))
    if row == _NO_ROW:
        if body_status is None:
            body_status = body[2] if body[2] is not None else exc_fields[2]
        if body_status is not None:
            row = _BY_STATUS.get(body_status, _NO_ROW)
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
