"""The dashboard and rule tests' harness: reading the shipped files, PromQL text checks, a real Prometheus."""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otelstream import names
from tests.support.paths import REPO

DASHBOARDS = REPO / "dashboards"
GRAFANA_DIR = DASHBOARDS / "grafana"
RULES_FILE = DASHBOARDS / "prometheus" / "otelstream.rules.yml"

# --- what docs/telemetry.md exposes, as series names ----------------------------------------------------------------
HISTOGRAMS = (
    names.PROM_OPERATION_DURATION,
    names.PROM_TOKEN_USAGE,
    names.PROM_TIME_TO_FIRST_CHUNK,
    names.PROM_TIME_PER_OUTPUT_CHUNK,
    names.PROM_TIME_TO_FIRST_EVENT,
    names.PROM_TIME_TO_FIRST_OUTPUT,
    names.PROM_MAX_WAIT,
)
COUNTERS = (names.PROM_STREAMS, names.PROM_SEQUENCE_ANOMALIES, names.PROM_ANOMALIES, names.PROM_REPORTS_DROPPED)
GAUGES = (names.PROM_STREAMS_ACTIVE, names.PROM_STREAMS_STALLED, names.PROM_RATELIMIT_REMAINING,
          names.PROM_RATELIMIT_LIMIT, names.PROM_SELF_CHECK_FAILURES)
SERIES = frozenset(
    [f"{h}{suffix}" for h in HISTOGRAMS for suffix in ("_bucket", "_sum", "_count")]
    + [f"{c}_total" for c in COUNTERS]
    + list(GAUGES)
)
# label names a query may use: the contract's, plus the histogram bucket label and the scrape target labels
LABELS = frozenset(
    [
        names.LABEL_PROVIDER,
        names.LABEL_OPERATION,
        names.LABEL_MODEL,
        names.LABEL_TOKEN_TYPE,
        names.LABEL_SURFACE,
        names.LABEL_OUTCOME,
        names.LABEL_KIND,
        names.LABEL_ERROR_TYPE,
        names.LABEL_PHASE,
        names.LABEL_PROBE_NAME,  # otelstream probe's metric attribute: the probe row and OtelstreamProbeFailing
        "le",
        "job",
        "instance",
    ]
)
TEMPLATE_VARIABLES = ("job", "instance", "provider", "model", "surface")
# Prometheus's own series of alert state; its labels are the alert's plus these
ALERT_SERIES = "ALERTS"
ALERT_LABELS = frozenset({"alertname", "alertstate", "severity"})
# every selector of an otelstream series starts with these matchers (ALERTS: the instance may be absent)
SCOPE = 'job=~"$job", instance=~"$instance"'
ALERT_SCOPE = 'job=~"$job", instance=~"$instance|"'

_SERIES_TOKEN = re.compile(r"\b(?:gen_ai_client_|otelstream_)[A-Za-z0-9_]*\b")
_RECORDED_TOKEN = re.compile(r"\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")
_COMMENT = re.compile(r"#[^\n]*")
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$", re.S)


def series_names(expr: str) -> set[str]:
    """Raw otelstream / gen_ai series named in a PromQL expression (label names never start like these)."""
    return set(_SERIES_TOKEN.findall(_COMMENT.sub("", expr)))


def recorded_names(expr: str) -> set[str]:
    return set(_RECORDED_TOKEN.findall(_COMMENT.sub("", expr)))


def grouping_labels(expr: str) -> set[str]:
    """Labels named in by / without / on / ignoring / group_* clauses (not in matchers)."""
    return {m.strip() for group in _GROUPING.findall(_COMMENT.sub("", expr)) for m in group.split(",") if m.strip()}


_SELECTOR = re.compile(r"\b((?:gen_ai_client_|otelstream_)[A-Za-z0-9_]*|ALERTS)\b(\{[^}]*\})?")


def selectors(expr: str) -> list[tuple[str, str]]:
    """(series, its ``{...}`` or "") for every raw series named in an expression."""
    return [(m.group(1), m.group(2) or "") for m in _SELECTOR.finditer(_COMMENT.sub("", expr))]


def label_names(expr: str) -> set[str]:
    text = _COMMENT.sub("", expr)
    found = {m.strip() for group in _GROUPING.findall(text) for m in group.split(",") if m.strip()}
    found |= set(_MATCHER.findall(text))
    return found


# --- the shipped dashboards ---------------------------------------------------------------------------------
def dashboard_files() -> list[Path]:
    return sorted(GRAFANA_DIR.glob("*.json"))


