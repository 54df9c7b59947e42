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
from otelstream.core.bedrock_reading import BedrockBodyReader, surface_of
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


def analyse_eventstream(path: str, surface: str = AUTO) -> FileReport:
    """Analyse one Bedrock event-stream body; raises CheckError with a one-line reason when it cannot."""
    if surface not in _SURFACES:
        raise CheckError(f"an event-stream body is a {names.CONVERSE} or {names.MESSAGES} stream, not {surface}")
    chosen: str | None = None if surface == AUTO else surface
    run: Run | None = None
    reader: BedrockBodyReader | None = None
    seen = 0
    for chunk in _chunks(path):
        if seen == 0 and not looks_like_eventstream(chunk[:12]):
            raise CheckError("not an AWS event-stream body (no message prelude at its start)")
        seen += len(chunk)
        if reader is None:
            if chosen is None:
                first = _first_message(chunk)
                chosen = surface_of(first) if first is not None else names.CONVERSE
            run = Run.open(chosen, sse_framed=False, provider=names.PROVIDER_BEDROCK)
            reader = BedrockBodyReader(run.reader)
        reader.feed(chunk)
    if reader is None or run is None:
        raise CheckError("empty file")
    reader.finish()
    return FileReport(path, run.surface, (run.finish(),))


def _first_message(chunk: bytes) -> EventMessage | None:
    """The body's first message, when the first read holds it whole (a first chunk far beyond a message's size
    does; a smaller one is read again by the reader)."""
    try:
        found = EventStreamDecoder().feed(chunk)
    except EventStreamDecodeError:
        return None
    return found[0] if found else None
