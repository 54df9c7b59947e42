"""Analysing one file: its records read, its surface detected, its events replayed through the tracker (one run, or
a transcript's lanes), its ``FileReport``."""

from __future__ import annotations

from otelstream import names
from otelstream.core.client_rules import Undecodable
from otelstream.offline.bedrock_body import analyse_eventstream, is_eventstream
from otelstream.offline.detection import AUTO, DETECT_LIMIT, UNSUPPORTED_COMPLETE, detect
from otelstream.offline.reading import COMMENT, CheckError, Record, jsonl_records, read_text, sse_records
from otelstream.offline.rendering import FileReport
from otelstream.offline.replay import Run, resume_point
from otelstream.offline.transcript import Lanes


def analyse(path: str, surface: str = AUTO) -> FileReport:
    """Analyse one recorded file; raises CheckError with a one-line reason when it cannot."""
    if is_eventstream(path):  # a Bedrock body: binary, told apart by its first prelude (or its name)
        return analyse_eventstream(path, surface)
    lower = path.lower()
    payloads = lower.endswith(".payloads.jsonl")
    jsonl = lower.endswith(".jsonl")
    state: dict[str, bool] = {"unterminated": False}
    chunks = read_text(path)
    records = jsonl_records(chunks) if jsonl else sse_records(chunks, state)

    chosen: str | None = None if surface == AUTO else surface
    pending: list[Record | object] = []  # held back while the surface is unknown
    events_seen = json_seen = 0
    run: Run | None = None
    lanes: Lanes | None = None
    for item in records:
        if isinstance(item, Record):
            events_seen += 1
            if not isinstance(item.value, Undecodable) and item.value != "[DONE]":
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
                lanes = Lanes()
            else:
                first = next((r for r in (*pending, item) if isinstance(r, Record)), None)
                after = resume_point(first) if chosen == names.RESPONSES else None
                run = Run.open(chosen, sse_framed=not jsonl, starting_after=after)
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


def _feed(item: Record | object, run: Run | None, lanes: Lanes | None) -> None:
    if isinstance(item, Record):
        if lanes is not None:
            lanes.record(item)
        elif run is not None:
            run.record(item)
    elif item is COMMENT and run is not None:
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
