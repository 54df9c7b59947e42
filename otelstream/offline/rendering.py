"""Rendering what ``check`` found: ``FileReport`` as JSON (docs/api.md's keys) or as text, every non-printable
character escaped."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from otelstream import names
from otelstream.core.report import StreamReport
from otelstream.offline.transcript import MAX_OPEN_LANES

if TYPE_CHECKING:
    from otelstream.offline.transcript import Totals


@dataclass(frozen=True)
class FileReport:
    """What ``check`` found in one file: one report, or (WebSocket transcript) one per response."""

    file: str
    surface: str
    reports: tuple[StreamReport, ...]
    websocket: bool = False
    totals: Totals | None = None  # a transcript's counts over all its responses, listed in ``reports`` or not

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


def _aggregate_json(surface: str, reports: tuple[StreamReport, ...], totals: Totals) -> dict[str, Any]:
    """A transcript's top level carries docs/api.md's keys summed over all its responses, plus ``lanes``: the lists
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
    first_phase = totals.phases.get(outcome)
    return {
        "surface": surface,
        "provider": reports[0].provider if reports else names.PROVIDER_OPENAI,
        "outcome": outcome,
        "finish_reasons": finish,
        "error_type": first_error[1] if first_error is not None else None,
        "error_class": first_class[1] if first_class is not None else None,
        "failure_phase": first_phase[1] if first_phase is not None else None,
        "events": totals.events,
        "deltas": totals.deltas,
        "first_output_event_index": None,  # event indexes restart with each response: per lane only
        "keepalives": totals.keepalives,
        "done_sentinel": totals.done_sentinel,
        "sequence": totals.sequence.to_json(),
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
    if r.failure_phase is not None:  # did the user see part of an answer before it broke
        parts.append(f"phase={r.failure_phase}")
    if r.deltas and r.time_to_first_output_ns != r.time_to_first_delta_ns:
        # reasoning came first (check's clock ticks per record): where the answer began, if it did
        first = r.first_output_event
        parts.append("first_output=none" if first is None else f"first_output=event {first}")
    u = r.usage
    if u.input_tokens is not None or u.output_tokens is not None:
        tokens = f"tokens in={_n(u.input_tokens)} out={_n(u.output_tokens)}"
        parts.append(
            tokens
            + _nonzero(
                ("cache_read", u.cache_read_input_tokens),
                ("cache_write", u.cache_write_input_tokens),
                ("reasoning", u.reasoning_output_tokens),
            )
        )
    s = r.sequence
    if s.first is not None:
        seq = f"seq={s.first}..{s.last}"
        if s.gaps:
            seq += f" gaps={s.gaps} skipped={s.skipped}"
        parts.append(seq + _nonzero(("duplicates", s.duplicates), ("out_of_order", s.out_of_order)))
    if r.resumed:
        parts.append("resumed")
    if r.done_sentinel:
        parts.append("[DONE]")
    if r.anomaly_counts:
        parts.append("anomalies: " + ", ".join(k if c == 1 else f"{k} x{c}" for k, c in r.anomaly_counts))
    return "  ".join(parts)


def _nonzero(*pairs: tuple[str, int | None]) -> str:
    """`` name=value`` for each count that is neither None nor 0, in the order given."""
    return "".join(f" {name}={value}" for name, value in pairs if value)


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)
