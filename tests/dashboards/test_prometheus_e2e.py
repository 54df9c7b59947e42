"""End to end: a real Prometheus scrapes otelstream under three loads at once, one scrape job each (as two services
using otelstream are told apart): a fault mix, the demo and a healthy mix.

For the fault mixes every dashboard query, variable and recording rule returns data through the HTTP API, the
latency panels' exemplars link to traces, and the alerts reach pending or firing. For the healthy mix every panel
returns data too (a share or failure rate shows 0, never "No data") except the alert table, which is empty and says
so; no alert is pending; and when its load stops, the traffic alert fires.

The loads are otelstream itself: ``instrumented_worker.py`` (the demo's fake provider, the OpenAI and Anthropic SDKs
under ``otelstream.instrument()`` and otelstream's metrics endpoint in a subprocess; its fault mix trips every alert
but the traffic one) twice, and ``otelstream demo --serve`` (every surface: Gemini's generate_content and Bedrock's
converse too; the alerts its mix trips; not below the demo's openai floor, where its scenario skips). With the
dashboard's surface and model variables set to the Gemini and Bedrock ones alone, every panel that is not about
something those clouds lack shows their data. One series cannot be produced on demand
(``otelstream_reports_dropped_total`` needs a full export queue): a stand-in endpoint serves only that one as a second
target of the fault jobs.

The traffic alert compares with the hour before; Prometheus also runs a copy of it with every duration divided by
60 (10 s for 10 min), labelled ``time_scale``, so it fires within seconds of the load stopping.

Needs the ``prometheus`` binary (Debian: ``apt-get install prometheus``); skipped with that reason without it.
About 45 s: the loads and Prometheus start, ~15 s of 1-second scrapes, the queries, ~15 s after the load stops.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from otelstream import names
from otelstream.dashboards import attribute_variables, shipped
from otelstream.demo.plan import MODEL_BY_SURFACE
from tests.dashboards.designload import DesignLoad
from tests.dashboards.harness import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    RULES_FILE,
    TEMPLATE_VARIABLES,
    PanelQuery,
    Prometheus,
    alerting_rules,
    dashboard_files,
    has_finite_value,
    iter_panels,
    load_dashboard,
    panel_queries,
    parse_label_values,
    recording_rules,
    regex_alternation,
    substitute,
    tool,
    variable_query,
)
from tests.dashboards.loadsource import LoadSource, start_load
from tests.support.sdk_features import DEMO_SDK, WITHOUT_DEMO_SDK

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.skipif(
        tool("prometheus") is None, reason="prometheus not installed (Debian: apt-get install prometheus)"
    ),
    pytest.mark.timeout(180),
]

RATE_INTERVAL = "10s"  # what Grafana's $__rate_interval is at a 1 s scrape interval and a short time range
INTERVAL = "2s"
MIN_SAMPLES = 15  # scrapes of data before querying: rate()s over 10 s windows have plenty of points
FAULT_JOBS = ("worker", "demo")
HEALTHY_JOB = "healthy"
LOADS = [job for job in (*FAULT_JOBS, HEALTHY_JOB) if DEMO_SDK or job != "demo"]  # the demo runs above its floor only
TRAFFIC_ALERT = "OtelstreamTrafficStopped"
TIME_SCALE = 60  # the traffic alert's copy: minutes become seconds
_SECONDS = {"s": 1, "m": 60, "h": 3600}


@dataclass
class Stack:
    prometheus: Prometheus
    sources: dict[str, LoadSource]  # by scrape job


@dataclass
class Scenario:
    prometheus: Prometheus
    source: LoadSource
    job: str
    variables: dict[str, str] = field(default_factory=dict)


def _scaled_traffic_rules(workdir: Path) -> Path:
    """The shipped traffic alert with every range, offset and ``for`` divided by TIME_SCALE."""
    (rule,) = [r for r in alerting_rules() if r["alert"] == TRAFFIC_ALERT]

    def scaled(duration: str) -> str:
        return f"{int(duration[:-1]) * _SECONDS[duration[-1]] // TIME_SCALE}s"

    expr = re.sub(r"(\[|offset )(\d+[smh])", lambda m: m.group(1) + scaled(m.group(2)), rule["expr"])
    copy = {**rule, "expr": expr, "for": scaled(rule["for"])}
    copy["labels"] = {**rule["labels"], "time_scale": f"1/{TIME_SCALE}"}
    path = workdir / "scaled.rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "otelstream.scaled", "rules": [copy]}]}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir: Path = tmp_path_factory.mktemp("prometheus")
    sources: dict[str, LoadSource] = {}
    stand_in = DesignLoad(only_dropped=True)
    prometheus: Prometheus | None = None
    try:
        # the loads start side by side (the demo runs its first round before it serves)
        with ThreadPoolExecutor(3) as pool:
            started = {job: pool.submit(start_load, workdir, job) for job in LOADS}
            for job, future in started.items():
                with contextlib.suppress(BaseException):
                    source = future.result()
                    if source is not None:
                        sources[job] = source
        for future in started.values():
            future.result()  # after every started load is in `sources` (so stopped): raise or skip
        dropped = f"127.0.0.1:{stand_in.serve()}"
        jobs = {job: [s.target] + ([dropped] if job in FAULT_JOBS else []) for job, s in sources.items()}
        prometheus = Prometheus(workdir, jobs, [RULES_FILE, _scaled_traffic_rules(workdir)])
        prometheus.wait_ready()
        _wait_for_data(prometheus, sources)
        yield Stack(prometheus, sources)
    finally:
        if prometheus is not None:
            prometheus.stop()
        stand_in.stop()
        for source in sources.values():
            source.stop()


@pytest.fixture(scope="module", params=[
    pytest.param(job, marks=pytest.mark.skipif(job == "demo" and not DEMO_SDK, reason=WITHOUT_DEMO_SDK))
    for job in FAULT_JOBS
])  # fmt: skip
def scenario(request: pytest.FixtureRequest, stack: Stack) -> Scenario:
    """The fault mixes: instrumented_worker.py (tuned so every alert trips) and ``otelstream demo --serve``."""
    job: str = request.param
    return Scenario(stack.prometheus, stack.sources[job], job, _resolve_variables(stack.prometheus, job))


@pytest.fixture(scope="module")
def healthy(stack: Stack) -> Scenario:
    source = stack.sources.get(HEALTHY_JOB)
    if source is None:
        pytest.skip("the stand-in load has no healthy mix")
    return Scenario(stack.prometheus, source, HEALTHY_JOB, _resolve_variables(stack.prometheus, HEALTHY_JOB))


def _wait_for_data(prometheus: Prometheus, sources: dict[str, LoadSource], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for source in sources.values():
            source.check()
        scrapes = {
            r["metric"]["job"]: float(r["value"][1]) for r in prometheus.query("min by (job) (count_over_time(up[1m]))")
        }
        up = {r["metric"]["job"]: float(r["value"][1]) for r in prometheus.query("min by (job) (up)")}
        if all(scrapes.get(job, 0) >= MIN_SAMPLES and up.get(job) == 1 for job in sources):
            return
        time.sleep(0.5)
    raise AssertionError(f"no {MIN_SAMPLES} scrapes of every job in {timeout}s:\n{prometheus.log_tail()}")


def _resolve_variables(prometheus: Prometheus, job: str) -> dict[str, str]:
    """Evaluate the dashboard's variable queries in order, as Grafana does: ``job`` chosen, All for the others."""
    values: dict[str, str] = {}
    for path in dashboard_files():
        for variable in load_dashboard(path)["templating"]["list"]:
            if variable["name"] not in TEMPLATE_VARIABLES:
                continue
            selector, label = parse_label_values(substitute(variable_query(variable), values, "1m", "1m"))
            found = prometheus.label_values(label, selector)
            assert found, f"variable {variable['name']}: label_values({selector}, {label}) is empty"
            if variable["name"] == "job":
                assert job in found, (job, found)
                found = [job]
            values[variable["name"]] = regex_alternation(found)
    assert set(values) == set(TEMPLATE_VARIABLES)
    return values


