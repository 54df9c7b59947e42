"""The ``otelstream`` command: ``check``, ``demo``, ``dashboards``.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``; this module
only dispatches, so ``otelstream check`` never imports the SDKs or the exporters.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

_SUBCOMMANDS = {
    "check": ("otelstream.offline", "analyse recorded stream bodies (.sse) and WebSocket transcripts (.jsonl)"),
    "demo": ("otelstream.demo.run", "stream through a local fake provider and show what otelstream measures"),
    "dashboards": ("otelstream.dashboards", "write the Grafana dashboards and Prometheus rules to a folder"),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="otelstream", description="Observability for streamed LLM responses.")
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, (module_name, help_text) in _SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        modules[name] = module
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    args = parser.parse_args(argv)
    try:
        return int(modules[args.command].run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
