"""The ``otelstream check`` subcommand: its arguments, its output (one line or JSON object per file, errors on
stderr) and its exit status."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
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
        help=".sse body, .eventstream Bedrock body, .jsonl WebSocket transcript, or .payloads.jsonl (one data "
        "payload per line); "
        "- reads an SSE body from standard input",
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
            if path == STDIN:
                with _stdin_copy() as copy:
                    report = dataclasses.replace(analyse(copy, args.surface), file=STDIN)
            else:
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


STDIN: Final = "-"


@contextlib.contextmanager
def _stdin_copy() -> Iterator[str]:
    """Standard input as a file checked like a ``.sse`` body: copied once, in chunks, to a temporary file, since a
    body without events is read again to say why."""
    with tempfile.TemporaryDirectory(prefix="otelstream-check-") as tmp:
        copy = os.path.join(tmp, "stdin.sse")
        try:
            with open(copy, "wb") as out:
                shutil.copyfileobj(sys.stdin.buffer, out)
        except (OSError, AttributeError, ValueError) as exc:  # no standard input, or a closed one
            raise CheckError(f"cannot read standard input: {exc}") from None
        yield copy


def main(argv: list[str] | None = None) -> int:
    """``python -m otelstream.offline FILE…``: the same as ``otelstream check``, without the other subcommands."""
    parser = argparse.ArgumentParser(prog="otelstream check", description="analyse recorded stream bodies")
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except BrokenPipeError:
        return 0
