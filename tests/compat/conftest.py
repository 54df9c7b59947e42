"""The compat suite: the frameworks people stream through, against the scripted server on 127.0.0.1 (the
``scripted`` fixture of tests/conftest.py; the Gemini and Bedrock stand-ins below), with and without otelstream.
It runs in its own venv with pinned framework releases (``.ci/compat.sh``); in the main venv, without the
frameworks, each module skips with the reason."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bedrock_server import BedrockServer
from tests.support.gemini_server import GeminiServer

# Set before litellm is imported: it would fetch its model cost map from the network (retrying for seconds).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The suite's warnings-as-errors policy is for otelstream's code: here it would turn the frameworks' own
    warnings (pydantic schema notes, deprecations) into exceptions inside them, and they would behave otherwise."""
    for item in items:
        if item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.filterwarnings("ignore"))


@pytest.fixture(scope="session")
def gemini() -> Iterator[GeminiServer]:
    with GeminiServer() as server:
        yield server


@pytest.fixture(scope="session")
def bedrock() -> Iterator[BedrockServer]:
    with BedrockServer() as server:
        yield server
