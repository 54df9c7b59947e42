"""``otelstream check``: analyse recorded stream bodies without any network (DESIGN §3).

Inputs, by file name:

- ``*.sse``, or any other name: the raw SSE body as the server sent it (LF / CR / CRLF, comments, ``event:`` /
  ``data:`` / ``id:`` / ``retry:``, multi-line data; a gzip-compressed file is decompressed first);
- ``*.payloads.jsonl``: one SSE ``data`` payload (JSON) per line, without SSE framing (some recorders keep only
  that); analysed like an SSE body whose events have no ``event:`` name;
- ``*.jsonl``: a Responses WebSocket transcript, one server event (JSON) per line, reported per response: lanes by
  ``stream_id`` (null for the default lane), a new response at each ``response.created``, in the order of their
  first events. Memory stays bounded whatever the transcript holds: ``lanes`` lists the first 1 000 responses
  (``finish_reasons`` and ``anomalies`` come from those) while every count covers all of them (``responses``, the
  sums, ``responses_dropped`` for the unlisted); at most 1 024 lanes are followed at once, and a new one beyond that
  ends the longest-idle lane: a response still open there is reported ``cut`` and counted in ``lanes_evicted``.

``--surface auto`` tells the surface from the events' shapes (``type`` / ``event:`` names, ``object``,
``choices[].delta`` or ``.text``); Anthropic's legacy ``/v1/complete`` is recognised and refused as an unsupported
surface.

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

import argparse
import codecs
import contextlib
import gzip
import json
import os
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from otelstream import names
from otelstream.core.report import StreamReport, StreamStart, Usage
from otelstream.core.sse import MAX_LINE, SSEComment, SSEDecoder, SSEItem
from otelstream.core.tracker import StreamTracker

AUTO: Final = "auto"
SURFACE_CHOICES: Final = (AUTO, *names.SURFACES)
TICK_NS: Final = 1_000_000  # the synthetic clock's step: one read = 1 ms
READ_SIZE: Final = 64 * 1024
DETECT_LIMIT: Final = 256  # events buffered while the surface is still unknown
MAX_REPORTED_LANE_RESPONSES: Final = 1_000  # a transcript's responses listed in `lanes`; all of them are counted
MAX_OPEN_LANES: Final = 1_024  # lanes followed at once; beyond it the longest-idle lane is forgotten

EXIT_OK: Final = 0
EXIT_STRICT: Final = 1
EXIT_BAD_INPUT: Final = 2

UNSUPPORTED_COMPLETE: Final = "unsupported surface: Anthropic legacy /v1/complete (only Messages is supported)"

_ANTHROPIC_TYPES = frozenset(
    {"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
     "message_stop"}
)  # fmt: skip
# client-to-server WebSocket events a transcript may also hold: not part of any response
_WS_CLIENT_EVENTS = frozenset({"response.create", "response.cancel", "response.steer", "session.update"})
_GZIP_MAGIC = b"\x1f\x8b"


class CheckError(Exception):
    """A file that cannot be analysed; the message is the one-line reason shown to the user."""


class _Undecodable:
    """Marker for an event payload that is not JSON."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


