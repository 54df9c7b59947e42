"""``otelstream dashboards [DIR]``: write the shipped Grafana dashboards and Prometheus rules to a folder.

In a wheel the files live in the package as ``otelstream/_dashboards/`` (hatch force-includes the repository's
``dashboards/`` folder there); in a source or editable checkout they are read from the repository's
``dashboards/`` next to the package.

When the application names metric attributes (the ``metric_attributes`` setting, or ``--metric-attributes``), the
Grafana dashboards are written with one variable per attribute label, and every otelstream selector filters by it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.10
    from importlib.abc import Traversable

DEFAULT_DIR = "otelstream-dashboards"
_SUFFIXES = (".json", ".yml", ".yaml")
# Every otelstream selector of the shipped dashboards starts with these matchers (the model test holds them to it);
# ALERTS selectors use `"$instance|"` and are left alone: alerts carry no application attributes.
_SCOPE = 'job=~"$job", instance=~"$instance"'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        nargs="?",
        default=DEFAULT_DIR,
        metavar="DIR",
        help=f"folder to write into, created if missing (default: ./{DEFAULT_DIR})",
    )
    parser.add_argument("--force", action="store_true", help="overwrite files that exist and differ")
    parser.add_argument(
        "--metric-attributes",
        metavar="KEYS",
        default=None,
        help="comma-separated application attribute keys your metrics carry as labels (default: the "
        "metric_attributes setting); the dashboards get one variable each",
    )


def attribute_labels(keys: str | tuple[str, ...] | list[str]) -> list[str]:
    """The label of each application attribute key, exactly as the metric sinks name it; a key they would refuse
    (reserved, another key's label) is an error here."""
    from otelstream.attribution import valid_key
    from otelstream.export.points import Schema, attribute_label

    items = [k.strip() for k in (keys.split(",") if isinstance(keys, str) else keys) if k.strip()]
    for key in items:
        why = valid_key(key)
        if why is not None:
            raise ValueError(f"metric attribute {key!r}: {why}")
    kept, refused = Schema.usable(tuple(dict.fromkeys(items)))
    if refused:
        raise ValueError("; ".join(f"metric attribute {key!r}: {why}" for key, why in refused))
    return [attribute_label(key) for key in kept]


def _configured_labels() -> list[str]:
    """The labels of the ``metric_attributes`` setting (its environment form)."""
    from otelstream import config

    return attribute_labels(config.load().metric_attributes)


def with_attribute_variables(content: bytes, labels: list[str]) -> bytes:
    """A Grafana dashboard with one variable per attribute label (after ``surface``) that every selector uses.

    The variable's All is ``.*``, not Grafana's list of values: streams started outside any ``attributes()`` block
    have the label empty, and a list of the values would hide them.
    """
    if not labels:
        return content
    dashboard = json.loads(content)
    variables = dashboard["templating"]["list"]
    taken = {v["name"] for v in variables}
    clash = sorted(taken.intersection(labels))
    if clash:
        raise ValueError(f"metric attribute label(s) {', '.join(clash)} would shadow a dashboard variable")
    datasource = {"type": "prometheus", "uid": "${datasource}"}
    added = [
        {
            "type": "query",
            "name": label,
            "label": label,
            "description": f"The application attribute {label} (metric_attributes), capped per process: "
            "extra values show as _OTHER; empty for streams started without it.",
            "datasource": datasource,
            "query": {
                "query": f"label_values(otelstream_streams_total{{{_SCOPE}}}, {label})",
                "refId": f"{label}-query",
                "qryType": 1,
            },
            "refresh": 2,
            "multi": True,
            "includeAll": True,
            "allValue": ".*",
            "sort": 1,
            "regex": "",
            "hide": 0,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "options": [],
        }
        for label in labels
    ]
    names = [v["name"] for v in variables]
    at = names.index("surface") + 1 if "surface" in names else len(variables)
    variables[at:at] = added
    scope = _SCOPE + "".join(f', {label}=~"${label}"' for label in labels)

    def panels(items: list[Any]) -> None:
        for panel in items:
            for target in panel.get("targets", []):
                target["expr"] = target["expr"].replace(_SCOPE + ",", scope + ",").replace(_SCOPE + "}", scope + "}")
            panels(panel.get("panels", []))

    panels(dashboard.get("panels", []))
    return (json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


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


def write(dest: Path, *, force: bool = False, labels: list[str] | None = None) -> tuple[list[Path], list[Path]]:
    """Write the shipped files under ``dest`` (the dashboards with a variable per attribute label).

    Returns (written, conflicts); conflicts are left untouched."""
    written: list[Path] = []
    conflicts: list[Path] = []
    for rel, shipped in shipped_files():
        content = with_attribute_variables(shipped, labels) if labels and rel.endswith(".json") else shipped
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
        keys = getattr(args, "metric_attributes", None)
        labels = _configured_labels() if keys is None else attribute_labels(keys)
        written, conflicts = write(dest, force=bool(args.force), labels=labels)
    except (FileNotFoundError, OSError, ValueError) as exc:
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