def _query_until(prometheus: Prometheus, expr: str, seconds: float = 15) -> list[dict[str, Any]]:
    """A range query, retried while it is empty (a rule or alert may need a few more evaluations)."""
    deadline = time.monotonic() + seconds
    while True:
        result = prometheus.query_range(expr, seconds=30)
        if (result and has_finite_value(result)) or time.monotonic() > deadline:
            return result
        time.sleep(0.5)


QUERIES = panel_queries()
CLOUD_SURFACES = [names.GENERATE_CONTENT, names.CONVERSE]
CLOUD_MODELS = [MODEL_BY_SURFACE[s] for s in CLOUD_SURFACES]


def test_the_load_is_the_instrumented_path(scenario: Scenario) -> None:
    """The end-to-end check must run against real otelstream metrics, not the stand-in."""
    if not scenario.source.real:
        pytest.xfail(f"queries ran against the docs/telemetry.md stand-in ({scenario.source.why}), not otelstream")


def test_target_exposes_every_design_family(scenario: Scenario) -> None:
    """Every docs/telemetry.md family is announced by the scraped otelstream endpoint (even before its first sample)."""
    target = json.dumps(scenario.source.target)
    metadata = scenario.prometheus.api("/api/v1/targets/metadata", match_target=f"{{instance={target}}}")
    # OpenMetrics names a counter family without `_total`, the classic text format with it
    announced = {m["metric"].removesuffix("_total"): m["type"] for m in metadata}
    expected = {h: "histogram" for h in HISTOGRAMS} | {g: "gauge" for g in GAUGES} | {c: "counter" for c in COUNTERS}
    wrong = {name: announced.get(name) for name, kind in expected.items() if announced.get(name) != kind}
    assert not wrong, f"{scenario.source.target} does not expose these families with these types: {wrong}"


