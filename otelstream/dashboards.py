"""``otelstream dashboards [DIR]``: write the shipped Grafana dashboards and Prometheus rules to a folder.

In a wheel the files live in the package as ``otelstream/_dashboards/`` (hatch force-includes the repository's
``dashboards/`` folder there); in a source or editable checkout they are read from the repository's
``dashboards/`` next to the package.

When the application names metric attributes (the ``metric_attributes`` setting, or ``--metric-attributes``), the
Grafana dashboards are written with one variable per attribute label, and every otelstream selector filters by it.
The rules are written with the ``slo_objective`` and ``stall_threshold_s`` settings (the error budget, and the
stalled alert's ``for:``, which is the stall threshold); their unit tests hold for the defaults, so with other values
the ``*.test.yml`` files are not written.

``--k8s DIR`` also writes the same rules as a prometheus-operator ``PrometheusRule``, a ``ServiceMonitor`` for the
pods' ``metrics`` port, and the dashboards as a ``ConfigMap`` the Grafana sidecar imports (docs/kubernetes.md).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from otelstream import names

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.10
    from importlib.abc import Traversable

DEFAULT_DIR = "otelstream-dashboards"
_SUFFIXES = (".json", ".yml", ".yaml")
# Every otelstream selector of the shipped dashboards starts with these matchers (the model test holds them to it);
# ALERTS selectors use `"$instance|"` and are left alone: alerts carry no application attributes.
_SCOPE = 'job=~"$job", instance=~"$instance"'
# series of a process, not of its streams: they carry no application attribute, which a filter on one would hide
_PROCESS_SERIES = (names.PROM_SELF_CHECK_FAILURES,)


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
        "--k8s",
        metavar="K8S_DIR",
        default=None,
        help="also write Kubernetes manifests there: a PrometheusRule, a ServiceMonitor and a Grafana dashboard "
        "ConfigMap (sidecar label grafana_dashboard=1)",
    )
    parser.add_argument(
        "--slo-objective",
        type=float,
        default=None,
        help="share of streams that must end well over 30 days, for the error-budget alerts (default: the "
        "slo_objective setting, 0.99)",
    )
    parser.add_argument(
        "--stall-threshold-s",
        type=float,
        default=None,
        help="the stall threshold the services use (the stalled alert waits as long again; default: the "
        "stall_threshold_s setting, 30)",
    )
    parser.add_argument(
        "--semconv",
        choices=names.SEMCONV_MODES,
        default=None,
        help="the GenAI semantic conventions your services emit (default: the semconv setting, read from "
        f"{names.SEMCONV_ENV}): latest queries the v0.1.0 gen_ai.client.inference.* series, dup reads them and "
        "falls back to the default ones",
    )
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


def _configured_semconv() -> str:
    """The ``semconv`` setting (``OTEL_SEMCONV_STABILITY_OPT_IN``, as the services read it)."""
    from otelstream import config

    return config.load().semconv


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
                if any(series in target["expr"] for series in _PROCESS_SERIES):
                    continue
                target["expr"] = target["expr"].replace(_SCOPE + ",", scope + ",").replace(_SCOPE + "}", scope + "}")
            panels(panel.get("panels", []))

    panels(dashboard.get("panels", []))
    return (json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


_OBJECTIVE_LINE = re.compile(r"\* [0-9.]+(  # setting: slo_objective)")
_STALL_FOR_LINE = re.compile(r"for: [0-9a-z.]+(  # setting: stall_threshold_s)")


@dataclass(frozen=True)
class RuleSettings:
    """The settings the shipped rules are written with (the defaults: exactly the shipped file)."""

    slo_objective: float = 0.99
    stall_threshold_s: float = 30.0

    @property
    def default(self) -> bool:
        return self == RuleSettings()


def rule_settings(slo_objective: float | None = None, stall_threshold_s: float | None = None) -> RuleSettings:
    """The arguments, else the settings (``OTELSTREAM_SLO_OBJECTIVE``, ``OTELSTREAM_STALL_THRESHOLD_S``), validated
    as ``instrument()`` validates them."""
    from otelstream import config

    cfg = config.load({"slo_objective": slo_objective, "stall_threshold_s": stall_threshold_s})
    return RuleSettings(cfg.slo_objective, cfg.stall_threshold_s)


def with_rule_settings(content: bytes, settings: RuleSettings) -> bytes:
    """The rules file with the objective and the stalled alert's wait (the stall threshold, whole seconds) set."""
    text = content.decode("utf-8")
    text = _OBJECTIVE_LINE.sub(lambda m: f"* {settings.slo_objective:g}{m.group(1)}", text)
    wait = max(1, math.ceil(settings.stall_threshold_s))
    text = _STALL_FOR_LINE.sub(lambda m: f"for: {wait}s{m.group(1)}", text)
    return text.encode("utf-8")


