"""One fake provider per test module, recording every body."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from otelstream.demo.provider import FakeProvider, serve
from tests.demo.harness import TEST_PACING


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    with serve(record=True, pacing=TEST_PACING, tokens=(6, 10), seed=7) as p:
        yield p
