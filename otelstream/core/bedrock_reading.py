"""A Bedrock body's bytes read as its client reads them, written once: ``otelstream check`` reads a recorded
``.eventstream`` body with it, and the HTTP-level observer can read a live one (litellm's own Bedrock provider) by
the same rules.

Bytes go through the event-stream decoder (both CRCs checked); each message becomes the event its protocol module
reads (``core.bedrock``) and goes to a ``ClientReader`` (``core.client_rules``): a ConverseStream message as
botocore's ``{type: payload}`` dict, an invoke chunk of an Anthropic model as its Messages event (an exception as a
Messages ``error`` event), a payload that is not JSON as undecodable data. An SDK raises at an exception message, so
its client reads no further; a message that fails its CRC or lengths, or a body that ends inside one, ends the stream
as a transport error (class ``protocol``). Pure module: no I/O.
"""

from __future__ import annotations

from typing import Any

from otelstream import names
from otelstream.core import bedrock
from otelstream.core.client_rules import NOT_JSON, ClientReader
from otelstream.core.eventstream import MAX_MESSAGE, EventMessage, EventStreamDecodeError, EventStreamDecoder


def surface_of(first: EventMessage) -> str:
    """The surface a Bedrock body belongs to, from its first message: an invoke body whose chunk is an Anthropic
    Messages event is ``messages``; anything else (ConverseStream, another model family's invoke) ``converse``."""
    if first.event_type == bedrock.INVOKE_CHUNK:
        try:
            value = bedrock.invoke_event({bedrock.INVOKE_CHUNK: bedrock.payload_json(first)})
        except ValueError:
            return names.CONVERSE
        if bedrock.is_messages_event(value):
            return names.MESSAGES
    return names.CONVERSE


class BedrockBodyReader:
    """One Bedrock body fed to one client reader: ``feed`` bytes as they arrive, ``finish`` at the body's end."""

    __slots__ = ("client", "decoder", "messages")

    def __init__(self, client: ClientReader, *, max_message: int = MAX_MESSAGE) -> None:
        self.client = client
        self.messages = client.tracker.surface == names.MESSAGES  # an Anthropic model's invoke stream
        self.decoder = EventStreamDecoder(max_message)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        try:
            found = self.decoder.feed(data)
        except EventStreamDecodeError as exc:
            self.broken(exc)
            return
        for msg in found:
            self.message(msg)

    def finish(self) -> None:
        """The body ended: a body that ended inside a message (or after a bad one) is broken."""
        try:
            self.decoder.finish()
        except EventStreamDecodeError as exc:
            self.broken(exc)

    def message(self, msg: EventMessage) -> None:
        client = self.client
        exception = msg.message_type in (bedrock.MESSAGE_EXCEPTION, bedrock.MESSAGE_ERROR)
        value: Any
        try:
            body = bedrock.payload_json(msg)
            if not self.messages:
                value = bedrock.converse_event(msg)
            elif exception:
                value = bedrock.invoke_exception_event(bedrock.message_key(msg), body)
            else:
                value = bedrock.invoke_event({bedrock.message_key(msg): body})
        except ValueError:
            value = NOT_JSON
        client.event(None, value)
        if exception and client.sdk and not client.stopped:
            # botocore raises the exception from the iteration: the caller reads no further
            client.stopped = True
            client.end("error")

    def broken(self, exc: EventStreamDecodeError) -> None:
        t = self.client.tracker
        if not t.ended:
            t.anomaly(names.ANOM_UNDECODABLE, str(exc))
            self.client.stopped = True
            self.client.end("transport_error", exc)