# --- the semantic-convention versions (--semconv) -----------------------------------------------------------------
# The shipped files query the default conventions' gen_ai.client.* series. For `latest` each such query is rewritten
# to the v0.1.0 series; for `dup` to the new series `or` the old, each aggregated first, so where a process emits both
# they are never added up, and a fleet still mid-migration (some processes on either) is read whole.
_OLD_FAMILIES = (*names.SEMCONV_RENAMED, names.PROM_TOKEN_USAGE)
_OLD = "|".join(re.escape(f) for f in _OLD_FAMILIES)
_SUFFIX = r"(?P<suffix>_bucket|_sum|_count)"
_OLD_SERIES = re.compile(rf"\b(?:{_OLD}){_SUFFIX}?\b")
# `sum [by|without (...)] (rate(series{...}[range]))`: every query of a gen_ai.client.* series in the shipped files has
# this form (a test holds them to it)
_AGGREGATE = re.compile(
    rf"(?P<agg>sum(?:\s*(?:by|without)\s*\([^)]*\))?)\s*\(\s*rate\((?P<family>{_OLD}){_SUFFIX}"
    rf"(?P<sel>\{{[^}}]*\}})?\[(?P<range>[^\]]+)\]\)\s*\)"
)
# a rule test's input series (a `- series:` line and its `values:` line)
_SERIES_ITEM = re.compile(
    rf"^(?P<indent>[ \t]*)- series: '(?P<family>{_OLD}){_SUFFIX}(?P<sel>\{{[^']*\}})'\n"
    r"(?P<vindent>[ \t]*)values: '(?P<values>[^']*)'\n",
    re.M,
)
_TOKEN_TYPE = re.compile(rf'{names.LABEL_TOKEN_TYPE}="(?P<kind>[a-z]+)"')
_USAGE_COUNTERS = {
    names.TOKEN_TYPE_INPUT: names.PROM_USAGE_INPUT_TOKENS,
    names.TOKEN_TYPE_OUTPUT: names.PROM_USAGE_OUTPUT_TOKENS,
}
_DOTTED_RENAMED = {
    names.OTEL_OPERATION_DURATION: names.OTEL_INFERENCE_DURATION,
    names.OTEL_TIME_TO_FIRST_CHUNK: names.OTEL_INFERENCE_TIME_TO_FIRST_CHUNK,
    names.OTEL_TIME_PER_OUTPUT_CHUNK: names.OTEL_INFERENCE_TIME_PER_OUTPUT_CHUNK,
}


def _without_token_type(selector: str) -> tuple[str | None, str]:
    """(the token type a selector names, the selector without that matcher)."""
    found = _TOKEN_TYPE.search(selector)
    if found is None:
        return None, selector
    rest = (selector[: found.start()] + selector[found.end() :]).replace("{, ", "{").replace(", }", "}")
    rest = re.sub(r",\s*,", ",", rest)
    return found["kind"], "" if rest == "{}" else rest


def _usage_counter(kind: str) -> str:
    if kind not in _USAGE_COUNTERS:
        raise ValueError(f"no usage counter for the token type {kind!r}")
    return _USAGE_COUNTERS[kind]