# what both loads produce: a 429, a 500, an overload, a reset and a cut (the demo's default mix also a timeout)
CLASSES_SHOWN = {names.EC_RATE_LIMITED, names.EC_SERVER_ERROR, names.EC_OVERLOADED, names.EC_CONNECTION, names.EC_CUT}
NO_CLASS = "none"  # the panel's zero line for a provider without failures


def test_failed_streams_by_error_type_shows_classes(scenario: Scenario) -> None:
    """The panel's series are error classes (never outcome names or provider codes), the ones the load produces."""
    (query,) = [q for q in QUERIES if q.panel == "Failed streams by error type"]
    expr = substitute(query.expr, scenario.variables, RATE_INTERVAL, INTERVAL)
    deadline = time.monotonic() + 15
    while True:
        result = scenario.prometheus.query_range(expr, seconds=30)
        shown = {s["metric"].get(names.LABEL_ERROR_TYPE) for s in result}
        if shown >= CLASSES_SHOWN or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for series in result:
        if series["metric"].get(names.LABEL_ERROR_TYPE) == NO_CLASS:
            assert {float(v) for _, v in series["values"]} == {0.0}, series
    assert shown - {NO_CLASS} <= set(names.ERROR_CLASSES), shown
    assert shown >= CLASSES_SHOWN, sorted(CLASSES_SHOWN - shown)


def _series_until(scenario: Scenario, panel: str, label: str, enough: set[str]) -> list[set[str]]:
    """Per query of the panel, the values of ``label`` its series show, waited for until there are some and they
    include ``enough``."""
    shown: list[set[str]] = []
    for query in [q for q in QUERIES if q.panel == panel]:
        expr = substitute(query.expr, scenario.variables, RATE_INTERVAL, INTERVAL)
        deadline = time.monotonic() + 15
        while True:
            values = {s["metric"].get(label, "") for s in scenario.prometheus.query_range(expr, seconds=30)}
            if (values and values >= enough) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        shown.append(values)
    return shown


def test_bad_share_by_failure_phase_shows_both_phases(scenario: Scenario) -> None:
    """Both loads fail both ways: a 429 before any output, a cut or a reset after deltas reached the caller."""
    phases = set(names.FAILURE_PHASES)
    (shown,) = _series_until(scenario, "Share of bad outcomes by failure phase", names.LABEL_PHASE, phases)
    assert phases <= shown <= phases | {"none"}, shown


def test_first_token_and_first_answer_per_model(scenario: Scenario) -> None:
    """The panel beside TTFD has a first-token and a first-answer line for every model the load streams to."""
    panel = "First token vs first answer p95 by model"
    first_token, first_answer = _series_until(scenario, panel, names.LABEL_MODEL, set())
    assert first_token and first_token == first_answer, (first_token, first_answer)


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.id)
def test_panel_query_returns_data(scenario: Scenario, query: PanelQuery) -> None:
    expr = substitute(query.expr, scenario.variables, RATE_INTERVAL, INTERVAL)
    result = _query_until(scenario.prometheus, expr)
    assert result, f"{query.id} is empty:\n{expr}"
    assert has_finite_value(result), f"{query.id} has only NaN/Inf:\n{expr}\n{result}"


@pytest.mark.parametrize("rule", [r["record"] for r in recording_rules()])
def test_recording_rule_returns_data(scenario: Scenario, rule: str) -> None:
    """Each recording rule has a series for the scenario's job (the rules keep ``job``)."""
    expr = f'{rule}{{job="{scenario.job}"}}'
    deadline = time.monotonic() + 15
    while True:
        result = scenario.prometheus.query(expr)
        if (result and has_finite_value(result)) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert result, f"recording rule {expr} is empty"
    assert has_finite_value(result), f"recording rule {expr} has only NaN/Inf: {result}"


