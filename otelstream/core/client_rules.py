"""What a client does with each SSE event of a stream, written once: ``otelstream check`` reads a recording as the
SDKs read it, and the HTTP-level observer reads a live body that a client other than an SDK reads (litellm's own
providers, plain ``httpx``), by the same rules.

An event's data is decoded as the SDKs decode it (``decode``): ``[DONE]``, JSON, or undecodable. Then
(``ClientReader.event``):

- after the client stopped reading (OpenAI's clients break at ``[DONE]``; an SDK raised), the first data that
  decodes is flagged once (``event_after_terminal``) and nothing else is read, comments included;
- ``[DONE]`` is the sentinel: OpenAI's clients stop reading there, Anthropic's read on;
- on Messages, where the client reads the ``event:`` name: ``ping`` is a keepalive, an event without a name is
  skipped (``unknown_event``), an event without data is skipped unless it is an ``error``;
- undecodable data is an ``undecodable_event``. An SDK raises there (``JSONDecodeError``): the stream ends, as a
  transport error, or as an error when it was an ``error`` event. A client that is not an SDK may read on, so its
  reader does too: how that stream ends is what its client does next (a close, an exception), seen where it
  happens;
- anything else reaches the caller: the tracker's ``event``.

Comment lines are keepalives while the client reads. Pure module: no I/O.
"""

from __future__ import annotations

import json
from typing import Any, Final

from otelstream import names
from otelstream.core.tracker import StreamTracker
from otelstream.names import EndReason

DONE: Final = "[DONE]"  # the decoded value of a ``data: [DONE]`` payload (openai: ``data.startswith("[DONE]")``)
_DONE_BYTES: Final = b"[DONE]"


class Undecodable:
    """Data that is not an event: its reason (shared instances, never mutated)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


CUT: Final = Undecodable("event larger than the decoder's limit (cut)")
EMPTY: Final = Undecodable("event without data")
NOT_JSON: Final = Undecodable("data is not JSON")


def decode(data: str | bytes | None, cut: bool = False) -> Any:
    """One event's data as a client decodes it: ``DONE``, the JSON value, or an ``Undecodable``. ``None`` (or
    ``cut``) is an event cut at the decoder's limit: its data is not all there."""
    if data is None:
        return CUT
    if data[:6] == (_DONE_BYTES if type(data) is bytes else DONE):
        return DONE
    if cut:
        return CUT
    if not data:
        return EMPTY
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # (invalid UTF-8 in bytes is a ValueError too)
        return NOT_JSON


class ClientReader:
    """One stream's events as its client reads them, fed to its tracker.

    ``named``: the client reads the SSE ``event:`` name (an SSE body; not a recording of bare payloads), which
    matters on Messages only. ``sdk``: the client is an SDK, which raises on data it cannot decode (the stream ends
    there); any other client is assumed to read on. Subclasses may stamp what a delivery or an end needs
    (``deliver``, ``end``)."""

    __slots__ = ("flagged", "messages", "named", "sdk", "stopped", "tracker", "who")

    def __init__(self, tracker: StreamTracker, *, named: bool = True, sdk: bool = True) -> None:
        self.tracker = tracker
        self.messages = tracker.surface == names.MESSAGES
        self.named = named and self.messages
        self.sdk = sdk
        self.who = "the SDK" if sdk else "the client"
        self.stopped = False  # the client reads no more of the body
        self.flagged = False  # data after the stop was flagged (once)

    def comments(self, count: int = 1) -> None:
        """Comment lines (``: keepalive``), read while the client reads."""
        if not self.stopped:
            self.tracker.keepalive(count)

    def payload(self, name: str | None, data: str | bytes | None) -> Any:
        """One dispatched event, its data as the body holds it: decoded only where the rules read it (a ping and an
        unnamed event are decided by their name). Returns the decoded value, or None when not decoded."""
        if (self.named and not self.stopped and (name is None or name == "ping") and data is not None
                and data[:6] != (_DONE_BYTES if type(data) is bytes else DONE)):  # fmt: skip
            self.event(name, None)
            return None
        value = decode(data)
        self.event(name, value)
        return value

    def event(self, name: str | None, value: Any) -> None:
        """One dispatched event: its ``event:`` name and its decoded data (``decode``)."""
        t = self.tracker
        if self.stopped:
            if not self.flagged and type(value) is not Undecodable:
                self.flagged = True
                t.anomaly(names.ANOM_EVENT_AFTER_TERMINAL, f"data after the stream ended ({self.who} stops reading)")
            return
        if value is DONE:
            t.done_sentinel()
            if not self.messages:
                self.stopped = True  # openai: `break` at [DONE]; the rest of the body is never read
            return
        if self.named:
            # anthropic skips `ping`, unnamed events and (except `error`) events without data
            if name == "ping":
                t.keepalive()
                return
            if name is None:
                t.anomaly(names.ANOM_UNKNOWN_EVENT, f"event without an event: name ({self.who} skips it)")
                return
            if type(value) is Undecodable:
                if name == "error":
                    t.anomaly(names.ANOM_UNDECODABLE, f"error event: {value.reason}")
                    if self.sdk:
                        self._stop(EndReason.ERROR)
                    return
                if value is EMPTY:
                    return
        if type(value) is Undecodable:
            t.anomaly(names.ANOM_UNDECODABLE, value.reason + (f" (event {name!r})" if name else ""))
            if self.sdk:
                # the SDK's JSONDecodeError, a ValueError, reaches the caller and decides the error class
                self._stop(EndReason.TRANSPORT_ERROR, ValueError(value.reason))
            return
        self.deliver(value, name)

    def deliver(self, value: Any, name: str | None) -> None:
        """An event reaches the caller."""
        self.tracker.event(value, name)

    def end(self, how: EndReason, exc: BaseException | None = None) -> None:
        """The client stopped reading by raising (an SDK only)."""
        self.tracker.end(how, exc=exc)

    def _stop(self, how: EndReason, exc: BaseException | None = None) -> None:
        self.stopped = True
        self.end(how, exc)

    def finish(self, unterminated: bool) -> None:
        """The body ended; ``unterminated``: inside an event (no blank line after it), which clients drop."""
        if unterminated and not self.tracker.ended:
            drop = "the SDKs drop it" if self.sdk else "clients drop it"
            self.tracker.anomaly(
                names.ANOM_UNTERMINATED_EVENT, f"the body ended inside an event (no blank line): {drop}"
            )