# --- the analysed result -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileReport:
    """What ``check`` found in one file: one report, or (WebSocket transcript) one per response."""

    file: str
    surface: str
    reports: tuple[StreamReport, ...]
    websocket: bool = False
    totals: _Totals | None = None  # a transcript's counts over all its responses, listed in ``reports`` or not

    @property
    def responses_dropped(self) -> int:
        """Transcript responses beyond MAX_REPORTED_LANE_RESPONSES: counted, not listed."""
        return self.totals.responses - len(self.reports) if self.totals is not None else 0

    @property
    def outcome(self) -> str:
        """The stream's outcome; for a transcript ``completed`` when every response completed, else the outcome of
        the first response (in order) that did not."""
        if self.totals is not None:
            return self.totals.outcome
        return self.reports[0].outcome

    def to_json(self) -> dict[str, Any]:
        if not self.websocket:
            return {"file": self.file, **_report_json(self.reports[0])}
        assert self.totals is not None  # analyse() gives every transcript its totals
        evicted = self.totals.evicted
        return {
            "file": self.file,
            **_aggregate_json(self.surface, self.reports, self.totals),
            **({"responses_dropped": self.responses_dropped} if self.responses_dropped else {}),
            **({"lanes_evicted": evicted} if evicted else {}),
        }

    def to_text(self) -> str:
        """Escaped (``shown``): one line per file, plus one per response for a transcript."""
        file = shown_path(self.file)
        if not self.websocket:
            return shown(f"{file}: {_report_text(self.reports[0])}")
        assert self.totals is not None  # analyse() gives every transcript its totals
        n = self.totals.responses
        lanes = len(self.totals.lane_ids)
        on = f"more than {lanes} lanes" if self.totals.lanes_more else f"{lanes} lane{'s' if lanes != 1 else ''}"
        head = f"{file}: {self.outcome}  {self.surface}  {n} response{'s' if n != 1 else ''} on {on}"
        lines = [head]
        for r in self.reports:
            lane = r.stream_id if r.stream_id is not None else "default"
            lines.append(f"  [{lane}] {r.response_id or '-'}: {_report_text(r, surface=False)}")
        if self.responses_dropped:
            lines.append(f"  … {self.responses_dropped} more responses not listed")
        if self.totals.evicted:
            lines.append(
                f"  … {self.totals.evicted} responses ended as cut: their lane idled while more than"
                f" {MAX_OPEN_LANES} lanes were open"
            )
        return "\n".join(shown(line) for line in lines)


