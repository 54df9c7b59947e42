"""The compiled accelerator for the tests that compare it with the pure path: the module, or the test module skipped
where it is not built (under CI, ``CI=true``, a missing module fails instead)."""

from __future__ import annotations

import os
from types import ModuleType

import pytest


def speedups() -> ModuleType:
    try:
        from otelstream import _speedups  # type: ignore[attr-defined]
    except ImportError:  # not built here
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("the compiled accelerator is not built on this machine", allow_module_level=True)
    return _speedups  # type: ignore[no-any-return]
