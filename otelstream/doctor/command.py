"""``otelstream doctor [--json] [--surface S ...]``: run the fault matrix on this environment's SDKs and HTTP
libraries; exit 1 on any mismatch (or a missing patch point), 2 when a surface asked has no cell here (WebSocket
mode, an SDK not installed; no cell at all when none was asked), 0 when every cell held."""

from __future__ import annotations

import argparse
import logging

from otelstream import names

_SURFACES = (names.RESPONSES, names.CHAT_COMPLETIONS, names.COMPLETIONS, names.MESSAGES, names.RESPONSES_WEBSOCKET,
             names.GENERATE_CONTENT, names.CONVERSE)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run the fault matrix (completed, cut, reset, in-band errors, incomplete, keepalives, sequence gap, [DONE] "
        "rules, break/close/cancel/garbage collection, 429, 503, read timeouts) through the installed SDKs and HTTP "
        "libraries, in-process over their mock transports (no network, no content), and compare what otelstream "
        "reports with what it must report. Run it after upgrading any dependency. Exit 1 on any mismatch, 2 when a "
        "surface asked has no cell here."
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    parser.add_argument("--surface", action="append", choices=_SURFACES, metavar="SURFACE",
                        help=f"only this surface (repeatable): {', '.join(_SURFACES)}")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from otelstream.doctor import render, runner

    # the patcher's own WARNING for a missing patch point would repeat what the output says, on stderr
    log = logging.getLogger("otelstream")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        result = runner.run(args.surface)
    finally:
        log.setLevel(level)
    print(render.json_text(result) if args.json else render.text(result))
    return 0 if result.ok else 1 if result.wrong else 2
