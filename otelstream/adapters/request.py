"""The request side of a call: the wrappers of an SDK's request entry (the call begins there, and ends as
``http_error`` when no stream comes of it), the stamp at the client's send, the call named on the request, and what
the request options and the answer's headers say."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from otelstream import _guard, names
from otelstream.adapters._patch import Wrapper
from otelstream.adapters.calls import CURRENT, KEY, RUNTIME, Call, finish
from otelstream.adapters.exceptions import error_type_of, is_cancel
from otelstream.core.report import RateLimit

Begin = Callable[[Any, "tuple[Any, ...]", "dict[str, Any]", "tuple[str, ...]"], "Call | None"]
After = Callable[["Call", Any], None]


def request_wrappers(begin: Begin, after: After, where: str, scopes: tuple[str, str]) -> tuple[Wrapper, Wrapper]:
    """The sync and async wrappers of an SDK's request entry: begin the call (span at the send), keep it in
    ``CURRENT`` while the SDK sends (a non-stream request made inside ours, a token refresh say, is not one of our
    attempts), report ``http_error`` when no stream comes of it, and hand the result to ``after``. ``scopes``: the
    sync and the async streams' patch scopes (``begin_call``)."""
    sync_scopes, async_scopes = (scopes[0],), (scopes[1],)

    def sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = None
        try:
            call = begin(instance, args, kwargs, sync_scopes)
        except Exception as exc:
            _guard.report(where, exc)
        token = CURRENT.set(call)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            if call is not None:
                try:
                    fail_unbound(call, exc)
                except Exception as err:
                    _guard.report(where, err)
            raise
        finally:
            CURRENT.reset(token)
        if call is not None:
            after(call, result)
        return result

    async def async_(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = None
        try:
            call = begin(instance, args, kwargs, async_scopes)
        except Exception as exc:
            _guard.report(where, exc)
        token = CURRENT.set(call)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            if call is not None:
                try:
                    fail_unbound(call, exc)
                except Exception as err:
                    _guard.report(where, err)
            raise
        finally:
            CURRENT.reset(token)
        if call is not None:
            after(call, result)
        return result

    return sync, async_


def fail_unbound(call: Call, exc: BaseException) -> None:
    """The request raised before any stream existed (non-2xx, connection failure before headers): http_error."""
    if call.bound:
        return
    error_type = error_type_of(exc)
    if error_type is None:
        status = getattr(exc, "status_code", None)
        if isinstance(status, int):
            error_type = str(status)
    if is_cancel(exc):
        finish(call, "cancel")
    else:
        # a non-2xx answer still names the request (APIStatusError.response): keep the id for the support ticket
        response = getattr(exc, "response", None)
        if response is not None and call.tracker.request_id is None:
            call.tracker.request_id = header(response, names.REQUEST_ID_HEADERS)
        finish(call, "http_error", error_type, exc)


def http_send(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``httpx2.Client.send`` / ``AsyncClient.send``: while an SDK send path of one of our calls runs (``sending``),
    the request leaves here, after the SDK prepared it (anthropic signs or refreshes a token in ``_prepare_request``,
    inside ``_attempt_request``): ``t_request`` is this moment, the last such send winning. For the async client the
    coroutine is created here, right where the SDK awaits it. Clients of any other kind keep the SDK hook's time.
    The answer's rate-limit headroom is read here too (``ratelimits_of``), 2xx or not: a 429 carries it as well."""
    call = CURRENT.get()
    if call is None or not call.sending or call.bound:
        return wrapped(*args, **kwargs)
    try:
        tracker = call.tracker
        tracker.t_request = tracker.t_last_ns = RUNTIME.clock()
    except Exception as exc:
        _guard.report("adapters.http_send", exc)
    result = wrapped(*args, **kwargs)
    if inspect.iscoroutine(result):
        return _headroom_when_sent(result, call)
    _keep_headroom(call, result)
    return result


async def _headroom_when_sent(sending: Any, call: Call) -> Any:
    response = await sending
    _keep_headroom(call, response)
    return response


def _keep_headroom(call: Call, response: Any) -> None:
    """Each attempt's answer replaces the last one's numbers (a 429 that the SDK retried is not the headroom now)."""
    try:
        call.tracker.ratelimits = ratelimits_of(response)
    except Exception as exc:
        _guard.report("adapters.ratelimits", exc)


# names.RATELIMIT_HEADERS by the lower-cased bytes an httpx/httpx2 ``Headers.raw`` holds
_RATELIMIT_RAW: dict[bytes, tuple[str, bool]] = {k.encode("ascii"): v for k, v in names.RATELIMIT_HEADERS.items()}


def ratelimits_of(response: Any) -> tuple[RateLimit, ...]:
    """The rate-limit numbers of an answer's headers (``names.RATELIMIT_HEADERS``), one ``RateLimit`` per kind sent.
    Only those headers are looked at, and only a plain non-negative number is kept (a header is server data)."""
    try:
        headers = response.headers
        if getattr(headers, "encoding", None) == "ascii":
            raw = headers.raw
            if type(raw) is list:
                return _limits(_sent_raw(raw))
        items = headers.items()
    except Exception:
        return ()
    sent = []
    for key, value in items:
        spec = names.RATELIMIT_HEADERS.get(key.lower() if isinstance(key, str) else key)
        if spec is not None:
            sent.append((spec, value))
    return _limits(sent)


def _sent_raw(raw: list[tuple[bytes, bytes]]) -> list[tuple[tuple[str, bool], str]]:
    """The rate-limit headers among the raw byte pairs of all-ASCII headers (then bytes and text lower-case alike),
    without ``items()`` decoding and merging every header of the answer: once per attempt, on the caller's thread.
    Only the few names looked for are decoded. A name sent twice reads as ``items()`` joins it ("a, b"): not a
    number, so it is left out."""
    hits: dict[bytes, bytes | None] = {}
    for key, value in raw:
        key = key.lower()
        if key in _RATELIMIT_RAW:
            hits[key] = None if key in hits else value
    return [(_RATELIMIT_RAW[name], value.decode("ascii")) for name, value in hits.items() if value is not None]


def _limits(sent: Iterable[tuple[tuple[str, bool], object]]) -> tuple[RateLimit, ...]:
    """One ``RateLimit`` per kind from (its ``names.RATELIMIT_HEADERS`` spec, the header's value) pairs."""
    found: dict[str, list[float | None]] = {}
    for (kind, remaining), value in sent:
        number = _number(value)
        if number is not None:
            pair = found.setdefault(kind, [None, None])
            pair[0 if remaining else 1] = number  # (remaining, limit)
    return tuple(RateLimit(kind, pair[0], pair[1]) for kind, pair in found.items())


def _number(value: object) -> float | None:
    if not isinstance(value, str) or len(value) > 24:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


class ParamKeys(NamedTuple):
    """Where a request names the parameters a span records."""

    max_tokens: tuple[str, ...]  # the first of these that holds an int
    temperature: str
    top_p: str
    choice_count: str | None  # None: the API asks for one choice only


# the openai and anthropic SDKs' bodies: ``max_output_tokens`` on Responses, ``max_completion_tokens`` or
# ``max_tokens`` on chat, ``max_tokens`` on completions and Anthropic Messages
SDK_PARAMS = ParamKeys(("max_output_tokens", "max_completion_tokens", "max_tokens"), "temperature", "top_p", "n")


def request_params(body: object, keys: ParamKeys = SDK_PARAMS) -> dict[str, Any]:
    """The request parameters a span records, as the call passed them in ``body`` (named as ``keys`` says):
    StreamStart keyword arguments. Once per stream."""
    if not isinstance(body, dict):
        return {}
    out: dict[str, Any] = {}
    for key in keys.max_tokens:
        value = body.get(key)
        if type(value) is int:
            out["request_max_tokens"] = value
            break
    for key, field in ((keys.temperature, "request_temperature"), (keys.top_p, "request_top_p")):
        number = body.get(key)
        if (type(number) is float or type(number) is int) and math.isfinite(number):
            out[field] = float(number)
    if keys.choice_count is not None:
        n = body.get(keys.choice_count)
        if type(n) is int:
            out["request_choice_count"] = n
    return out


def tracker_hints(surface: str, body: dict[str, Any]) -> dict[str, Any]:
    """What a Chat or Completions request body tells the stream's tracker beforehand (its keyword arguments): the
    choices asked for (``n``), and whether usage was (``stream_options.include_usage``). Nothing elsewhere."""
    hints: dict[str, Any] = {}
    if surface in (names.CHAT_COMPLETIONS, names.COMPLETIONS):
        n = body.get("n")
        if type(n) is int and n > 0:
            hints["expected_choices"] = n
        options = body.get("stream_options")
        hints["usage_requested"] = bool(isinstance(options, dict) and options.get("include_usage"))
    return hints


def server_of_url(url: object) -> tuple[str | None, int | None]:
    """server.address / server.port from an endpoint URL given as a string (the scheme's port when it names none)."""
    if not isinstance(url, str) or not url:
        return None, None
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80 if parts.scheme == "http" else None)
        return parts.hostname, port
    except ValueError:
        return None, None


def server_of(base_url: Any) -> tuple[str | None, int | None]:
    """server.address / server.port from the client's base URL (an httpx2.URL)."""
    try:
        host = base_url.host or None
        port = base_url.port
        if port is None:
            port = 443 if base_url.scheme == "https" else 80 if base_url.scheme == "http" else None
        return host, port
    except Exception:
        return None, None


# immutable (copy_with makes a new one); both libraries name the package as the class's module
_URL_TYPES = frozenset({("httpx2", "URL"), ("httpx", "URL"), ("httpx2._urls", "URL"), ("httpx._urls", "URL")})
_last_base: tuple[object, tuple[str | None, int | None]] = (None, (None, None))


def server_of_client(base_url: Any) -> tuple[str | None, int | None]:
    """``server_of`` for a client's base URL, which is the same object stream after stream: the last answer is kept
    for it (an httpx/httpx2 URL is immutable; a client given another base URL holds another object)."""
    global _last_base
    last = _last_base
    if last[0] is base_url and base_url is not None:
        return last[1]
    found = server_of(base_url)
    t = type(base_url)
    if (t.__module__, t.__name__) in _URL_TYPES:
        _last_base = (base_url, found)  # one tuple swapped in whole: safe across threads
    return found


def path_of(url: object) -> str:
    """The path of an SDK options URL ('/chat/completions', '/v1/messages?beta=true', or an absolute URL)."""
    if not isinstance(url, str):
        return ""
    path = url.split("?", 1)[0]
    if "://" in path:
        path = "/" + path.split("://", 1)[1].partition("/")[2]
    return path.rstrip("/")


def request_of(response: Any) -> Any:
    try:
        return response.request
    except Exception:  # httpx2 raises RuntimeError when a response has no request
        return None


def name_on_request(call: Call, response: Any) -> None:
    """Name the call on the request a raw response answers (``with_raw_response``), so that the Stream its
    ``.parse()`` builds later finds this call; the send hooks do this too, but one of them may be missing."""
    ext = getattr(request_of(response), "extensions", None)
    if type(ext) is dict and KEY not in ext:
        ext[KEY] = call


def call_of_response(response: Any) -> Call | None:
    request = request_of(response)
    ext = getattr(request, "extensions", None)
    if type(ext) is dict:
        call = ext.get(KEY)
        return call if isinstance(call, Call) else None
    return None


def header(response: Any, keys: tuple[str, ...]) -> str | None:
    try:
        headers = response.headers
        for name in keys:
            value = headers.get(name)
            if value:
                return str(value)[:128]
    except Exception:
        return None
    return None
