"""Analysing a Bedrock body as sent (``.eventstream``: binary event-stream messages, both CRCs checked): a
ConverseStream body is a ``converse`` stream; an invoke body whose chunks carry Anthropic Messages events is a
``messages`` stream (provider Bedrock); an invoke body of another model family is reported with its events and the
``unsupported_payload`` anomaly. Fed to the tracker as botocore reads the body: an exception message is raised (the
client reads no further), a message that fails its CRC or lengths ends the stream as a transport error (class
``protocol``)."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from otelstream import names
from otelstream.core import bedrock
from otelstream.core.client_rules import NOT_JSON
from otelstream.core.eventstream import EventMessage, EventStreamDecodeError, EventStreamDecoder, looks_like_eventstream
from otelstream.offline.detection import AUTO
from otelstream.offline.reading import READ_SIZE, CheckError
from otelstream.offline.rendering import FileReport
from otelstream.offline.replay import Run

EVENTSTREAM_SUFFIX: Final = ".eventstream"
_GZIP_MAGIC = b"\x1f\x8b"
_SURFACES: Final = (AUTO, names.CONVERSE, names.MESSAGES)


def is_eventstream(path: str) -> bool:
    """A ``.eventstream`` file, or any file whose first bytes are an event-stream prelude."""
    if path.lower().endswith(EVENTSTREAM_SUFFIX):
        return True
    try:
        with open(path, "rb") as f:
            return looks_like_eventstream(f.read(12))
    except OSError:
        return False


def _chunks(path: str) -> Iterator[bytes]:
    try:
        raw = Path(path).open("rb")  # noqa: SIM115 (closed by the with below: opening is what may fail)
    except FileNotFoundError:
        raise CheckError("no such file") from None
    except OSError as exc:
        raise CheckError(f"cannot read: {exc.strerror or exc}") from None
    with raw:
        source: Any = raw
        if raw.read(2) == _GZIP_MAGIC:
            source = gzip.GzipFile(fileobj=raw)
        raw.seek(0)
        try:
            while chunk := source.read(READ_SIZE):
                yield chunk
        except (OSError, EOFError, zlib.error):
            raise CheckError("corrupt gzip data") from None


class _Reader:
    """One body's messages, decoded as they come, fed to one run once its surface is known."""

    def __init__(self, path: str, surface: str) -> None:
        self.path = path
        self.chosen: str | None = None if surface == AUTO else surface
        self.run: Run | None = None
        self.raised = False  # an exception message reached the caller: botocore raised, nothing more is read

    def open(self, first: EventMessage | None) -> Run:
        if self.chosen is None:
            self.chosen = names.CONVERSE
            if first is not None and first.event_type == bedrock.INVOKE_CHUNK:
                try:
                    value = bedrock.invoke_event({bedrock.INVOKE_CHUNK: bedrock.payload_json(first)})
                except ValueError:
                    value = None
                if bedrock.is_messages_event(value):
                    self.chosen = names.MESSAGES
        self.run = Run.open(self.chosen, sse_framed=False, provider=names.PROVIDER_BEDROCK)
        return self.run

    def message(self, msg: EventMessage) -> None:
        run = self.run or self.open(msg)
        exception = msg.message_type in (bedrock.MESSAGE_EXCEPTION, bedrock.MESSAGE_ERROR)
        try:
            body = bedrock.payload_json(msg)
            if self.chosen == names.MESSAGES:
                if exception:
                    value: Any = bedrock.invoke_exception_event(bedrock.message_key(msg), body)
                else:
                    value = bedrock.invoke_event({bedrock.message_key(msg): body})
            else:
                value = bedrock.converse_event(msg)
        except ValueError:
            value = NOT_JSON
        run.reader.event(None, value)
        if exception and not run.reader.stopped:
            # botocore raises the exception from the iteration: the caller reads no further
            run.reader.stopped = True
            run.tracker.end("error")

    def broken(self, exc: EventStreamDecodeError) -> None:
        run = self.run or self.open(None)
        if not run.tracker.ended:
            run.tracker.anomaly(names.ANOM_UNDECODABLE, str(exc))
            run.tracker.end("transport_error", exc=exc)


def analyse_eventstream(path: str, surface: str = AUTO) -> FileReport:
    """Analyse one Bedrock event-stream body; raises CheckError with a one-line reason when it cannot."""
    if surface not in _SURFACES:
        raise CheckError(f"an event-stream body is a {names.CONVERSE} or {names.MESSAGES} stream, not {surface}")
    reader = _Reader(path, surface)
    dec = EventStreamDecoder()
    seen = 0
    try:
        for chunk in _chunks(path):
            if seen == 0 and not dec.messages and not dec.pending and not looks_like_eventstream(chunk[:12]):
                raise CheckError("not an AWS event-stream body (no message prelude at its start)")
            seen += len(chunk)
            for msg in dec.feed(chunk):
                reader.message(msg)
        dec.finish()
    except EventStreamDecodeError as exc:
        reader.broken(exc)
    if seen == 0:
        raise CheckError("empty file")
    run = reader.run or reader.open(None)
    return FileReport(path, run.surface, (run.finish(),))
