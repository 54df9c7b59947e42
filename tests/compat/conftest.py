"""The compat suite: the frameworks people stream through, against the scripted server on 127.0.0.1 (the
``scripted`` fixture of tests/conftest.py), with and without otelstream. It runs in its own venv with pinned
framework releases (``.ci/compat.sh``); in the main venv, without the frameworks, each module skips with the reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Set before litellm is imported: it would fetch its model cost map from the network (retrying for seconds).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The suite's warnings-as-errors policy is for otelstream's code: here it would turn the frameworks' own
    warnings (pydantic schema notes, deprecations) into exceptions inside them, and they would behave otherwise."""
    for item in items:
        if item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.filterwarnings("ignore"))
