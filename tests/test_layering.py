"""The package's layering, read from its source (``tests/core/test_layering.py`` holds the core to purity): the
adapters and the export side never import each other, nothing imports a layer above its own, and no two modules
import each other at import time (``TYPE_CHECKING`` imports included; an import inside a function runs later and
is how an upper layer is reached on purpose, e.g. the self-check from ``instrumentation``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import otelstream

ROOT = Path(otelstream.__file__).parent

# each top-level module or package of otelstream, by layer: a module may import its own layer and those below
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"names", "distribution"}),
    frozenset({"core", "_guard", "_process"}),
    frozenset({"attribution", "config", "accelerator", "offline", "examples", "otel_env"}),
    frozenset({"adapters", "export"}),
    frozenset({"instrumentation", "doctor", "demo", "dashboards", "gunicorn", "probe"}),
    frozenset({"auto", "cli"}),
)
APART = ({"adapters", "export"},)  # the same layer, never importing each other: they meet only in instrumentation


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imported(node: ast.AST) -> set[str]:
    """The otelstream modules one import statement names (``from pkg import sub`` is the submodule, not ``pkg``)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        subs = {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES}
        if len(subs) < len(node.names) and node.module in MODULES:
            subs.add(node.module)
        return subs
    return set()


def _module_level(tree: ast.Module) -> set[str]:
    """Imports that run when the module is imported (under ``if`` / ``try`` at module level too)."""
    found: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        stmt = pending.pop()
        found |= _imported(stmt)
        if isinstance(stmt, (ast.If, ast.Try)):
            pending.extend(stmt.body)
            pending.extend(stmt.orelse)
            if isinstance(stmt, ast.Try):
                pending.extend(stmt.finalbody)
                for handler in stmt.handlers:
                    pending.extend(handler.body)
    return found


TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}
ALL_IMPORTS = {name: {m for node in ast.walk(tree) for m in _imported(node)} - {name} for name, tree in TREES.items()}
AT_IMPORT = {name: _module_level(tree) - {name} for name, tree in TREES.items()}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(top: str) -> int:
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise AssertionError(f"otelstream.{top} is in no layer of {__name__}.LAYERS: give it one")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _top(m)))
def test_no_import_reaches_a_layer_above(module: str) -> None:
    own = _layer(_top(module))
    above = sorted(m for m in ALL_IMPORTS[module] if _top(m) and _layer(_top(m)) > own)
    assert not above, f"{module} imports {above}, above its layer"


@pytest.mark.parametrize("pair", APART, ids=lambda p: " / ".join(sorted(p)))
def test_kept_apart(pair: set[str]) -> None:
    crossing = sorted(
        f"{module} -> {target}"
        for module, targets in ALL_IMPORTS.items()
        for target in targets
        if _top(module) in pair and _top(target) in pair and _top(module) != _top(target)
    )
    assert not crossing


def test_no_import_cycle() -> None:
    graph = {name: {m for m in deps if m in MODULES} for name, deps in AT_IMPORT.items()}
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(node) :], node]))
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, [*path, node])
        done.add(node)

    for name in sorted(graph):
        visit(name, [])


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        if _top(module):
            _layer(_top(module))