def shown(text: str) -> str:
    """``text`` with each non-printable character (``str.isprintable``: controls, format characters such as bidi
    overrides, lone surrogates, separators but the space) as a Python-style escape. Printable text is unchanged, so
    showing shown text again changes nothing."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown_path(path: str) -> str:
    """A file name as given: undecodable bytes (which ``sys.argv`` holds as surrogate escapes) as ``\\xNN``."""
    with contextlib.suppress(UnicodeError):  # a surrogate that stands for no byte (not from argv): shown as such
        path = os.fsencode(path).decode("utf-8", "backslashreplace")
    return shown(path)


def _report_json(r: StreamReport) -> dict[str, Any]:
    out = r.to_json()
    out["resumed"] = r.resumed
    return out


def _aggregate_json(surface: str, reports: tuple[StreamReport, ...], totals: _Totals) -> dict[str, Any]:
    """A transcript's top level carries DESIGN §3's keys summed over all its responses, plus ``lanes``: the lists
    (``lanes``, ``finish_reasons``, ``anomalies``) come from the listed responses, every count from ``totals``."""
    finish: list[str] = []
    anomalies: list[dict[str, Any]] = []
    for r in reports:
        finish.extend(r.finish_reasons)
        for a in r.anomalies:
            if len(anomalies) < names.MAX_REPORTED_ANOMALIES:
                anomalies.append(a.to_json())
    outcome = totals.outcome
    first_error = totals.error_types.get(outcome) if outcome != names.COMPLETED else None
    first_class = totals.error_classes.get(outcome)  # from the responses whose outcome the transcript's is
    # per-response numbering restarts at 0, so first/last are only meaningful per lane
    seq = {"first": None, "last": None, "gaps": totals.gaps, "skipped": totals.skipped,
           "duplicates": totals.duplicates, "out_of_order": totals.out_of_order, "bad_start": totals.bad_start,
           "missing": totals.missing}  # fmt: skip
    return {
        "surface": surface,
        "provider": reports[0].provider if reports else names.PROVIDER_OPENAI,
        "outcome": outcome,
        "finish_reasons": finish,
        "error_type": first_error[1] if first_error is not None else None,
        "error_class": first_class[1] if first_class is not None else None,
        "events": totals.events,
        "deltas": totals.deltas,
        "keepalives": totals.keepalives,
        "done_sentinel": totals.done_sentinel,
        "sequence": seq,
        "usage": dict(totals.usage),
        "response_id": None,
        "response_model": totals.model[1] if totals.model is not None else None,
        "anomalies": anomalies,
        "anomaly_counts": dict(totals.anomaly_counts),
        "responses": totals.responses,
        "lanes": [_report_json(r) for r in reports],
    }


def _report_text(r: StreamReport, *, surface: bool = True) -> str:
    parts = [r.outcome]
    if surface:
        parts.append(r.surface)
    parts.append(f"events={r.events} deltas={r.deltas}")
    if r.keepalives:
        parts.append(f"keepalives={r.keepalives}")
    if r.finish_reasons:
        parts.append("finish=" + ",".join(r.finish_reasons))
    if r.error_class:  # bad outcomes only: what an on-call engineer acts on, then the provider's own code
        parts.append(f"error_class={r.error_class}")
    if r.error_type and r.outcome != names.COMPLETED:
        parts.append(f"error_type={r.error_type}")
    u = r.usage
    if u.input_tokens is not None or u.output_tokens is not None:
        tokens = f"tokens in={_n(u.input_tokens)} out={_n(u.output_tokens)}"
        if u.cache_read_input_tokens:
            tokens += f" cache_read={u.cache_read_input_tokens}"
        if u.cache_write_input_tokens:
            tokens += f" cache_write={u.cache_write_input_tokens}"
        if u.reasoning_output_tokens:
            tokens += f" reasoning={u.reasoning_output_tokens}"
        parts.append(tokens)
    s = r.sequence
    if s.first is not None:
        seq = f"seq={s.first}..{s.last}"
        if s.gaps:
            seq += f" gaps={s.gaps} skipped={s.skipped}"
        if s.duplicates:
            seq += f" duplicates={s.duplicates}"
        if s.out_of_order:
            seq += f" out_of_order={s.out_of_order}"
        parts.append(seq)
    if r.resumed:
        parts.append("resumed")
    if r.done_sentinel:
        parts.append("[DONE]")
    if r.anomaly_counts:
        parts.append("anomalies: " + ", ".join(k if c == 1 else f"{k} x{c}" for k, c in r.anomaly_counts))
    return "  ".join(parts)


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


# --- reading ---------------------------------------------------------------------------------------------------
def _read_text(path: str) -> Iterator[str]:
    """The file's text in chunks; raises CheckError for anything that is not a UTF-8 text body."""
    p = Path(path)
    try:
        if p.is_dir():
            raise CheckError("is a directory, not a file")
        raw = p.open("rb")
    except FileNotFoundError:
        raise CheckError("no such file") from None
    except CheckError:
        raise
    except OSError as exc:
        raise CheckError(f"cannot read: {exc.strerror or exc}") from None
    with raw:
        try:
            head = raw.read(READ_SIZE)
        except OSError as exc:
            raise CheckError(f"cannot read: {exc.strerror or exc}") from None
        if not head:
            raise CheckError("empty file")
        source: Any = raw
        if head.startswith(_GZIP_MAGIC):
            # a body saved as it came over the wire with Content-Encoding: gzip
            raw.seek(0)
            source = gzip.GzipFile(fileobj=raw)
            try:
                head = source.read(READ_SIZE)
            except (OSError, EOFError, zlib.error):
                raise CheckError("corrupt gzip data") from None
            if not head:
                raise CheckError("empty file (after gzip decompression)")
        if b"\0" in head:
            raise CheckError("binary data, not a text stream body")
        stripped = head.lstrip()
        if stripped[:1] == b"<":
            low = stripped[:256].lower()
            what = "an HTML page" if b"html" in low else "an XML/HTML document"
            raise CheckError(f"{what}, not a stream body (an error page from a proxy or gateway?)")
        decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        offset = 0
        chunk = head
        first = True
        while chunk:
            try:
                text = decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                raise CheckError(f"invalid UTF-8 at byte {offset + exc.start}: not a text stream body") from None
            if first and text.startswith("\ufeff"):
                text = text[1:]  # a byte-order mark is not part of the first line
            first = False
            if text:
                yield text
            offset += len(chunk)
            try:
                chunk = source.read(READ_SIZE)
            except (OSError, EOFError, zlib.error):
                raise CheckError("corrupt gzip data") from None
            if b"\0" in chunk:
                raise CheckError("binary data, not a text stream body")
        try:
            tail = decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise CheckError(f"invalid UTF-8 at byte {offset}: the file ends inside a character") from None
        if tail:
            yield tail