def _latest_query(m: re.Match[str]) -> str:
    """The latest conventions' form of one `sum ... (rate(...))` of a default series."""
    agg, family, suffix, sel, window = m["agg"], m["family"], m["suffix"], m["sel"] or "", m["range"]
    if family != names.PROM_TOKEN_USAGE:
        return f"{agg} (rate({names.SEMCONV_RENAMED[family]}{suffix}{sel}[{window}]))"
    if suffix != "_sum":
        # a distribution across token types has no counterpart: the per-call histograms are one per type
        raise ValueError(f"{family}{suffix} has no counterpart under the latest conventions")
    kind, rest = _without_token_type(sel)
    if kind is not None:
        return f"{agg} (rate({_usage_counter(kind)}_total{rest}[{window}]))"
    # the token types are separate counters now; their label is put back, so a grouping by it still works
    parts = " or ".join(
        f'label_replace(rate({counter}_total{sel}[{window}]), "{names.LABEL_TOKEN_TYPE}", "{kind}", "", "")'
        for kind, counter in _USAGE_COUNTERS.items()
    )
    return f"{agg} ({parts})"


def _dup_query(m: re.Match[str]) -> str:
    old = re.sub(r"\s*\n\s*", " ", m[0]).replace("( ", "(").replace(" )", ")")
    return f"({_latest_query(m)} or {old})"


def _latest_series(m: re.Match[str]) -> str:
    """A rule test's input series under the latest conventions' name (same values)."""
    family, suffix, sel = m["family"], m["suffix"], m["sel"]
    if family != names.PROM_TOKEN_USAGE:
        name = names.SEMCONV_RENAMED[family] + suffix
    else:
        kind, sel = _without_token_type(sel)
        if suffix != "_sum" or kind is None:
            raise ValueError(f"{family}{suffix}{m['sel']} has no counterpart under the latest conventions")
        name = _usage_counter(kind) + "_total"
        modality = f'{names.LABEL_TOKEN_MODALITY}="{names.TOKEN_MODALITY_UNKNOWN}"'
        sel = "{" + modality + "}" if not sel else sel[:-1] + "," + modality + "}"
    return f"{m['indent']}- series: '{name}{sel}'\n{m['vindent']}values: '{m['values']}'\n"


def with_semconv(rel: str, content: bytes, semconv: str) -> bytes:
    """A shipped file for the gen_ai.client.* series of ``semconv`` (``names.SEMCONV_*``): the default conventions'
    as shipped; ``latest``: the v0.1.0 series; ``dup``: the v0.1.0 series or, where a process emits none, the default
    ones (a rule test's input series are then given under both names: the results must not change)."""
    if semconv == names.SEMCONV_DEFAULT:
        return content
    if semconv not in names.SEMCONV_MODES:
        raise ValueError(f"semconv {semconv!r}: one of {', '.join(names.SEMCONV_MODES)}")
    query = _latest_query if semconv == names.SEMCONV_LATEST else _dup_query
    if rel.endswith(".json"):
        dashboard = json.loads(content)
        exprs = []

        def panels(items: list[Any]) -> None:
            for panel in items:
                for target in panel.get("targets", []):
                    target["expr"] = _AGGREGATE.sub(query, target["expr"])
                    exprs.append(target["expr"])
                panels(panel.get("panels", []))

        panels(dashboard.get("panels", []))
        text = json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"
        left = "\n".join(exprs)
    else:
        text = _AGGREGATE.sub(query, content.decode("utf-8"))
        if semconv == names.SEMCONV_LATEST:
            text = _SERIES_ITEM.sub(_latest_series, text)
        else:
            text = _SERIES_ITEM.sub(lambda m: _latest_series(m) + m[0], text)
        left = re.sub(r"#[^\n]*", "", text)  # comments may name the old series: they query nothing
    if semconv == names.SEMCONV_LATEST:
        stray = sorted({m[0] for m in _OLD_SERIES.finditer(left)})
        if stray:  # a query of a form the rewrite does not know: better no file than one that reads nothing
            raise ValueError(f"{rel}: no latest-conventions rewrite for {', '.join(stray)}")
        for old, new in _DOTTED_RENAMED.items():
            text = text.replace(old, new)
    return text.encode("utf-8")


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
    return _write_all(dest, rendered_files(labels, settings, semconv), force)


