"""``otelstream check``: analyse recorded stream bodies without any network.

Inputs, by file name:

- ``*.sse``, or any other name: the raw SSE body as the server sent it (LF / CR / CRLF, comments, ``event:`` /
  ``data:`` / ``id:`` / ``retry:``, multi-line data; a gzip-compressed file is decompressed first);
- ``*.eventstream``, or any file that starts with an event-stream prelude: a Bedrock body as sent (binary
  event-stream messages, both CRCs checked: a bad one, or a body that ends inside a message, is a transport error of
  class ``protocol``). A ConverseStream body is ``converse``; an invoke body whose chunks are Anthropic Messages events
  is ``messages`` (provider ``aws.bedrock``); another model family's invoke body is reported with its events and the
  ``unsupported_payload`` anomaly. An exception message ends the stream as the SDK raises it;
- ``*.payloads.jsonl``: one SSE ``data`` payload (JSON) per line, without SSE framing (some recorders keep only
  that); analysed like an SSE body whose events have no ``event:`` name;
- ``*.jsonl``: a Responses WebSocket transcript, one server event (JSON) per line, reported per response: lanes by
  ``stream_id`` (null for the default lane), a new response at each ``response.created``, in the order of their
  first events. Memory stays bounded whatever the transcript holds: ``lanes`` lists the first 1 000 responses
  (``finish_reasons`` and ``anomalies`` come from those) while every count covers all of them (``responses``, the
  sums, ``responses_dropped`` for the unlisted); at most 1 024 lanes are followed at once, and a new one beyond that
  ends the longest-idle lane: a response still open there is reported ``cut`` and counted in ``lanes_evicted``.

``--surface auto`` tells the surface from the events' shapes (``type`` / ``event:`` names, ``object``,
``choices[].delta`` or ``.text``, Gemini's ``candidates`` / ``usageMetadata`` / ``modelVersion``; an SSE body of
Gemini chunks, with CRLF line ends as sent, is ``generate_content``); Anthropic's legacy ``/v1/complete`` is
recognised and refused as an unsupported surface.

The events go through the same ``StreamTracker`` the live path uses, fed as the SDKs would feed it: comments count
as keepalives, ``[DONE]`` ends an OpenAI stream (the SDK stops reading there), a payload that is not JSON ends it as
``transport_error`` (the SDK raises there), an Anthropic event without an ``event:`` name is skipped (the SDK skips
it), a block not followed by a blank line is dropped with the ``unterminated_event`` anomaly.

**Times are synthetic.** A recording carries no timing, so the tracker runs on a clock that advances one tick
(1 ms) per read: every wait is one tick and the time fields of an offline report only order things; they measure
nothing. ``check`` therefore prints no times, and ``--json`` has no time keys.

Errors are reported as one line per file on stderr (``otelstream check: FILE: reason``), never as a traceback.
Text output shows every non-printable character as an escape (``\\udce9``, ``\\x0a``, ``\\u202e``; a file name's
undecodable bytes as ``\\xe9``): a lone surrogate from a JSON escape or a non-UTF-8 file name cannot be written to a
strict UTF-8 stdout, and controls or bidi overrides from a recording must not reach the terminal.
"""

from __future__ import annotations

from otelstream.offline.analysis import analyse
from otelstream.offline.command import EXIT_BAD_INPUT, EXIT_OK, EXIT_STRICT, SURFACE_CHOICES, add_arguments, main, run
from otelstream.offline.detection import AUTO, DETECT_LIMIT, UNSUPPORTED_COMPLETE, detect
from otelstream.offline.reading import READ_SIZE, CheckError
from otelstream.offline.rendering import FileReport, shown, shown_path
from otelstream.offline.replay import TICK_NS
from otelstream.offline.transcript import MAX_OPEN_LANES, MAX_REPORTED_LANE_RESPONSES

__all__ = [
    "AUTO",
    "DETECT_LIMIT",
    "EXIT_BAD_INPUT",
    "EXIT_OK",
    "EXIT_STRICT",
    "MAX_OPEN_LANES",
    "MAX_REPORTED_LANE_RESPONSES",
    "READ_SIZE",
    "SURFACE_CHOICES",
    "TICK_NS",
    "UNSUPPORTED_COMPLETE",
    "CheckError",
    "FileReport",
    "add_arguments",
    "analyse",
    "detect",
    "main",
    "run",
    "shown",
    "shown_path",
]