def _jsonl_lines(chunks: Iterator[str]) -> Iterator[tuple[str, bool]]:
    """Lines of a JSON-lines file, each cut at MAX_LINE characters (second item: it was cut)."""
    buf: list[str] = []
    size = 0
    over = False
    for chunk in chunks:
        start = 0
        while True:
            nl = chunk.find("\n", start)
            end = len(chunk) if nl < 0 else nl
            piece = chunk[start:end]
            if size + len(piece) > MAX_LINE:
                piece = piece[: max(0, MAX_LINE - size)]
                over = True
            buf.append(piece)
            size += len(piece)
            if nl < 0:
                break
            yield "".join(buf).strip(), over
            buf, size, over = [], 0, False
            start = nl + 1
    if size or over:
        yield "".join(buf).strip(), over


# --- records: what one file holds, in order, before any surface logic --------------------------------------------
_COMMENT: Final = object()


@dataclass
class _Record:
    name: str | None
    value: Any  # parsed JSON, an _Undecodable, or the string "[DONE]"


def _parse(data: str, truncated: bool = False) -> Any:
    if data.startswith("[DONE]"):
        return "[DONE]"  # openai: `sse.data.startswith("[DONE]")` ends the stream
    if truncated:
        return _Undecodable("event larger than the decoder's limit (cut)")
    if not data:
        return _Undecodable("event without data")
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return _Undecodable("data is not JSON")


def _sse_records(chunks: Iterator[str], state: dict[str, bool]) -> Iterator[_Record | object]:
    dec = SSEDecoder()
    for chunk in chunks:
        yield from _sse_items(dec.feed(chunk))
    yield from _sse_items(dec.finish())
    state["unterminated"] = dec.unterminated


def _sse_items(items: list[SSEItem]) -> Iterator[_Record | object]:
    for item in items:
        if isinstance(item, SSEComment):
            yield _COMMENT
        else:
            yield _Record(item.event, _parse(item.data, item.truncated))


def _jsonl_records(chunks: Iterator[str]) -> Iterator[_Record | object]:
    for line, over in _jsonl_lines(chunks):
        if line:
            yield _Record(None, _parse(line, over))


# --- surface detection -------------------------------------------------------------------------------------------
def detect(name: str | None, value: Any) -> str | None:
    """The surface one event belongs to, from its shape; None when it does not tell (errors, pings, usage-only).
    Returns UNSUPPORTED_COMPLETE for Anthropic's legacy completion events."""
    d = value if type(value) is dict else None
    typ = d.get("type") if d is not None else None
    for t in (typ, name):
        if isinstance(t, str):
            if t.startswith("response."):
                return names.RESPONSES
            if t in _ANTHROPIC_TYPES:
                return names.MESSAGES
            if t == "completion":
                return UNSUPPORTED_COMPLETE
    if d is None:
        return None
    obj = d.get("object")
    if obj == "chat.completion.chunk":
        return names.CHAT_COMPLETIONS
    if obj == "text_completion":
        return names.COMPLETIONS
    if "completion" in d and "stop_reason" in d and "choices" not in d:
        return UNSUPPORTED_COMPLETE  # legacy /v1/complete payloads without a type field
    choices = d.get("choices")
    if type(choices) is list and choices and type(choices[0]) is dict:
        c = choices[0]
        if "delta" in c or "message" in c:
            return names.CHAT_COMPLETIONS
        if "text" in c:
            return names.COMPLETIONS
    return None


