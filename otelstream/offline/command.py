"""The ``otelstream check`` subcommand: its arguments, its output (one line or JSON object per file, errors on
stderr) and its exit status."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final

from otelstream import names
from otelstream.offline.analysis import analyse
from otelstream.offline.detection import AUTO
from otelstream.offline.reading import CheckError
from otelstream.offline.rendering import shown, shown_path

SURFACE_CHOICES: Final = (AUTO, *names.SURFACES)

EXIT_OK: Final = 0
EXIT_STRICT: Final = 1
EXIT_BAD_INPUT: Final = 2


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
