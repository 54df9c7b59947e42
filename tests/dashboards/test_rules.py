"""The shipped Prometheus rules: promtool accepts them, their unit tests pass, and they use docs/telemetry.md names."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from otelstream import names
from tests.dashboards.harness import (
    DASHBOARDS,
    LABELS,
    RULES_FILE,
    SERIES,
    alerting_rules,
    label_names,
    recorded_names,
    recording_rules,
    series_names,
    tool,
)

pytest.importorskip("yaml", reason="pyyaml not installed (it is in the test extra)")

EXPECTED_ALERTS = {
    "OtelstreamBadOutcomeRatioHigh",
    "OtelstreamRateLimited",
    "OtelstreamProviderOutage",
    "OtelstreamCutStreams",
    "OtelstreamIncompleteRatioHigh",
    "OtelstreamAbandonedRatioHigh",
    "OtelstreamTrafficStopped",
    "OtelstreamTimeToFirstDeltaSLO",
    "OtelstreamStreamsStalled",
    "OtelstreamSequenceAnomalies",
    "OtelstreamReportsDropped",
    "OtelstreamErrorBudgetBurn",
    "OtelstreamErrorBudgetBurnSlow",
    "OtelstreamRateLimitHeadroomLow",
    "OtelstreamSelfCheckFailed",
    "OtelstreamProbeFailing",
}
RULE_TESTS = sorted((DASHBOARDS / "prometheus").glob("*.test.yml"))


def _promtool() -> str:
    path = tool("promtool")
    if path is None:
        pytest.skip("promtool not installed (Debian: apt-get install prometheus)")
    return path


@pytest.mark.prometheus
def test_promtool_check_rules() -> None:
    done = subprocess.run([_promtool(), "check", "rules", str(RULES_FILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@pytest.mark.prometheus
@pytest.mark.parametrize("test_file", RULE_TESTS, ids=lambda p: p.name)
def test_promtool_test_rules(test_file: Any) -> None:
    done = subprocess.run(
        [_promtool(), "test", "rules", test_file.name], cwd=test_file.parent, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_rule_unit_tests_cover_every_alert_firing_and_silent() -> None:
    import yaml

    firing: set[str] = set()
    silent: set[str] = set()
    for test_file in RULE_TESTS:
        for group in yaml.safe_load(test_file.read_text(encoding="utf-8"))["tests"]:
            for case in group.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    assert firing >= EXPECTED_ALERTS, sorted(EXPECTED_ALERTS - firing)
    assert silent >= EXPECTED_ALERTS, sorted(EXPECTED_ALERTS - silent)


def test_alerts_have_for_severity_and_runbook() -> None:
    alerts = alerting_rules()
    assert {a["alert"] for a in alerts} == EXPECTED_ALERTS
    for alert in alerts:
        assert re.fullmatch(r"\d+[smh]", str(alert.get("for", ""))), alert["alert"]
        assert alert["labels"]["severity"] in ("critical", "warning"), alert["alert"]
        for key in ("summary", "description", "runbook"):
            assert alert["annotations"].get(key), (alert["alert"], key)
        assert "# threshold:" in alert["expr"], f"{alert['alert']}: mark the threshold for users to change"


def test_rules_use_only_design_names() -> None:
    recorded = {r["record"] for r in recording_rules()}
    for rule in recording_rules() + alerting_rules():
        expr = rule["expr"]
        name = rule.get("record") or rule["alert"]
        assert series_names(expr) <= SERIES, (name, sorted(series_names(expr) - SERIES))
        assert recorded_names(expr) <= recorded, (name, sorted(recorded_names(expr) - recorded))
        assert label_names(expr) <= LABELS, (name, sorted(label_names(expr) - LABELS))


def test_latency_slo_sits_on_a_bucket_boundary() -> None:
    """The TTFD SLO counts samples above an `le` boundary that exists in the histogram's buckets."""
    boundaries = {f"{b:g}" for b in names.TTFD_BUCKETS} | {"+Inf"}
    les = set()
    for rule in recording_rules() + alerting_rules():
        les |= set(re.findall(r'le="([^"]+)"', rule["expr"]))
    assert les and les <= boundaries, sorted(les - boundaries)
    slo = next(r for r in recording_rules() if r["record"] == "gen_ai:time_to_first_chunk:ratio_above_slo_rate5m")
    assert names.PROM_TIME_TO_FIRST_CHUNK in slo["expr"] or "time_to_first_chunk_seconds_bucket" in slo["expr"]
    assert "histogram_quantile" not in slo["expr"]


