"""``otelstream dashboards DIR`` writes the shipped dashboards and rules."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from otelstream import names
from otelstream.dashboards import command_line, shipped
from tests.dashboards.harness import (
    ALERT_SERIES,
    DASHBOARDS,
    SCOPE,
    iter_panels,
    parse_label_values,
    selectors,
    variable_query,
)


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    command_line.add_arguments(parser)
    return command_line.run(parser.parse_args(list(argv)))


def _shipped() -> dict[str, bytes]:
    return {
        p.relative_to(DASHBOARDS).as_posix(): p.read_bytes()
        for p in DASHBOARDS.rglob("*")
        if p.is_file() and p.suffix in (".json", ".yml", ".yaml")
    }


def test_writes_every_shipped_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "out"
    assert _run(str(dest)) == 0
    written = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert written == _shipped()
    assert "grafana/otelstream-streams.json" in written
    assert "prometheus/otelstream.rules.yml" in written
    out = capsys.readouterr().out
    assert str(dest / "prometheus" / "otelstream.rules.yml") in out


def test_rerun_is_idempotent_and_does_not_clobber(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(str(tmp_path)) == 0
    assert _run(str(tmp_path)) == 0
    edited = tmp_path / "prometheus" / "otelstream.rules.yml"
    edited.write_text("# my thresholds\n", encoding="utf-8")
    assert _run(str(tmp_path)) == 1
    assert edited.read_text(encoding="utf-8") == "# my thresholds\n"
    assert "use --force" in capsys.readouterr().err
    assert _run(str(tmp_path), "--force") == 0
    assert edited.read_bytes() == (DASHBOARDS / "prometheus" / "otelstream.rules.yml").read_bytes()


def test_default_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _run() == 0
    assert (tmp_path / command_line.DEFAULT_DIR / "grafana" / "otelstream-streams.json").is_file()


def test_packaged_copy_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a wheel the files come from otelstream/_dashboards (hatch force-include), not the checkout."""
    packaged = tmp_path / "_dashboards"
    (packaged / "grafana").mkdir(parents=True)
    (packaged / "grafana" / "x.json").write_text("{}", encoding="utf-8")
    (packaged / "grafana" / "notes.txt").write_text("not shipped", encoding="utf-8")

    class _Files:
        def __truediv__(self, name: str) -> Path:
            assert name == "_dashboards"
            return packaged

    monkeypatch.setattr(shipped.resources, "files", lambda package: _Files())
    assert shipped.shipped_files() == [("grafana/x.json", b"{}")]


def test_through_the_cli(tmp_path: Path) -> None:
    from otelstream import cli

    assert cli.main(["dashboards", str(tmp_path)]) == 0
    assert (tmp_path / "prometheus" / "otelstream.rules.yml").is_file()


def test_metric_attributes_add_a_variable_each_and_every_selector_uses_it(tmp_path: Path) -> None:
    """``--metric-attributes tenant.id,feature``: variables tenant_id and feature after surface; every otelstream
    selector filters by both, alert selectors (alerts carry no attributes) by neither; the rules are as shipped."""
    assert _run(str(tmp_path), "--metric-attributes", "tenant.id, feature,tenant.id") == 0
    shipped = _shipped()
    written = tmp_path / "grafana" / "otelstream-streams.json"
    dash = json.loads(written.read_text(encoding="utf-8"))
    order = [v["name"] for v in dash["templating"]["list"]]
    assert order[order.index("surface") + 1 :][:2] == ["tenant_id", "feature"]
    for name in ("tenant_id", "feature"):
        (var,) = [v for v in dash["templating"]["list"] if v["name"] == name]
        assert parse_label_values(variable_query(var)) == (f"otelstream_streams_total{{{SCOPE}}}", name)
        assert var["includeAll"] and var["multi"] and var["allValue"] == ".*", name
    attributed = SCOPE + ', tenant_id=~"$tenant_id", feature=~"$feature"'
    checked = 0
    for panel in iter_panels(dash):
        for target in panel.get("targets", []):
            for series, selector in selectors(target["expr"]):
                if series in (ALERT_SERIES, names.PROM_SELF_CHECK_FAILURES):  # a process's, not a stream's
                    assert "tenant_id" not in selector, panel["title"]
                else:
                    assert selector.startswith("{" + attributed), (panel["title"], selector)
                    checked += 1
    assert checked >= 40
    rules = "prometheus/otelstream.rules.yml"
    assert (tmp_path / rules).read_bytes() == shipped[rules]
    # without attributes the shipped file is written unchanged, so re-running without them reports the difference
    assert _run(str(tmp_path)) == 1


def test_metric_attributes_round_trip_through_grafana_foundation_sdk(tmp_path: Path) -> None:
    from tests.dashboards.test_dashboard_model import (
        test_dashboard_round_trips_through_grafana_foundation_sdk as round_trip,
    )

    assert _run(str(tmp_path), "--metric-attributes", "tenant") == 0
    round_trip(tmp_path / "grafana" / "otelstream-streams.json")


@pytest.mark.parametrize("keys", ["surface", "tenant.id,tenant_id", "otelstream.outcome", "model", "__name"])
def test_metric_attributes_the_sinks_refuse_are_refused(tmp_path: Path, keys: str) -> None:
    """A built-in label, two keys with one label, a reserved key, a variable's name: no dashboard."""
    assert _run(str(tmp_path), "--metric-attributes", keys) == 2
    assert not (tmp_path / "grafana").exists()


def test_metric_attributes_default_to_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Labels named as the exporters name them (``tenant id`` → ``tenant_id``), from OTELSTREAM_METRIC_ATTRIBUTES."""
    monkeypatch.setenv("OTELSTREAM_METRIC_ATTRIBUTES", "tenant id,9lives")
    assert _run(str(tmp_path)) == 0
    dash = json.loads((tmp_path / "grafana" / "otelstream-streams.json").read_text(encoding="utf-8"))
    assert {"tenant_id", "_lives"} <= {v["name"] for v in dash["templating"]["list"]}


def test_the_dashboards_package_is_split_by_job() -> None:
    """The command, the PromQL rewriting and the Kubernetes manifests were one 494-line module: each job is a module
    of at most 400 lines now, named by it and by no other module of otelstream."""
    from tests.support.paths import REPO

    package = REPO / "otelstream" / "dashboards"
    assert package.is_dir() and not (REPO / "otelstream" / "dashboards.py").exists()
    modules = sorted(p for p in package.glob("*.py") if p.name != "__init__.py")
    assert {p.stem for p in modules} >= {"command_line", "semconv_queries", "k8s_manifests"}
    assert all(len(p.read_text(encoding="utf-8").splitlines()) <= 400 for p in modules)
    elsewhere = {p.name for p in (REPO / "otelstream").rglob("*.py") if p.parent != package}
    assert not {p.name for p in modules} & elsewhere