# --- feeding the tracker ---------------------------------------------------------------------------------------
class _TickClock:
    """The synthetic clock: every read advances 1 ms (offline input has no times)."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += TICK_NS
        return self.now


@dataclass
class _Run:
    """One stream (one response) being fed to a tracker the way the SDK would feed it."""

    surface: str
    sse_framed: bool
    tracker: StreamTracker
    clock: _TickClock
    stopped: bool = False  # the SDK would have stopped reading here ([DONE], undecodable data)
    after_stop_flagged: bool = False
    report: StreamReport | None = None

    @classmethod
    def open(
        cls, surface: str, *, sse_framed: bool, starting_after: int | None = None, stream_id: str | None = None
    ) -> _Run:
        clock = _TickClock()
        provider = names.PROVIDER_ANTHROPIC if surface == names.MESSAGES else names.PROVIDER_OPENAI
        start = StreamStart(surface=surface, provider=provider, resumed=starting_after is not None, stream_id=stream_id)
        tracker = StreamTracker(start, clock=clock, starting_after=starting_after)
        return cls(surface, sse_framed, tracker, clock)

    def comment(self) -> None:
        if not self.stopped:
            self.tracker.keepalive()

    def record(self, rec: _Record) -> None:
        t = self.tracker
        value = rec.value
        if self.stopped:
            if not self.after_stop_flagged and not isinstance(value, _Undecodable):
                self.after_stop_flagged = True
                t.anomaly(names.ANOM_EVENT_AFTER_TERMINAL, "data after the stream ended (the SDK stops reading)")
            return
        messages = self.surface == names.MESSAGES
        if value == "[DONE]":
            t.done_sentinel()
            if not messages:
                self.stopped = True  # openai: `break` at [DONE]; the rest of the body is never read
            return
        if messages and self.sse_framed:
            # anthropic skips `ping`, unnamed events and (except `error`) events without data
            if rec.name == "ping":
                t.keepalive()
                return
            if rec.name is None:
                t.anomaly(names.ANOM_UNKNOWN_EVENT, "event without an event: name (the SDK skips it)")
                return
            if rec.name == "error" and isinstance(value, _Undecodable):
                t.anomaly(names.ANOM_UNDECODABLE, f"error event: {value.reason}")
                self._stop("error")
                return
            if isinstance(value, _Undecodable) and value.reason == "event without data":
                return
        if isinstance(value, _Undecodable):
            # the SDK raises JSONDecodeError here: live, this stream ends as a transport error
            t.anomaly(names.ANOM_UNDECODABLE, value.reason + (f" (event {rec.name!r})" if rec.name else ""))
            # (as live: the SDK's JSONDecodeError, a ValueError, decides the error class)
            self._stop("transport_error", exc=ValueError(value.reason))
            return
        t.t_pull = self.clock()
        t.event(value, rec.name)

    def _stop(self, how: str, error_type: str | None = None, exc: BaseException | None = None) -> None:
        self.stopped = True
        self.report = self.tracker.end(how, error_type, exc=exc)

    def finish(self, *, unterminated: bool = False) -> StreamReport:
        if self.report is None:
            if unterminated:
                self.tracker.anomaly(
                    names.ANOM_UNTERMINATED_EVENT, "the body ended inside an event (no blank line): the SDKs drop it"
                )
            self.report = self.tracker.end("eof")
        assert self.report is not None  # end() returns a report the first time, and only _stop/finish call it
        return self.report


def _resume_point(first: _Record | None) -> int | None:
    """A recorded Responses stream that starts past 0 on anything but ``response.created`` is a resume
    (``GET /responses/{id}?starting_after=N``): the server sends N+1 onward. A fresh stream always starts with
    ``response.created`` at 0, so only a resume recording looks like this."""
    if first is None or type(first.value) is not dict:
        return None
    typ = first.value.get("type") or first.name
    seq = first.value.get("sequence_number")
    if typ != "response.created" and type(seq) is int and seq > 0:
        return seq - 1
    return None


@dataclass
class _Totals:
    """DESIGN §3's counts over every response of a transcript, listed in ``lanes`` or not: exact, in memory that
    does not grow with the responses (integers, and dicts keyed by anomaly kind and outcome)."""

    responses: int = 0
    events: int = 0
    deltas: int = 0
    keepalives: int = 0
    done_sentinel: bool = False
    gaps: int = 0
    skipped: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    bad_start: bool = False
    missing: bool = False
    usage: dict[str, int | None] = field(default_factory=lambda: Usage().to_json())  # every key, each None
    anomaly_counts: dict[str, int] = field(default_factory=dict)
    # responses finish out of order (lanes interleave), so "first" means the lowest place in order of first events
    first_bad: tuple[int, str] | None = None  # the first response that did not complete: (place, outcome)
    error_types: dict[str, tuple[int, str]] = field(default_factory=dict)  # per outcome, its first error_type
    error_classes: dict[str, tuple[int, str]] = field(default_factory=dict)  # per outcome, its first error_class
    model: tuple[int, str] | None = None
    lane_ids: set[str | None] = field(default_factory=set)  # distinct lanes, up to MAX_REPORTED_LANE_RESPONSES
    lanes_more: bool = False
    evicted: int = 0  # responses still open when their lane was forgotten (MAX_OPEN_LANES)

    @property
    def outcome(self) -> str:
        if self.first_bad is not None:
            return self.first_bad[1]
        return names.COMPLETED if self.responses else names.CUT

    def add(self, place: int, r: StreamReport) -> None:
        self.responses += 1
        self.events += r.events
        self.deltas += r.deltas
        self.keepalives += r.keepalives or 0  # None (unknown) only live, never offline
        self.done_sentinel = self.done_sentinel or bool(r.done_sentinel)
        s = r.sequence
        self.gaps += s.gaps
        self.skipped += s.skipped
        self.duplicates += s.duplicates
        self.out_of_order += s.out_of_order
        self.bad_start = self.bad_start or s.bad_start
        self.missing = self.missing or s.missing
        usage = self.usage
        for key, value in r.usage.to_json().items():
            if value is not None:
                usage[key] = (usage[key] or 0) + value
        counts = self.anomaly_counts
        for kind, c in r.anomaly_counts:
            counts[kind] = counts.get(kind, 0) + c
        if r.outcome != names.COMPLETED and (self.first_bad is None or place < self.first_bad[0]):
            self.first_bad = (place, r.outcome)
        if r.error_type is not None:
            known = self.error_types.get(r.outcome)
            if known is None or place < known[0]:
                self.error_types[r.outcome] = (place, r.error_type)
        if r.error_class is not None:
            known = self.error_classes.get(r.outcome)
            if known is None or place < known[0]:
                self.error_classes[r.outcome] = (place, r.error_class)
        if r.response_model and (self.model is None or place < self.model[0]):
            self.model = (place, r.response_model)
        if r.stream_id not in self.lane_ids:
            if len(self.lane_ids) < MAX_REPORTED_LANE_RESPONSES:
                self.lane_ids.add(r.stream_id)
            else:
                self.lanes_more = True


@dataclass
class _Lane:
    """One lane being followed: its current response and the client's requests it has not answered yet."""

    run: _Run | None = None
    place: int = 0  # the run's place in order of first events
    # the client's response.create not yet answered by a run: after a response's terminal event, the next server
    # event belongs to the next request (an `error` refusing it may come without response.created)
    requested: int = 0


