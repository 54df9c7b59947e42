"""Re-render ``bench/RESULTS.md`` from a run's raw figures: ``python -m bench.report [results.json]``."""

from __future__ import annotations

import sys

from bench.report.record import rerender

if __name__ == "__main__":
    rerender(sys.argv[1] if len(sys.argv) > 1 else None)