def test_rules_evaluate_without_errors(stack: Stack) -> None:
    groups = stack.prometheus.api("/api/v1/rules")["groups"]
    loaded = {rule["name"]: rule for group in groups for rule in group["rules"]}
    expected = {r.get("record") or r["alert"] for r in recording_rules() + alerting_rules()}
    assert expected <= set(loaded), sorted(expected - set(loaded))
    broken = {name: rule.get("lastError") for name, rule in loaded.items() if rule.get("health") != "ok"}
    assert not broken, broken


def _alerts_of(prometheus: Prometheus, job: str) -> list[dict[str, Any]]:
    return [a for a in prometheus.alerts() if a["labels"].get("job") == job]


def test_alerts_reach_pending_or_firing_under_the_fault_mix(scenario: Scenario) -> None:
    """Each named alert is pending or firing for the job at some point (a stall-driven one may come and go)."""
    expected = scenario.source.expected_alerts
    deadline = time.monotonic() + 30
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        for alert in _alerts_of(scenario.prometheus, scenario.job):
            assert alert["state"] in ("pending", "firing"), alert
            seen[alert["labels"]["alertname"]] = alert["state"]
        if expected <= set(seen):
            break
        time.sleep(0.5)
    missing = sorted(expected - set(seen))
    assert not missing, f"alerts never pending/firing: {missing}; seen: {seen}"
    assert TRAFFIC_ALERT not in seen, "the traffic alert fired while the load was running"


def test_alert_annotations_query_the_alerts(scenario: Scenario) -> None:
    """The annotations' queries run; without their ``firing`` matcher they find the alerts pending now (the alerts
    fire only after their ``for:``, minutes longer than this test)."""
    for path in dashboard_files():
        for annotation in load_dashboard(path)["annotations"]["list"]:
            if "expr" not in annotation:
                continue
            expr = substitute(annotation["expr"], scenario.variables, RATE_INTERVAL, INTERVAL)
            scenario.prometheus.query_range(expr)  # raises on a query Prometheus refuses
            any_state = expr.replace('alertstate="firing"', 'alertstate=~"firing|pending"')
            assert any_state != expr, annotation["name"]
            assert _query_until(scenario.prometheus, any_state), f"{annotation['name']}: {any_state}"


def _exemplar_targets() -> list[tuple[str, str]]:
    return [
        (f"{panel['title']}:{target['refId']}", target["expr"])
        for path in dashboard_files()
        for panel in iter_panels(load_dashboard(path))
        for target in panel.get("targets", [])
        if target.get("exemplar")
    ]


@pytest.mark.parametrize(("name", "expr"), _exemplar_targets(), ids=[n for n, _ in _exemplar_targets()])
def test_latency_panels_show_exemplars(stack: Stack, name: str, expr: str) -> None:
    """The worker records spans: each latency panel's exemplar query finds trace ids (exemplar storage on)."""
    source = stack.sources["worker"]
    if not source.real:
        pytest.skip("the stand-in records no spans")
    variables = _resolve_variables(stack.prometheus, "worker")
    found = stack.prometheus.query_exemplars(substitute(expr, variables, RATE_INTERVAL, INTERVAL))
    trace_ids = {e["labels"].get("trace_id") for series in found for e in series["exemplars"]}
    assert trace_ids - {None}, f"{name}: no exemplar with a trace_id: {found}"


# --- the healthy mix ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.id)
def test_healthy_panel_shows_data_not_no_data(healthy: Scenario, query: PanelQuery) -> None:
    """All well: a share or failure rate is 0, not "No data"; only a panel with its own empty text is empty."""
    expr = substitute(query.expr, healthy.variables, RATE_INTERVAL, INTERVAL)
    result = healthy.prometheus.query_range(expr, seconds=30)
    if query.no_value:
        assert result == [], f"{query.id} shows {result} under the healthy mix (expected: {query.no_value})"
        return
    assert result, f"{query.id} shows No data under the healthy mix:\n{expr}"
    assert has_finite_value(result), f"{query.id} has only NaN/Inf:\n{expr}\n{result}"


def test_healthy_mix_trips_no_alert(healthy: Scenario) -> None:
    assert _alerts_of(healthy.prometheus, healthy.job) == []


