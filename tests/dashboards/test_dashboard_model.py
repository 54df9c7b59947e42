"""The shipped Grafana dashboards: Grafana's dashboard JSON model, the variables, and docs/telemetry.md names only."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from otelstream import names
from tests.dashboards.harness import (
    ALERT_LABELS,
    ALERT_SCOPE,
    ALERT_SERIES,
    LABELS,
    SCOPE,
    SERIES,
    TEMPLATE_VARIABLES,
    dashboard_files,
    grouping_labels,
    iter_panels,
    label_names,
    load_dashboard,
    panel_queries,
    parse_label_values,
    selectors,
    series_names,
    variable_query,
)

DASHBOARDS = dashboard_files()
PROMETHEUS_DS = {"type": "prometheus", "uid": "${datasource}"}
# Options Grafana's Prometheus annotation support reads from the annotation itself (the schema's datasource-specific
# catch-all, which grafana-foundation-sdk does not model): the series labels that become title, text and tags.
PROMETHEUS_ANNOTATION_OPTIONS = frozenset({"step", "titleFormat", "textFormat", "tagKeys", "useValueForTime"})


def test_there_is_a_dashboard() -> None:
    assert DASHBOARDS, "no dashboards/grafana/*.json"


def _subset_diff(ours: Any, theirs: Any, path: str = "$") -> list[str]:
    """Where ``ours`` has something the model's re-serialisation lost or changed."""
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return [f"{path}: object became {type(theirs).__name__}"]
        out = []
        for key, value in ours.items():
            if key not in theirs:
                out.append(f"{path}.{key}: not part of Grafana's dashboard model")
            else:
                out += _subset_diff(value, theirs[key], f"{path}.{key}")
        return out
    if isinstance(ours, list):
        if not isinstance(theirs, list) or len(ours) != len(theirs):
            return [f"{path}: list changed"]
        return [
            d for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in _subset_diff(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [f"{path}: {ours!r} became {theirs!r}"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_round_trips_through_grafana_foundation_sdk(path: Path) -> None:
    """Load into grafana-foundation-sdk's generated models and re-serialise: nothing may be dropped or changed.

    The SDK's ``from_json`` keeps only fields of Grafana's dashboard schema (and the registered panel and
    Prometheus query schemas), so a misspelled or unknown key, a wrong nesting or a wrong type shows up here.
    """
    sdk = pytest.importorskip(
        "grafana_foundation_sdk",
        reason="grafana-foundation-sdk not installed (pip install 'grafana-foundation-sdk==1769699379!11.6.0')",
    )
    del sdk
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.cog.runtime import Runtime
    from grafana_foundation_sdk.models import dashboard as model

    register_default_plugins()
    raw = load_dashboard(path)
    parsed = model.Dashboard.from_json(raw)
    again = json.loads(json.dumps(parsed, cls=JSONEncoder))
    modelled = json.loads(json.dumps(raw))
    for annotation in modelled.get("annotations", {}).get("list", []):
        if annotation.get("datasource", {}).get("type") == "prometheus":
            for key in PROMETHEUS_ANNOTATION_OPTIONS:
                annotation.pop(key, None)
    assert _subset_diff(modelled, again) == []
    known_panels = set(Runtime().panelcfg_variants)
    for panel in iter_panels(raw):
        if panel["type"] != "row":
            assert panel["type"] in known_panels, panel["title"]
    for variable in raw["templating"]["list"]:
        model.VariableType(variable["type"])  # raises on a type Grafana does not have


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_structure(path: Path) -> None:
    dash = load_dashboard(path)
    for key in ("uid", "title", "schemaVersion", "panels", "templating", "time"):
        assert key in dash, key
    assert isinstance(dash["schemaVersion"], int) and dash["schemaVersion"] >= 36
    assert "id" not in dash or dash["id"] is None, "an exported id breaks import into another Grafana"
    ids = [p["id"] for p in iter_panels(dash)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in iter_panels(dash):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert grid["h"] > 0, panel["title"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_template_variables(path: Path) -> None:
    variables = {v["name"]: v for v in load_dashboard(path)["templating"]["list"]}
    datasource = variables["datasource"]
    assert datasource["type"] == "datasource" and datasource["query"] == "prometheus"
    for name in TEMPLATE_VARIABLES:
        var = variables[name]
        assert var["type"] == "query" and var["datasource"] == PROMETHEUS_DS, name
        assert var["multi"] and var["includeAll"], name
        # the All value must stay Grafana's regex of the values: a custom ".*" would hide a wrong label name
        assert not var.get("allValue"), name
        selector, label = parse_label_values(variable_query(var))
        assert label in LABELS, (name, label)
        assert series_names(selector) <= SERIES, (name, selector)
    assert parse_label_values(variable_query(variables["job"]))[1] == "job"
    assert parse_label_values(variable_query(variables["instance"]))[1] == "instance"
    # each variable's values are those of the ones before it (a model list for the chosen services, ...)
    order = [v["name"] for v in load_dashboard(path)["templating"]["list"]]
    assert [n for n in order if n in TEMPLATE_VARIABLES] == list(TEMPLATE_VARIABLES)
    for later, earlier in zip(TEMPLATE_VARIABLES[1:], TEMPLATE_VARIABLES, strict=False):
        assert f"${earlier}" in variable_query(variables[later]), (later, earlier)
    assert parse_label_values(variable_query(variables["provider"]))[1] == names.LABEL_PROVIDER
    assert parse_label_values(variable_query(variables["model"]))[1] == names.LABEL_MODEL
    assert parse_label_values(variable_query(variables["surface"]))[1] == names.LABEL_SURFACE


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_panel_has_a_description_and_uses_the_datasource_variable(path: Path) -> None:
    for panel in iter_panels(load_dashboard(path)):
        if panel["type"] == "row":
            continue
        title = panel["title"]
        assert len(panel.get("description", "")) >= 80, f"{title}: describe what it shows and what to do"
        assert "red" in panel["description"].lower(), f"{title}: say what to do when it turns red"
        assert panel["datasource"] == PROMETHEUS_DS, title
        assert panel["targets"], title
        for target in panel["targets"]:
            assert target["datasource"] == PROMETHEUS_DS, title


QUERIES = panel_queries()


def _is_alert_query(expr: str) -> bool:
    return any(series == ALERT_SERIES for series, _ in selectors(expr))


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.id)
def test_panel_query_uses_only_design_names(query: Any) -> None:
    used = series_names(query.expr)
    labels = label_names(query.expr)
    if _is_alert_query(query.expr):
        assert 'alertname=~"Otelstream.*"' in query.expr, f"{query.id}: only otelstream's alerts"
        assert labels <= LABELS | ALERT_LABELS, f"{query.id}: unknown labels {sorted(labels - LABELS - ALERT_LABELS)}"
        return
    assert used, f"{query.id}: names no otelstream series"
    assert used <= SERIES, f"{query.id}: unknown series {sorted(used - SERIES)}"
    assert labels <= LABELS, f"{query.id}: unknown labels {sorted(labels - LABELS)}"


def _scoped(expr: str) -> list[str]:
    """Selectors that do not start with the job and instance matchers (every query filters by both)."""
    wrong = []
    for series, selector in selectors(expr):
        scope = ALERT_SCOPE if series == ALERT_SERIES else SCOPE
        if not selector.startswith("{" + scope):
            wrong.append(f"{series}{selector}")
    return wrong


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.id)
def test_panel_query_filters_by_job_and_instance(query: Any) -> None:
    assert selectors(query.expr), query.id
    assert _scoped(query.expr) == [], query.id


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_alert_state_panel_and_annotations(path: Path) -> None:
    """Since when: a panel lists the otelstream alerts now, and an annotation marks each one firing on every panel."""
    dash = load_dashboard(path)
    alert_panels = [p for p in iter_panels(dash) if any(_is_alert_query(t["expr"]) for t in p.get("targets", []))]
    assert alert_panels, "no panel shows ALERTS"
    for panel in alert_panels:
        # empty is the healthy state here: say so instead of Grafana's "No data"
        assert panel["fieldConfig"]["defaults"].get("noValue"), panel["title"]
    annotations = [a for a in dash["annotations"]["list"] if a.get("datasource") == PROMETHEUS_DS]
    assert annotations, "no Prometheus annotation"
    for annotation in annotations:
        assert annotation["enable"] and _is_alert_query(annotation["expr"]), annotation["name"]
        assert 'alertstate="firing"' in annotation["expr"] and 'alertname=~"Otelstream.*"' in annotation["expr"]
        assert _scoped(annotation["expr"]) == [], annotation["name"]
        assert set(annotation) - {"datasource", "enable", "hide", "iconColor", "name", "expr"} <= (
            PROMETHEUS_ANNOTATION_OPTIONS
        )


def _unit(panel: dict[str, Any]) -> str:
    return str(panel.get("fieldConfig", {}).get("defaults", {}).get("unit", ""))


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_units_say_per_second_and_share(path: Path) -> None:
    """A rate panel reads "/s", a share "%"; a "No data" text is only for panels that are neither."""
    for panel in iter_panels(load_dashboard(path)):
        # what the panel shows is the expression before its zero fallback (a line starting with `or`)
        heads = [re.split(r"\n\s*or\b", t["expr"])[0] for t in panel.get("targets", [])]
        rated = [e for e in heads if "rate(" in e and "histogram_quantile" not in e]
        unit = _unit(panel)
        if rated:
            assert unit == "percentunit" or unit.endswith("/s"), (panel["title"], unit)
        if any(re.search(r"(^|\s)/(\s|$)", e) for e in rated):
            assert unit == "percentunit", panel["title"]
        if panel.get("fieldConfig", {}).get("defaults", {}).get("noValue"):
            assert not rated, f"{panel['title']}: a share or rate shows 0, not a no-value text"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_latency_panels_ask_for_exemplars(path: Path) -> None:
    """Every latency time series links its samples to traces (Prometheus needs exemplar storage for them)."""
    latency = [
        p
        for p in iter_panels(load_dashboard(path))
        if p["type"] == "timeseries" and any("histogram_quantile" in t["expr"] for t in p["targets"])
    ]
    assert len(latency) >= 5
    for panel in latency:
        assert all(t.get("exemplar") is True for t in panel["targets"]), panel["title"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_worst_first_tables(path: Path) -> None:
    """Bad-outcome share by surface, by model and the share by error class: current values, the worst first."""
    tables = {p["title"]: p for p in iter_panels(load_dashboard(path)) if p["type"] == "table"}
    by = {
        names.LABEL_SURFACE: "Bad-outcome share by surface, worst first",
        names.LABEL_MODEL: "Bad-outcome share by model, worst first",
        names.LABEL_ERROR_TYPE: "Share of streams by error class, worst first",
    }
    for label, title in by.items():
        panel = tables[title]
        (target,) = panel["targets"]
        assert target["instant"] and target["format"] == "table", title
        assert target["expr"].startswith("sort_desc("), title
        assert label in grouping_labels(target["expr"]), title
        assert _unit(panel) == "percentunit", title
        sorts = [t for t in panel["transformations"] if t["id"] == "sortBy"]
        assert sorts and all(s["desc"] for t in sorts for s in t["options"]["sort"]), title


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.id)
def test_panel_query_aggregates_across_processes(query: Any) -> None:
    """Every query sums (so several processes and hosts combine) and rates counters over $__rate_interval."""
    expr = query.expr
    # the rate-limit gauges hold each process's last value: the lowest over processes, not their sum
    lowest = names.PROM_RATELIMIT_REMAINING in expr and expr.startswith("min by (")
    assert "sum" in expr or lowest, f"{query.id}: aggregate with sum by (...)"
    grouped = grouping_labels(expr)
    if "by (instance)" not in expr and not _is_alert_query(expr):
        assert "instance" not in grouped, query.id
    if "rate(" in expr:
        assert "[$__rate_interval]" in expr, query.id
    for family in ("_bucket", "_total", "_sum", "_count"):
        for name in series_names(expr):
            if name.endswith(family):
                assert "rate(" in expr or "increase(" in expr, f"{query.id}: {name} is cumulative"


def test_dashboard_covers_every_design_series() -> None:
    """Each docs/telemetry.md series family appears in at least one panel."""
    used = {n for q in QUERIES for n in series_names(q.expr)}
    families = {n.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count") for n in used}
    expected = {
        names.PROM_OPERATION_DURATION,
        names.PROM_TOKEN_USAGE,
        names.PROM_TIME_TO_FIRST_CHUNK,
        names.PROM_TIME_PER_OUTPUT_CHUNK,
        names.PROM_STREAMS + "_total",
        names.PROM_TIME_TO_FIRST_EVENT,
        names.PROM_TIME_TO_FIRST_OUTPUT,
        names.PROM_MAX_WAIT,
        names.PROM_SEQUENCE_ANOMALIES + "_total",
        names.PROM_ANOMALIES + "_total",
        names.PROM_STREAMS_ACTIVE,
        names.PROM_STREAMS_STALLED,
        names.PROM_REPORTS_DROPPED + "_total",
        names.PROM_RATELIMIT_REMAINING,
        names.PROM_RATELIMIT_LIMIT,
        names.PROM_SELF_CHECK_FAILURES,
    }
    assert expected <= families, sorted(expected - families)


def test_bad_outcome_share_lists_exactly_the_bad_outcomes() -> None:
    bad = "|".join(names.BAD_OUTCOMES)
    shares = [q for q in QUERIES if q.panel.startswith(("Share of bad outcomes", "Bad-outcome share"))]
    assert len(shares) == 5
    for query in shares:
        assert f'outcome=~"{bad}"' in query.expr, query.id


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_the_bad_share_is_split_by_failure_phase(path: Path) -> None:
    """Beside the bad-outcome share: the same share per failure phase (could a retry be invisible to the user?)."""
    panels = list(iter_panels(load_dashboard(path)))
    titles = [p["title"] for p in panels]
    share = titles.index("Share of bad outcomes")
    panel = panels[share + 1]
    assert panel["title"] == "Share of bad outcomes by failure phase" and _unit(panel) == "percentunit"
    (target,) = panel["targets"]
    assert names.LABEL_PHASE in grouping_labels(target["expr"]) and target["legendFormat"] == "{{phase}}"
    for phase in names.FAILURE_PHASES:
        assert phase in panel["description"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_first_token_vs_first_answer_per_model_beside_ttfd(path: Path) -> None:
    """TTFD and TTFO side by side, per model, in the Latency row right after the TTFD panel."""
    panels = list(iter_panels(load_dashboard(path)))
    titles = [p["title"] for p in panels]
    exprs = [t["expr"] for t in panels[titles.index("First token vs first answer p95 by model")]["targets"]]
    assert [series_names(e) for e in exprs] == [
        {names.PROM_TIME_TO_FIRST_CHUNK + "_bucket"}, {names.PROM_TIME_TO_FIRST_OUTPUT + "_bucket"}]
    for expr in exprs:
        assert expr.startswith("histogram_quantile(0.95, ") and names.LABEL_MODEL in grouping_labels(expr)
    ttfd = titles.index("Time to first delta p50 / p95 / p99")
    assert titles[ttfd + 1] == "First token vs first answer p95 by model"
    grid = [p["gridPos"] for p in panels[ttfd : ttfd + 2]]
    assert grid[0]["y"] == grid[1]["y"] and grid[0]["x"] + grid[0]["w"] == grid[1]["x"]
