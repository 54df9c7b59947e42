"""The shipped dashboards and rules: where they are (packaged, or the checkout's ``dashboards/``), the files as
written for the settings asked, and writing them to a folder without clobbering edits."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from otelstream import names
from otelstream.dashboards.attribute_variables import with_attribute_variables
from otelstream.dashboards.rule_settings import RuleSettings, with_rule_settings
from otelstream.dashboards.semconv_queries import with_semconv

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.10
    from importlib.abc import Traversable

_SUFFIXES = (".json", ".yml", ".yaml")


def source_root() -> Traversable:
    """The folder holding ``grafana/`` and ``prometheus/``: packaged data first, then the source checkout."""
    packaged = resources.files("otelstream") / "_dashboards"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "dashboards"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError("the otelstream dashboards are not installed with this package")


def shipped_files(root: Traversable | None = None) -> list[tuple[str, bytes]]:
    """Every shipped dashboard and rules file as (relative posix path, content), sorted by path."""
    base = source_root() if root is None else root
    return sorted(_walk(base, ""))


def _walk(node: Traversable, prefix: str) -> Iterator[tuple[str, bytes]]:
    for child in node.iterdir():
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            if not child.name.startswith((".", "_")):
                yield from _walk(child, rel + "/")
        elif child.name.endswith(_SUFFIXES):
            yield rel, child.read_bytes()


def rendered_files(
    labels: list[str] | None = None, settings: RuleSettings | None = None, semconv: str = names.SEMCONV_DEFAULT
) -> list[tuple[str, bytes]]:
    """The shipped files as written: queries for the ``semconv`` conventions' series, dashboards with a variable per
    attribute label, rules with the settings (their unit tests only for the default settings, which they test)."""
    settings = settings or RuleSettings()
    out = []
    for rel, shipped in shipped_files():
        content = with_semconv(rel, shipped, semconv)
        if labels and rel.endswith(".json"):
            content = with_attribute_variables(content, labels)
        elif rel.endswith(".test.yml"):
            if not settings.default:
                continue
        elif rel.endswith((".yml", ".yaml")):
            content = with_rule_settings(content, settings)
        out.append((rel, content))
    return out


def write(
    dest: Path, *, force: bool = False, labels: list[str] | None = None, settings: RuleSettings | None = None,
    semconv: str = names.SEMCONV_DEFAULT,
) -> tuple[list[Path], list[Path]]:  # fmt: skip
    """Write the shipped files under ``dest`` (for the ``semconv`` conventions' series, the dashboards with a variable
    per attribute label, the rules with the settings). Returns (written, conflicts); conflicts are left untouched."""
    return write_all(dest, rendered_files(labels, settings, semconv), force)


def write_all(dest: Path, files: list[tuple[str, bytes]], force: bool) -> tuple[list[Path], list[Path]]:
    """Each (relative path, content) under ``dest``; a file there that differs is a conflict, left as it is unless
    ``force``. Returns (written or already identical, conflicts)."""
    written: list[Path] = []
    conflicts: list[Path] = []
    for rel, content in files:
        target = dest.joinpath(*rel.split("/"))
        if target.exists() and not force:
            if target.is_file() and target.read_bytes() == content:
                written.append(target)
            else:
                conflicts.append(target)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        written.append(target)
    return written, conflicts