def load_dashboard(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def iter_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # panels nested in collapsed rows


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    ref_id: str
    expr: str
    no_value: str = ""  # the panel's text for an empty result (Grafana shows "No data" without one)

    @property
    def id(self) -> str:
        return f"{self.dashboard}:{self.panel}:{self.ref_id}"


def panel_queries() -> list[PanelQuery]:
    out = []
    for path in dashboard_files():
        dash = load_dashboard(path)
        for panel in iter_panels(dash):
            for target in panel.get("targets", []):
                no_value = panel.get("fieldConfig", {}).get("defaults", {}).get("noValue", "")
                out.append(PanelQuery(path.stem, panel["title"], target["refId"], target["expr"], no_value))
    return out


def variable_query(variable: dict[str, Any]) -> str:
    query = variable["query"]
    return str(query["query"] if isinstance(query, dict) else query)


def parse_label_values(query: str) -> tuple[str, str]:
    """``label_values(selector, label)`` → (selector, label)."""
    match = _LABEL_VALUES.match(query.strip())
    if match is None:
        raise ValueError(f"not a label_values() query: {query}")
    return match.group(1).strip(), match.group(2)


def regex_alternation(values: list[str]) -> str:
    """What Grafana substitutes for a multi-value variable with All selected (no custom all value)."""
    escaped = [re.sub(r"([\\.+*?^$()\[\]{}|])", r"\\\\\1", v) for v in values]
    return "(" + "|".join(escaped) + ")" if len(escaped) > 1 else escaped[0]


def substitute(expr: str, variables: dict[str, str], rate_interval: str, interval: str) -> str:
    text = expr.replace("$__rate_interval", rate_interval).replace("$__interval", interval)
    text = text.replace("${__rate_interval}", rate_interval).replace("${__interval}", interval)
    for name, value in variables.items():
        text = text.replace(f"${{{name}}}", value).replace(f"${name}", value)
    if "$" in text:
        raise AssertionError(f"unsubstituted template variable in: {text}")
    return text


# --- the shipped rules --------------------------------------------------------------------------------------
def load_rules() -> dict[str, Any]:
    import yaml

    data: dict[str, Any] = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    return data


def recording_rules() -> list[dict[str, Any]]:
    return [r for g in load_rules()["groups"] for r in g["rules"] if "record" in r]


def alerting_rules() -> list[dict[str, Any]]:
    return [r for g in load_rules()["groups"] for r in g["rules"] if "alert" in r]


# --- a real Prometheus --------------------------------------------------------------------------------------
def tool(name: str) -> str | None:
    return shutil.which(name)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Prometheus:
    """``prometheus`` on 127.0.0.1 with a temporary config and storage, scraping each job's targets every second."""

    def __init__(self, workdir: Path, jobs: dict[str, list[str]], rule_files: list[Path]) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "prometheus.log"
        rules = "\n".join(f"  - {json.dumps(str(p))}" for p in rule_files)
        scrape = "".join(
            f"  - job_name: {job}\n    static_configs:\n      - targets: {json.dumps(targets)}\n"
            for job, targets in jobs.items()
        )
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n{rules}\n"
            f"scrape_configs:\n{scrape}",
            encoding="utf-8",
        )
        binary = tool("prometheus")
        assert binary is not None
        self._log_file = self.log.open("wb")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
                # the latency panels ask for exemplars; Prometheus keeps them only with this feature
                "--enable-feature=exemplar-storage",
                "--log.level=warn",
            ],
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log_file.close()

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def api(self, path: str, **params: str | list[str]) -> Any:
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
            raise AssertionError(f"{path} {params}: HTTP {exc.code}: {body.get('error')}") from None
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body}")
        return body["data"]

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"prometheus not ready after {timeout}s:\n{self.log_tail()}")

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("/api/v1/query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    def query_range(self, expr: str, seconds: int = 30) -> list[dict[str, Any]]:
        end = time.time()
        data = self.api("/api/v1/query_range", query=expr, start=str(end - seconds), end=str(end), step="1")
        result: list[dict[str, Any]] = data["result"]
        return result

    def query_exemplars(self, expr: str, seconds: int = 30) -> list[dict[str, Any]]:
        end = time.time()
        result: list[dict[str, Any]] = self.api(
            "/api/v1/query_exemplars", query=expr, start=str(end - seconds), end=str(end)
        )
        return result

    def label_values(self, label: str, selector: str) -> list[str]:
        values: list[str] = self.api(f"/api/v1/label/{label}/values", **{"match[]": selector})
        return values

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.api("/api/v1/alerts")["alerts"]
        return alerts


def has_finite_value(result: list[dict[str, Any]]) -> bool:
    for series in result:
        samples = series.get("values") or ([series["value"]] if "value" in series else [])
        for _, value in samples:
            if math.isfinite(float(value)):
                return True
    return False
