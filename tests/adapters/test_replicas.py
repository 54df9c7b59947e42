"""Our copies of the SDKs' ``Stream.__stream__`` run only in place of the exact code they were copied from.

The installed SDKs (the newest and, in CI, the oldest supported release) should match a known copy: when a new release
changes the method, this test is skipped with its name, and until a copy is added its streams are observed by wrapping
(correct, but a generator or two more per stream and per event)."""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import wrapt

from otelstream import adapters
from otelstream.adapters import _common as c
from otelstream.adapters import anthropic_sse, openai_sse
from tests.adapters.recording import RecordingListener

SDK_METHODS = [
    (openai.Stream, openai_sse._REPLICAS),
    (openai.AsyncStream, openai_sse._REPLICAS),
    (anthropic.Stream, anthropic_sse._REPLICAS),
    (anthropic.AsyncStream, anthropic_sse._REPLICAS),
]


def _bound(cls: type, name: str = "__stream__") -> Any:
    fn = inspect.getattr_static(cls, name)
    fn = getattr(fn, "__wrapped__", fn)  # the original under our patch, if it is applied
    return types.MethodType(fn, object())


@pytest.mark.parametrize(("cls", "known"), SDK_METHODS, ids=lambda v: getattr(v, "__module__", "") + "." + str(
    getattr(v, "__qualname__", "")))
def test_installed_sdk_runs_our_copy(cls: type, known: dict[str, c.Replica]) -> None:
    replica = c.sdk_replica(_bound(cls), known)
    if replica is None:
        # A new SDK release: its streams are observed by wrapping, which the rest of the suite covers. Not a failure
        # (CI installs the newest release, and nothing is wrong), but said loudly in the summary.
        name = f"{cls.__module__}.{cls.__qualname__}.__stream__"
        pytest.skip(f"{name} has no copy for this SDK release: its streams are wrapped (correct, one or two generators "
                    "more per stream). Review the change and add a copy.")  # fmt: skip


def _module(tmp_path: Path, name: str, source: str) -> types.ModuleType:
    (tmp_path / f"{name}.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


_HEAD = "from __future__ import annotations\n\nimport sys\n\n\nclass Stream:\n"


def _known_source() -> str:
    fn = inspect.getattr_static(anthropic.Stream, "__stream__")
    return inspect.getsource(getattr(fn, "__wrapped__", fn))


def test_a_copied_source_is_recognised(tmp_path: Path) -> None:
    mod = _module(tmp_path, "otelstream_fake_sdk_same", _HEAD + _known_source())
    assert c.sdk_replica(_bound(mod.Stream), anthropic_sse._REPLICAS) is not None


def test_a_changed_source_is_wrapped(tmp_path: Path) -> None:
    changed = _known_source().replace('"ping"', '"keepalive"')
    mod = _module(tmp_path, "otelstream_fake_sdk_changed", _HEAD + changed)
    assert c.sdk_replica(_bound(mod.Stream), anthropic_sse._REPLICAS) is None


def test_a_file_changed_after_import_is_wrapped(tmp_path: Path) -> None:
    """The source on disk is a known copy, the code running is not (a package upgraded under a running process)."""
    changed = _known_source().replace('"ping"', '"keepalive"')
    mod = _module(tmp_path, "otelstream_fake_sdk_stale", _HEAD + changed)
    (tmp_path / "otelstream_fake_sdk_stale.py").write_text(_HEAD + _known_source())
    assert c.sdk_replica(_bound(mod.Stream), anthropic_sse._REPLICAS) is None


def test_someone_elses_wrapper_is_run_not_bypassed() -> None:
    fn = inspect.getattr_static(anthropic.Stream, "__stream__")
    fn = getattr(fn, "__wrapped__", fn)
    proxy = wrapt.FunctionWrapper(fn, lambda wrapped, instance, args, kwargs: wrapped(*args, **kwargs))
    assert c.sdk_replica(proxy.__get__(object(), anthropic.Stream), anthropic_sse._REPLICAS) is None


def test_decided_when_the_patch_is_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading and hashing the SDK's source happens at the import (or ``instrument()``), not in the first stream."""
    monkeypatch.setattr(c, "_replicas", {})
    adapters.uninstall()
    adapters.install(RecordingListener())
    try:
        for cls, _ in SDK_METHODS:
            original = inspect.getattr_static(cls, "__stream__").__wrapped__
            assert c._replicas.get(original) is not None
    finally:
        adapters.uninstall()
