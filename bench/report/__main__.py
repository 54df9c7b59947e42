"""Re-render ``bench/RESULTS.md`` from a run's raw figures: ``python -m bench.report [results.json]``; a run limited to
the Gemini and Bedrock cells goes into its own section: ``python -m bench.report --cloud-section results.json…``
(several runs are merged)."""

from __future__ import annotations

import json
import os
import sys

from bench.report.record import HERE, merge_runs, rerender, write_cloud_section

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--cloud-section"]:  # one run's results.json or several, merged
        runs = []
        for path in args[1:] or [os.path.join(HERE, "results.json")]:
            with open(path) as f:
                runs.append(json.load(f))
        write_cloud_section(merge_runs(runs) if len(runs) > 1 else runs[0], os.path.join(HERE, "RESULTS.md"))
    else:
        rerender(args[0] if args else None)
