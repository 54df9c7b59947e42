"""Re-render ``bench/RESULTS.md`` from a run's raw figures: ``python -m bench.report [results.json]``; a run limited to
the Gemini and Bedrock cells goes into its own section: ``python -m bench.report --cloud-section results.json``."""

from __future__ import annotations

import json
import os
import sys

from bench.report.record import HERE, rerender, write_cloud_section

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--cloud-section"]:
        with open(args[1] if len(args) > 1 else os.path.join(HERE, "results.json")) as f:
            write_cloud_section(json.load(f), os.path.join(HERE, "RESULTS.md"))
    else:
        rerender(args[0] if args else None)