def _write_all(dest: Path, files: list[tuple[str, bytes]], force: bool) -> tuple[list[Path], list[Path]]:
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


# --- Kubernetes (prometheus-operator and the Grafana sidecar) ---------------------------------------------------
K8S_NAME = "otelstream"
K8S_SCRAPE_LABEL = "otelstream.io/scrape"  # the label a Service carries for the ServiceMonitor to select it
GRAFANA_SIDECAR_LABEL = "grafana_dashboard"  # the Grafana Helm chart's sidecar default: ConfigMaps with it are loaded
K8S_FILES = ("prometheusrule.yaml", "servicemonitor.yaml", "grafana-dashboards.yaml")
_K8S_LABELS = f"""    app.kubernetes.io/name: {K8S_NAME}
    app.kubernetes.io/part-of: {K8S_NAME}
"""


def k8s_manifests(files: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """(file name, YAML) of the three manifests, from the rendered files. The rule groups are the rules file's own
    text, indented under ``spec:`` (the same groups, comments and all); each dashboard JSON is a block scalar."""
    rules = next(c for rel, c in files if rel.endswith(".rules.yml")).decode("utf-8")
    groups = rules[rules.index("\ngroups:") + 1 :]
    rule = (
        "# otelstream's recording and alerting rules (the same groups as prometheus/otelstream.rules.yml).\n"
        "# prometheus-operator loads it when its ruleSelector matches these labels (kube-prometheus-stack: add\n"
        "# `release: <its release name>`).\n"
        f"apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: {K8S_NAME}\n"
        f"  labels:\n{_K8S_LABELS}spec:\n" + _indent(groups, 2)
    )
    monitor = (
        "# Scrapes /metrics on the port named `metrics` of every Service labelled otelstream.io/scrape=\"true\"\n"
        "# in the namespace it is applied to (the pods set OTELSTREAM_PROMETHEUS_PORT and\n"
        "# OTELSTREAM_PROMETHEUS_ADDR=0.0.0.0).\n"
        f"apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: {K8S_NAME}\n"
        f"  labels:\n{_K8S_LABELS}spec:\n  selector:\n    matchLabels:\n      {K8S_SCRAPE_LABEL}: \"true\"\n"
        "  endpoints:\n    - port: metrics\n      path: /metrics\n      interval: 30s\n"
    )
    data = "".join(
        f"  {rel.rsplit('/', 1)[-1]}: |\n" + _indent(content.decode("utf-8"), 4)
        for rel, content in files
        if rel.endswith(".json")
    )
    dashboards = (
        "# The Grafana dashboards, for the Grafana sidecar (grafana Helm chart: sidecar.dashboards.enabled=true,\n"
        f"# default label {GRAFANA_SIDECAR_LABEL}).\n"
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {K8S_NAME}-dashboards\n  labels:\n{_K8S_LABELS}"
        f"    {GRAFANA_SIDECAR_LABEL}: \"1\"\ndata:\n" + data
    )
    return [(name, text.encode("utf-8")) for name, text in zip(K8S_FILES, (rule, monitor, dashboards), strict=True)]


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "".join(pad + line if line.strip() else "\n" for line in text.splitlines(keepends=True))


def run(args: argparse.Namespace) -> int:
    dest = Path(args.dir)
    try:
        keys = getattr(args, "metric_attributes", None)
        labels = _configured_labels() if keys is None else attribute_labels(keys)
        settings = rule_settings(getattr(args, "slo_objective", None), getattr(args, "stall_threshold_s", None))
        semconv = getattr(args, "semconv", None) or _configured_semconv()
        files = rendered_files(labels, settings, semconv)
        written, conflicts = _write_all(dest, files, bool(args.force))
        k8s = getattr(args, "k8s", None)
        if k8s is not None:
            k8s_written, k8s_conflicts = _write_all(Path(k8s), k8s_manifests(files), bool(args.force))
            written += k8s_written
            conflicts += k8s_conflicts
        if not settings.default:
            print("otelstream dashboards: the rule tests (*.test.yml) hold for the default settings only; not written",
                  file=sys.stderr)  # fmt: skip
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
