"""``otelstream dashboards --k8s DIR``: a PrometheusRule with the same rule groups as the rules file (promtool
accepts them once extracted), a ServiceMonitor, and the dashboards as a ConfigMap with the Grafana sidecar's label;
and the settings the rules are written with (the SLO objective, the stalled alert's wait)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from otelstream.cli import main
from otelstream.dashboards import k8s_manifests
from tests.dashboards.harness import DASHBOARDS, RULES_FILE, tool

yaml = pytest.importorskip("yaml", reason="pyyaml not installed (it is in the test extra)")


def _write(tmp_path: Path, *extra: str) -> tuple[Path, dict[str, Any]]:
    out, k8s = tmp_path / "out", tmp_path / "k8s"
    assert main(["dashboards", str(out), "--k8s", str(k8s), *extra]) == 0
    docs = {}
    for name in k8s_manifests.K8S_FILES:
        (doc,) = list(yaml.safe_load_all((k8s / name).read_text(encoding="utf-8")))
        docs[doc["kind"]] = doc
    return out, docs


def test_k8s_manifests_are_yaml_of_the_right_kinds(tmp_path: Path) -> None:
    _, docs = _write(tmp_path)
    assert set(docs) == {"PrometheusRule", "ServiceMonitor", "ConfigMap"}
    rule, monitor, config_map = docs["PrometheusRule"], docs["ServiceMonitor"], docs["ConfigMap"]
    assert rule["apiVersion"] == monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert config_map["apiVersion"] == "v1"
    # the same groups, rule for rule, as the file Prometheus loads
    assert rule["spec"]["groups"] == yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))["groups"]
    assert monitor["spec"]["selector"]["matchLabels"] == {k8s_manifests.K8S_SCRAPE_LABEL: "true"}
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
    assert config_map["metadata"]["labels"][k8s_manifests.GRAFANA_SIDECAR_LABEL] == "1"
    shipped = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in (DASHBOARDS / "grafana").glob("*.json")}
    assert {k: json.loads(v) for k, v in config_map["data"].items()} == shipped


@pytest.mark.prometheus
def test_promtool_accepts_the_groups_of_the_prometheusrule(tmp_path: Path) -> None:
    promtool = tool("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian: apt-get install prometheus)")
    _, docs = _write(tmp_path)
    extracted = tmp_path / "extracted.rules.yml"
    extracted.write_text(yaml.safe_dump({"groups": docs["PrometheusRule"]["spec"]["groups"]}), encoding="utf-8")
    done = subprocess.run([promtool, "check", "rules", str(extracted)], capture_output=True, text=True)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


def _rule(groups: list[dict[str, Any]], key: str, name: str) -> dict[str, Any]:
    return next(r for g in groups for r in g["rules"] if r.get(key) == name)


def test_the_rules_take_the_slo_objective_and_the_stall_threshold(tmp_path: Path) -> None:
    """One setting moves the objective; the stalled alert waits as long as the stall threshold (whole seconds)."""
    out, docs = _write(tmp_path, "--slo-objective", "0.995", "--stall-threshold-s", "12.5")
    for groups in (yaml.safe_load((out / "prometheus" / "otelstream.rules.yml").read_text())["groups"],
                   docs["PrometheusRule"]["spec"]["groups"]):  # fmt: skip
        objective = _rule(groups, "record", "otelstream:slo_objective:ratio")["expr"]
        assert "* 0.995  # setting: slo_objective" in objective
        assert _rule(groups, "alert", "OtelstreamStreamsStalled")["for"] == "13s"
    # the rule tests hold for the defaults only
    assert not list((out / "prometheus").glob("*.test.yml"))


def test_the_defaults_write_exactly_the_shipped_rules(tmp_path: Path) -> None:
    out, _ = _write(tmp_path)
    assert (out / "prometheus" / "otelstream.rules.yml").read_bytes() == RULES_FILE.read_bytes()
    shipped = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))["groups"]
    assert _rule(shipped, "alert", "OtelstreamStreamsStalled")["for"] == "30s"  # the default stall threshold, 30 s
    assert "* 0.99  # setting: slo_objective" in _rule(shipped, "record", "otelstream:slo_objective:ratio")["expr"]


def test_a_bad_objective_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboards", str(tmp_path / "out"), "--slo-objective", "1"]) == 2
    assert "slo_objective" in capsys.readouterr().err


def test_the_kubernetes_doc_examples_are_consistent() -> None:
    """docs/kubernetes.md's YAML parses; its Service matches what the ServiceMonitor selects; the Collector
    pipelines use only the receivers and exporters it defines."""
    from tests.support.paths import REPO

    text = (REPO / "docs" / "kubernetes.md").read_text(encoding="utf-8")
    blocks = [b for b in text.split("```yaml\n")[1:]]
    docs = [d for block in blocks for d in yaml.safe_load_all(block.split("```", 1)[0]) if d]
    service = next(d for d in docs if d.get("kind") == "Service")
    assert service["metadata"]["labels"] == {k8s_manifests.K8S_SCRAPE_LABEL: "true"}
    assert "metrics" in {p["name"] for p in service["spec"]["ports"]}
    collector = next(d for d in docs if "receivers" in d and "service" in d)
    for pipeline in collector["service"]["pipelines"].values():
        assert set(pipeline["receivers"]) <= set(collector["receivers"])
        assert set(pipeline["exporters"]) <= set(collector["exporters"])
    assert "otlp" in collector["receivers"] and collector["service"]["pipelines"]["metrics"]["exporters"]


def test_the_command_says_what_it_wrote_for_kubernetes(tmp_path: Path) -> None:
    """As a user runs it: the Kubernetes manifests were only three more paths among the files; now the command says
    what each one is and how to apply them."""
    import sys

    out, k8s = tmp_path / "out", tmp_path / "k8s"
    done = subprocess.run([sys.executable, "-m", "otelstream.cli", "dashboards", str(out), "--k8s", str(k8s)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stdout.splitlines() if line.startswith(str(k8s))] == [
        str(k8s / name) for name in k8s_manifests.K8S_FILES]  # fmt: skip
    said = done.stderr.splitlines()
    start = said.index(f"Kubernetes manifests in {k8s} (for a cluster with prometheus-operator, instead of the above):")
    rows = said[start + 1 : start + 1 + len(k8s_manifests.K8S_FILES)]
    for row, name, kind in zip(rows, k8s_manifests.K8S_FILES, ("PrometheusRule", "ServiceMonitor", "ConfigMap"),
                               strict=True):  # fmt: skip
        path, _, what = row.strip().partition("  ")
        assert path == str(k8s / name) and what.strip().startswith(kind), row
        (doc,) = list(yaml.safe_load_all((k8s / name).read_text(encoding="utf-8")))
        assert doc["kind"] == kind
    assert said[start + 1 + len(rows)].endswith(f"kubectl apply -n <namespace> -f {k8s}")


def test_without_k8s_nothing_is_said_of_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboards", str(tmp_path / "out")]) == 0
    assert "Kubernetes" not in capsys.readouterr().err