@dataclass
class _Lanes:
    """A WebSocket transcript: one run per response, lanes by ``stream_id``.

    Bounded whatever the transcript holds: at most MAX_OPEN_LANES lanes are followed (least recently fed first, so
    the one to forget is the longest idle), a response's report is folded into ``totals`` when its lane moves on,
    and only the first MAX_REPORTED_LANE_RESPONSES reports are kept for ``lanes``."""

    open: dict[str | None, _Lane] = field(default_factory=dict)
    listed: list[StreamReport | None] = field(default_factory=list)  # by place; None while that run is open
    totals: _Totals = field(default_factory=_Totals)
    started: int = 0

    def record(self, rec: _Record) -> None:
        value = rec.value
        d = value if type(value) is dict else None
        typ = d.get("type") if d is not None else None
        sid = d.get("stream_id") if d is not None else None
        client = type(typ) is str and typ in _WS_CLIENT_EVENTS
        if client and typ != "response.create":
            return
        lane = sid[:128] if isinstance(sid, str) else None
        entry = self.open.pop(lane, None)
        if entry is None:
            entry = _Lane()
            if len(self.open) >= MAX_OPEN_LANES:
                self._forget(next(iter(self.open)))
        self.open[lane] = entry  # re-inserted: the most recently fed lane is last
        if client:
            entry.requested += 1
            return
        run = entry.run
        if (
            run is None
            or (typ == "response.created" and run.tracker.events)
            or (run.tracker.terminal and entry.requested)
        ):
            if entry.requested:
                entry.requested -= 1
            if run is not None:
                self._close(entry)
            run = entry.run = _Run.open(names.RESPONSES_WEBSOCKET, sse_framed=False, stream_id=lane)
            entry.place = self.started
            self.started += 1
            if entry.place < MAX_REPORTED_LANE_RESPONSES:
                self.listed.append(None)
        run.record(rec)

    def _forget(self, lane: str | None) -> None:
        entry = self.open.pop(lane)
        run = entry.run
        if run is not None:
            if run.report is None and not run.tracker.terminal:
                self.totals.evicted += 1
            self._close(entry)

    def _close(self, entry: _Lane) -> None:
        assert entry.run is not None  # only called for a lane with a current response
        report = entry.run.finish()
        entry.run = None
        self.totals.add(entry.place, report)
        if entry.place < MAX_REPORTED_LANE_RESPONSES:
            self.listed[entry.place] = report

    def reports(self) -> tuple[StreamReport, ...]:
        """The listed reports, in order of first events; every lane still open ends here (the transcript did)."""
        for entry in self.open.values():
            if entry.run is not None:
                self._close(entry)
        self.open.clear()
        listed = tuple(r for r in self.listed if r is not None)
        assert len(listed) == len(self.listed)  # every run was closed, here or when its lane moved on
        return listed


