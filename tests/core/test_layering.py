"""The core's layering, read from its source: pure modules (the standard library and ``otelstream.names`` only, no
SDK, OTel, Prometheus, wrapt or httpx), no import cycle among them (``TYPE_CHECKING`` imports included), and the
protocol modules depend on the per-stream state, never on the tracker. Each module also imports on its own in a fresh
interpreter without pulling in a third-party package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import otelstream

ROOT = Path(otelstream.__file__).parent
CORE = ROOT / "core"
ALLOWED_OUTSIDE_CORE = {"otelstream", "otelstream.names"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(CORE.rglob("*.py"))}


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at run time or for type checking; ``from pkg import name`` counts as
    ``pkg.name`` when that is a module of the core."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, f"{path}: relative import"
            if node.module == "__future__":
                continue
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES)
    return found


GRAPH = {name: _imports(path) for name, path in MODULES.items()}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_core_module_imports_only_the_standard_library_and_names(module: str) -> None:
    outside = {
        m
        for m in GRAPH[module]
        if m not in MODULES and m not in ALLOWED_OUTSIDE_CORE and m.split(".")[0] not in sys.stdlib_module_names
    }
    assert not outside, f"{module} imports {sorted(outside)}"


def test_core_has_no_import_cycle() -> None:
    edges = {name: {m for m in deps if m in MODULES and m != name} for name, deps in GRAPH.items()}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            cycle = (*path[path.index(name) :], name)
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        for dep in sorted(edges[name]):
            visit(dep, (*path, name))
        done.add(name)

    for name in sorted(edges):
        visit(name, ())


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("otelstream.core.protocols")))
def test_protocol_modules_depend_on_the_state_not_the_tracker(module: str) -> None:
    assert "otelstream.core.tracker" not in GRAPH[module]


def test_each_core_module_imports_alone_without_third_party_packages() -> None:
    check = (
        "import importlib, sys; before = set(sys.modules); importlib.import_module(sys.argv[1]); "
        "bad = sorted(m for m in set(sys.modules) - before if m.split('.')[0] not in sys.stdlib_module_names "
        "and m.split('.')[0] != 'otelstream'); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    for module in sorted(MODULES):
        run = subprocess.run(
            [sys.executable, "-c", check, module], capture_output=True, text=True, cwd=ROOT.parent, check=False
        )
        assert run.returncode == 0, f"{module}: {run.stdout}{run.stderr}"
