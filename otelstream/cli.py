"""The ``otelstream`` command: ``check``, ``demo``, ``dashboards``, ``doctor``, ``probe``; ``--version``.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``; this module
only dispatches, so ``otelstream check`` never imports the SDKs or the exporters.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from otelstream.distribution import version

_SUBCOMMANDS = {
    "check": ("otelstream.offline", "analyse recorded stream bodies (.sse) and WebSocket transcripts (.jsonl)"),
    "demo": ("otelstream.demo.run", "stream through a local fake provider and show what otelstream measures"),
    "dashboards": (
        "otelstream.dashboards.command_line", "write the Grafana dashboards and Prometheus rules to a folder"
    ),
    "doctor": ("otelstream.doctor.command", "check that otelstream reports right on the SDKs installed here"),
    "probe": ("otelstream.probe.command", "probe a streaming endpoint with small requests: rows, verdict, monitor"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="otelstream", description="Observability for streamed LLM responses.")
    parser.add_argument("--version", action="version", version=f"otelstream {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    # Import only the chosen subcommand's module: `check` must not pay for (or fail on) the demo's SDK imports.
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    module = chosen_parser = None
    for name, (module_name, help_text) in _SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(module_name)
            module.add_arguments(sub_parser)
            chosen_parser = sub_parser
    args, unknown = parser.parse_known_args(argv)
    assert module is not None and chosen_parser is not None  # parse_known_args exits unless a subcommand was given
    if unknown:  # the subcommand's own error (its usage, or the probe's one line), not the top-level usage
        chosen_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
