"""``otelstream dashboards [DIR]``: write the shipped Grafana dashboards and Prometheus rules to a folder.

In a wheel the files live in the package as ``otelstream/_dashboards/`` (hatch force-includes the repository's
``dashboards/`` folder there); in a source or editable checkout they are read from the repository's
``dashboards/`` next to the package.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.10
    from importlib.abc import Traversable

DEFAULT_DIR = "otelstream-dashboards"
_SUFFIXES = (".json", ".yml", ".yaml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        nargs="?",
        default=DEFAULT_DIR,
        metavar="DIR",
        help=f"folder to write into, created if missing (default: ./{DEFAULT_DIR})",
    )
    parser.add_argument("--force", action="store_true", help="overwrite files that exist and differ")


def source_root() -> Traversable:
    """The folder holding ``grafana/`` and ``prometheus/``: packaged data first, then the source checkout."""
    packaged = resources.files("otelstream") / "_dashboards"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent / "dashboards"
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


def write(dest: Path, *, force: bool = False) -> tuple[list[Path], list[Path]]:
    """Write the shipped files under ``dest``. Returns (written, conflicts); conflicts are left untouched."""
    written: list[Path] = []
    conflicts: list[Path] = []
    for rel, content in shipped_files():
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


def run(args: argparse.Namespace) -> int:
    dest = Path(args.dir)
    try:
        written, conflicts = write(dest, force=bool(args.force))
    except (FileNotFoundError, OSError) as exc:
        print(f"otelstream dashboards: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    if conflicts:
        for path in conflicts:
            print(f"otelstream dashboards: {path} exists and differs; not overwritten (use --force)", file=sys.stderr)
        return 1
    print(
        f"Import {dest / 'grafana'}/*.json into Grafana (Dashboards → New → Import) and add "
        f"{dest / 'prometheus' / 'otelstream.rules.yml'} to rule_files in prometheus.yml.",
        file=sys.stderr,
    )
    return 0
