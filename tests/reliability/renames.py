"""Simulating an SDK release that renamed a method otelstream patches.

``rename(mp, Rename(...))`` moves the SDK's own method to a new name on its classes (the old attribute is gone, as
in the new release) and recompiles, from the SDK's own source, each caller with its references ``self.old`` /
``<call>.old`` changed to the new name: the SDK keeps working exactly as before, through the new name, and
otelstream finds nothing under the old one. The recompiled source is registered in ``linecache`` under its own file
name (``inspect.getsource`` then sees the changed source, as it would in a real new release). Everything is undone by
the ``MonkeyPatch``.
"""

from __future__ import annotations
import __future__

import functools
import inspect
import linecache
import re
import textwrap
import types
from dataclasses import dataclass
from typing import Any

import pytest

# a reference through an object: `self.old`, `copy(self).old`, `super(_owner, self).old` (never a bare name)
_QUALIFIED = r"(?:(?<=self\.)|(?<=\)\.))"


@dataclass(frozen=True)
class Rename:
    owners: tuple[type, ...]  # the classes defining `old` (each gets it under `new`)
    old: str
    new: str
    callers: tuple[tuple[Any, str], ...]  # (class or module, attribute name) whose code refers to `.old`


def _func_of(raw: Any) -> types.FunctionType:
    func = raw.func if isinstance(raw, functools.cached_property) else raw
    assert isinstance(func, types.FunctionType), raw
    return func


def _recompile(raw: Any, old: str, new: str, owner: Any) -> Any:
    func = _func_of(raw)
    src = textwrap.dedent(inspect.getsource(func))
    changed, n = re.subn(_QUALIFIED + re.escape(old) + r"\b", new, src)
    assert n, f"{func.__qualname__} does not refer to .{old}: not a caller"
    # compiled inside a function taking `__class__`, so that zero-argument super() in it resolves to the real class
    text = "def _rebuild(__class__):\n" + textwrap.indent(changed, "    ") + f"    return {func.__name__}\n"
    filename = f"<{func.__module__}.{func.__qualname__}, release with .{old} renamed .{new}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    code = compile(text, filename, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace: dict[str, Any] = {}
    exec(code, func.__globals__, namespace)
    rebuilt = namespace["_rebuild"](owner if isinstance(owner, type) else None)
    if isinstance(rebuilt, functools.cached_property) and isinstance(owner, type):
        rebuilt.__set_name__(owner, func.__name__)
    return rebuilt


def rename(mp: pytest.MonkeyPatch, r: Rename) -> None:
    for holder, name in r.callers:  # before the move: a caller may be one of the renamed methods itself
        raw = vars(holder)[name]
        mp.setattr(holder, name, _recompile(raw, r.old, r.new, holder))
    for cls in r.owners:
        method = vars(cls)[r.old]
        mp.delattr(cls, r.old)
        mp.setattr(cls, r.new, method, raising=False)
    for cls in r.owners:
        assert not hasattr(cls, r.old), f"{cls.__name__}.{r.old} still resolves (inherited?)"