def analyse(path: str, surface: str = AUTO) -> FileReport:
    """Analyse one recorded file; raises CheckError with a one-line reason when it cannot."""
    lower = path.lower()
    payloads = lower.endswith(".payloads.jsonl")
    jsonl = lower.endswith(".jsonl")
    state: dict[str, bool] = {"unterminated": False}
    chunks = _read_text(path)
    records = _jsonl_records(chunks) if jsonl else _sse_records(chunks, state)

    chosen: str | None = None if surface == AUTO else surface
    pending: list[_Record | object] = []  # held back while the surface is unknown
    events_seen = json_seen = 0
    run: _Run | None = None
    lanes: _Lanes | None = None
    for item in records:
        if isinstance(item, _Record):
            events_seen += 1
            if not isinstance(item.value, _Undecodable) and item.value != "[DONE]":
                json_seen += 1
                if chosen is None:
                    chosen = detect(item.name, item.value)
                    if chosen == UNSUPPORTED_COMPLETE:
                        raise CheckError(UNSUPPORTED_COMPLETE)
                    if chosen == names.RESPONSES and jsonl and not payloads:
                        chosen = names.RESPONSES_WEBSOCKET
        if chosen is None:
            if events_seen >= DETECT_LIMIT:
                break
            pending.append(item)
            continue
        if run is None and lanes is None:
            if chosen == names.RESPONSES_WEBSOCKET:
                lanes = _Lanes()
            else:
                first = next((r for r in (*pending, item) if isinstance(r, _Record)), None)
                after = _resume_point(first) if chosen == names.RESPONSES else None
                run = _Run.open(chosen, sse_framed=not jsonl, starting_after=after)
            for buffered in pending:
                _feed(buffered, run, lanes)
            pending.clear()
        _feed(item, run, lanes)
    if chosen is None:
        if events_seen == 0:
            raise CheckError(_no_events_reason(path, jsonl))
        if json_seen == 0:
            raise CheckError("no JSON event payloads: not an LLM stream body")
        raise CheckError("cannot tell the surface from the events (pass --surface)")
    if json_seen == 0:
        # with --surface given, a body of comments, [DONE] or non-JSON data is still not a stream we can report
        raise CheckError(_no_events_reason(path, jsonl) if events_seen == 0 else "no JSON event payloads")
    if lanes is not None:
        reports = lanes.reports()
        if not reports:
            raise CheckError("no server events in the transcript")
        return FileReport(path, chosen, reports, websocket=True, totals=lanes.totals)
    assert run is not None  # json_seen > 0 means at least one record reached the setup above
    return FileReport(path, chosen, (run.finish(unterminated=state["unterminated"]),))