def test_attribute_variables_filter_the_real_labels(healthy: Scenario, tmp_path: Path) -> None:
    """``otelstream dashboards --metric-attributes tenant`` against the worker's tenant label: the variable lists
    the tenants, and every panel returns data for All (streams without a tenant included) and for one tenant."""
    shipped.write(tmp_path, labels=attribute_variables.attribute_labels("tenant"))
    dash = load_dashboard(tmp_path / "grafana" / "otelstream-streams.json")
    (variable,) = [v for v in dash["templating"]["list"] if v["name"] == "tenant"]
    selector, label = parse_label_values(substitute(variable_query(variable), healthy.variables, "1m", "1m"))
    assert {"acme", "globex"} <= set(healthy.prometheus.label_values(label, selector))
    for tenant in (variable["allValue"], "acme"):
        variables = {**healthy.variables, "tenant": tenant}
        for panel in iter_panels(dash):
            if panel.get("fieldConfig", {}).get("defaults", {}).get("noValue"):
                continue
            for target in panel.get("targets", []):
                expr = substitute(target["expr"], variables, RATE_INTERVAL, INTERVAL)
                assert healthy.prometheus.query_range(expr, seconds=30), f"{panel['title']} tenant={tenant}: {expr}"


def test_traffic_alert_fires_when_the_load_stops(healthy: Scenario) -> None:
    """Runs last for the healthy job: its streams stop, its endpoint stays up, the (time-scaled) alert fires."""
    assert healthy.source.stop_traffic is not None
    healthy.source.stop_traffic()
    deadline = time.monotonic() + 40
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        healthy.source.check()
        for alert in _alerts_of(healthy.prometheus, healthy.job):
            states[alert["labels"]["alertname"]] = alert["state"]
            if alert["labels"]["alertname"] == TRAFFIC_ALERT and alert["state"] == "firing":
                assert "time_scale" in alert["labels"], alert
                return
        time.sleep(0.5)
    raise AssertionError(f"{TRAFFIC_ALERT} did not fire within 40 s of the load stopping; alerts: {states}")


# --- Gemini and Bedrock streams (the demo job's generate_content and converse) --------------------------------------
# panels about what neither cloud sends: sequence numbers (the Responses API's) and rate-limit headroom headers
NOT_ON_THE_CLOUDS = {"Sequence anomalies per second by kind", "Rate-limit headroom by kind"}


@pytest.fixture(scope="module")
def clouds(stack: Stack) -> Scenario:
    """The demo job with the dashboard's surface and model variables set to the Gemini and Bedrock ones alone."""
    if "demo" not in stack.sources:
        pytest.skip(WITHOUT_DEMO_SDK)
    variables = _resolve_variables(stack.prometheus, "demo")
    selector = f'{names.PROM_STREAMS}_total{{job="demo"}}'
    surfaces = stack.prometheus.label_values(names.LABEL_SURFACE, selector)
    assert set(CLOUD_SURFACES) <= set(surfaces), surfaces  # the All of the surface variable holds them
    variables |= {"surface": regex_alternation(CLOUD_SURFACES), "model": regex_alternation(CLOUD_MODELS)}
    return Scenario(stack.prometheus, stack.sources["demo"], "demo", variables)


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.id)
def test_panels_show_the_gemini_and_bedrock_streams(clouds: Scenario, query: PanelQuery) -> None:
    expr = substitute(query.expr, clouds.variables, RATE_INTERVAL, INTERVAL)
    if query.panel in NOT_ON_THE_CLOUDS or query.no_value:
        return  # (an empty alert table, a panel about what the clouds lack: nothing to show for them)
    result = _query_until(clouds.prometheus, expr)
    assert result, f"{query.id} is empty for the Gemini and Bedrock surfaces:\n{expr}"
    assert has_finite_value(result), f"{query.id} has only NaN/Inf:\n{expr}\n{result}"
    shown = {s["metric"].get(names.LABEL_SURFACE) for s in result} - {None, "", "none"}
    assert shown <= set(CLOUD_SURFACES), (query.id, shown)  # the variables select them, and only them


def test_rules_record_the_gemini_and_bedrock_streams(clouds: Scenario) -> None:
    """The recording rules keep both surfaces apart, with their providers."""
    result = _query_until(clouds.prometheus, 'otelstream:streams:rate5m{job="demo"}')
    pairs = {(s["metric"].get(names.LABEL_SURFACE), s["metric"].get(names.LABEL_PROVIDER)) for s in result}
    assert {(names.GENERATE_CONTENT, names.PROVIDER_GEMINI), (names.CONVERSE, names.PROVIDER_BEDROCK)} <= pairs, pairs
