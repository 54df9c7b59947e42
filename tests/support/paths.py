"""Where the suite's inputs are: the repository, its own stream fixtures, and the real captures beside it."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "streams"  # the project's own bodies (tests/fixtures/make_streams.py)
CAPTURES = REPO.parent / "shared" / "captures"  # recorded from the real APIs; absent from a fresh clone