def _feed(item: _Record | object, run: _Run | None, lanes: _Lanes | None) -> None:
    if isinstance(item, _Record):
        if lanes is not None:
            lanes.record(item)
        elif run is not None:
            run.record(item)
    elif item is _COMMENT and run is not None:
        run.comment()


def _no_events_reason(path: str, jsonl: bool) -> str:
    if jsonl:
        return "no JSON lines: not a transcript"
    try:
        with open(path, "rb") as f:
            head = f.read(256).lstrip()
    except OSError:
        head = b""
    if head[:1] in (b"{", b"["):
        return "a JSON document, not an SSE stream body (was the request made without stream=true?)"
    return "no SSE events (no data: lines followed by a blank line): not a stream body"


# --- the subcommand --------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--surface",
        choices=SURFACE_CHOICES,
        default=AUTO,
        help="which API produced the stream (default: tell from the events)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per file (an array for several)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any stream's outcome is not completed")
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help=".sse body, .jsonl WebSocket transcript, or .payloads.jsonl (one data payload per line)",
    )
    parser.epilog = (
        "Times in offline reports are synthetic (one 1 ms tick per event): a recording carries no timing. "
        "Exit status: 2 when a file is unreadable or not a supported stream, else 1 with --strict when an outcome "
        "is not completed, else 0."
    )


def run(args: argparse.Namespace) -> int:
    results: list[dict[str, Any]] = []
    bad = False
    not_completed = False
    for path in args.files:
        try:
            report = analyse(path, args.surface)
        except CheckError as exc:
            bad = True
            print(f"otelstream check: {shown_path(path)}: {shown(str(exc))}", file=sys.stderr)
            if args.json:
                results.append({"file": path, "error": str(exc)})
            continue
        if report.outcome != names.COMPLETED or any(r.outcome != names.COMPLETED for r in report.reports):
            not_completed = True
        if args.json:
            results.append(report.to_json())
        else:
            print(report.to_text())
    if args.json and results:
        doc: Any = results[0] if len(args.files) == 1 else results
        print(json.dumps(doc, indent=2))
    sys.stdout.flush()
    if bad:
        return EXIT_BAD_INPUT
    if args.strict and not_completed:
        return EXIT_STRICT
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """``python -m otelstream.offline FILE…``: the same as ``otelstream check``, without the other subcommands."""
    parser = argparse.ArgumentParser(prog="otelstream check", description="analyse recorded stream bodies")
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
