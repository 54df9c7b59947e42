"""``--k8s DIR``: the rules as a prometheus-operator ``PrometheusRule``, a ``ServiceMonitor`` for the pods'
``metrics`` port, and the dashboards as a ``ConfigMap`` the Grafana sidecar imports."""

from __future__ import annotations

K8S_NAME = "otelstream"
K8S_SCRAPE_LABEL = "otelstream.io/scrape"  # the label a Service carries for the ServiceMonitor to select it
GRAFANA_SIDECAR_LABEL = "grafana_dashboard"  # the Grafana Helm chart's sidecar default: ConfigMaps with it are loaded
K8S_FILES = ("prometheusrule.yaml", "servicemonitor.yaml", "grafana-dashboards.yaml")
# what each manifest is, as the command says after writing them
K8S_CONTENTS = {
    "prometheusrule.yaml": "PrometheusRule, the recording rules and alerts of prometheus/otelstream.rules.yml",
    "servicemonitor.yaml": "ServiceMonitor, scraping /metrics on the port named metrics of the Services labelled "
    f'{K8S_SCRAPE_LABEL}="true"',
    "grafana-dashboards.yaml": f'ConfigMap of the dashboards, labelled {GRAFANA_SIDECAR_LABEL}="1" for the Grafana '
    "sidecar",
}
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