def test_bad_outcome_rule_lists_exactly_the_bad_outcomes() -> None:
    rule = next(r for r in recording_rules() if r["record"] == "otelstream:streams_bad:ratio_rate5m")
    assert f'outcome=~"{"|".join(names.BAD_OUTCOMES)}"' in rule["expr"]


def test_class_rules_use_the_closed_error_classes() -> None:
    """The rate-limited and outage shares split the error classes the way the docs name them, and never overlap."""
    exprs = {r["record"]: r["expr"] for r in recording_rules()}
    limited = re.findall(r'error_type=~"([^"]+)"', exprs["otelstream:streams_rate_limited:ratio_rate5m"])
    outage = re.findall(r'error_type=~"([^"]+)"', exprs["otelstream:streams_outage:ratio_rate5m"])
    assert limited == [f"{names.EC_RATE_LIMITED}|{names.EC_QUOTA_EXCEEDED}"]
    assert outage == ["|".join((names.EC_SERVER_ERROR, names.EC_OVERLOADED, names.EC_TIMEOUT, names.EC_CONNECTION))]
    assert set(limited[0].split("|")).isdisjoint(outage[0].split("|"))
    assert set(limited[0].split("|")) | set(outage[0].split("|")) <= set(names.ERROR_CLASSES)


# the labels that tell Gemini and Bedrock streams from the others: a literal matcher on one would select or exclude
# surfaces or providers (the dashboard's own variables, "$surface" and "$provider", select them all by default)
_SCOPING = re.compile(r'\b(surface|gen_ai_provider_name|gen_ai_operation_name)\s*(=~|!~|!=|=)\s*"([^"]*)"')


def test_no_rule_or_panel_selects_surfaces_or_providers_by_name() -> None:
    """The shipped rules and dashboards work unchanged for the generate_content and converse surfaces (and the
    gcp.gemini, gcp.vertex_ai and aws.bedrock providers): nothing in them names a surface, provider or operation."""
    from tests.dashboards.harness import dashboard_files, load_dashboard

    exprs = [r["expr"] for r in recording_rules() + alerting_rules()]
    for path in dashboard_files():
        exprs += list(_queries(load_dashboard(path)))
    found = [(label, op, value) for e in exprs for label, op, value in _SCOPING.findall(e)]
    literal = sorted({m for m in found if not m[2].startswith("$")})
    assert not literal, literal
    assert ("surface", "=~", "$surface") in found  # the matcher finds the variable's matcher where it is


def test_rule_unit_tests_fire_on_the_gemini_and_bedrock_surfaces() -> None:
    import yaml

    fired: set[str] = set()
    for test_file in RULE_TESTS:
        for group in yaml.safe_load(test_file.read_text(encoding="utf-8"))["tests"]:
            for case in group.get("alert_rule_test", []):
                fired |= {str(a["exp_labels"].get("surface")) for a in case.get("exp_alerts", [])}
    assert {names.GENERATE_CONTENT, names.CONVERSE} <= fired, fired


def _queries(node: Any) -> Iterator[str]:
    """Every PromQL string of a dashboard: panel targets' and annotations' ``expr``, variables' ``query``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query") and isinstance(value, str):
                yield value
            else:
                yield from _queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from _queries(item)
