"""``otelstream dashboards --semconv latest|dup``: the dashboards and rules for the chosen gen_ai.client.* names,
promtool-tested like the shipped ones (their own unit tests rewritten: under latest the input series renamed, under
dup given under both names, so a process that emits both must not be counted twice)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from otelstream import names
from otelstream.dashboards import command_line, k8s_manifests, semconv_queries
from otelstream.export.points import SPECS
from tests.dashboards.harness import ALERT_LABELS, DASHBOARDS, LABELS, label_names, series_names, tool

yaml = pytest.importorskip("yaml", reason="pyyaml not installed (it is in the test extra)")

MODES = (names.SEMCONV_LATEST, names.SEMCONV_DUP)
OLD_FAMILIES = tuple(semconv_queries.OLD_FAMILIES)


def _series(specs: Any) -> frozenset[str]:
    out: set[str] = set()
    for s in specs:
        if s.kind == "histogram":
            out |= {s.prom + suffix for suffix in ("_bucket", "_sum", "_count")}
        elif s.kind == "counter":
            out.add(s.prom + "_total")
        else:
            out.add(s.prom)
    out.add(names.PROM_SELF_CHECK_FAILURES)
    return frozenset(out)


# what a latest-conventions process exposes, and every series there is
LATEST_SERIES = _series(s for s in SPECS if s.prom not in OLD_FAMILIES)
ALL_SERIES = _series(SPECS)


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    command_line.add_arguments(parser)
    return command_line.run(parser.parse_args(list(argv)))


def _render(dest: Path, semconv: str) -> Path:
    assert _run(str(dest), "--semconv", semconv) == 0
    return dest


def _promtool() -> str:
    path = tool("promtool")
    if path is None:
        pytest.skip("promtool not installed (Debian: apt-get install prometheus)")
    return path


def _exprs(dest: Path) -> list[str]:
    """Every PromQL expression of the written rules and dashboards."""
    rules = yaml.safe_load((dest / "prometheus" / "otelstream.rules.yml").read_text(encoding="utf-8"))
    out = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    for path in (dest / "grafana").glob("*.json"):

        def walk(panels: list[Any]) -> None:
            for panel in panels:
                out.extend(t["expr"] for t in panel.get("targets", []))
                walk(panel.get("panels", []))

        walk(json.loads(path.read_text(encoding="utf-8"))["panels"])
    return out


@pytest.mark.prometheus
@pytest.mark.parametrize("semconv", MODES)
def test_rules_pass_promtool(tmp_path: Path, semconv: str) -> None:
    promtool = _promtool()
    prom = _render(tmp_path / semconv, semconv) / "prometheus"
    done = subprocess.run([promtool, "check", "rules", "otelstream.rules.yml"], cwd=prom, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
    tests = sorted(p.name for p in prom.glob("*.test.yml"))
    assert tests == sorted(p.name for p in (DASHBOARDS / "prometheus").glob("*.test.yml"))
    rewritten = _rewritten_tests(prom)
    assert rewritten  # the rule tests with gen_ai.client.* input series
    for test in rewritten:  # one file per run, as tests/dashboards/test_rules.py runs the shipped ones
        done = subprocess.run([promtool, "test", "rules", test], cwd=prom, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def _rewritten_tests(prom: Path) -> list[str]:
    """The written rule tests that differ from the shipped ones. The others have no gen_ai.client.* series: the same
    inputs and results under every setting (tests/dashboards/test_rules.py runs them)."""
    shipped = DASHBOARDS / "prometheus"
    return sorted(p.name for p in prom.glob("*.test.yml") if p.read_bytes() != (shipped / p.name).read_bytes())


@pytest.mark.prometheus
@pytest.mark.parametrize("inputs", [names.SEMCONV_DEFAULT, names.SEMCONV_LATEST])
def test_dup_rules_read_either_name_alone(tmp_path: Path, inputs: str) -> None:
    """A fleet mid-migration: the dup rules give the shipped tests' results from the default names alone, and from
    the latest names alone."""
    promtool = _promtool()
    dup = _render(tmp_path / "dup", names.SEMCONV_DUP) / "prometheus"
    given = _render(tmp_path / inputs, inputs) / "prometheus"
    tests = _rewritten_tests(dup)
    assert tests
    for test in tests:
        shutil.copy(given / test, dup / test)
        done = subprocess.run([promtool, "test", "rules", test], cwd=dup, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


# The token rule has no test among the shipped ones (the default histogram's `_sum` needs none); the counters that
# replace it are summed back by type, so it gets one here, for each setting.
_LABELS = 'gen_ai_provider_name="openai",gen_ai_operation_name="chat",gen_ai_request_model="gpt-5",job="app"'
_OLD_TOKENS = [
    (f'gen_ai_client_token_usage_sum{{{_LABELS},gen_ai_token_type="input"}}', "0+600x20"),
    (f'gen_ai_client_token_usage_sum{{{_LABELS},gen_ai_token_type="output"}}', "0+120x20"),
]
_NEW_TOKENS = [
    (f'gen_ai_client_inference_usage_input_tokens_total{{{_LABELS},gen_ai_token_modality="unknown"}}', "0+600x20"),
    (f'gen_ai_client_inference_usage_output_tokens_total{{{_LABELS},gen_ai_token_modality="unknown"}}', "0+120x20"),
    # a subset of the input tokens: never added to them
    (f'gen_ai_client_inference_usage_cache_read_input_tokens_total{{{_LABELS},gen_ai_token_modality="unknown"}}',
     "0+300x20"),
]  # fmt: skip


@pytest.mark.prometheus
@pytest.mark.parametrize(
    ("semconv", "series"),
    [
        (names.SEMCONV_DEFAULT, _OLD_TOKENS),
        (names.SEMCONV_LATEST, _NEW_TOKENS),
        (names.SEMCONV_DUP, _OLD_TOKENS + _NEW_TOKENS),  # both: the same tokens, counted once
        (names.SEMCONV_DUP, _OLD_TOKENS),
        (names.SEMCONV_DUP, _NEW_TOKENS),
    ],
    ids=["default", "latest", "dup-both", "dup-old", "dup-new"],
)
def test_token_rule(tmp_path: Path, semconv: str, series: list[tuple[str, str]]) -> None:
    promtool = _promtool()
    prom = _render(tmp_path, semconv) / "prometheus"
    labels = 'gen_ai_provider_name="openai",gen_ai_request_model="gpt-5",job="app"'
    test = {
        "rule_files": ["otelstream.rules.yml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in series],
            "promql_expr_test": [{
                "expr": "gen_ai:token_usage:rate5m", "eval_time": "10m",
                "exp_samples": [
                    {"labels": f'gen_ai:token_usage:rate5m{{{labels},gen_ai_token_type="input"}}', "value": 10},
                    {"labels": f'gen_ai:token_usage:rate5m{{{labels},gen_ai_token_type="output"}}', "value": 2},
                ],
            }],
        }],
    }  # fmt: skip
    (prom / "tokens.test.yml").write_text(json.dumps(test), encoding="utf-8")
    done = subprocess.run([promtool, "test", "rules", "tokens.test.yml"], cwd=prom, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_latest_queries_name_only_latest_series(tmp_path: Path) -> None:
    exprs = _exprs(_render(tmp_path, names.SEMCONV_LATEST))
    named = set().union(*(series_names(e) for e in exprs))
    assert named <= LATEST_SERIES, sorted(named - LATEST_SERIES)
    assert {f"{names.PROM_INFERENCE_DURATION}_bucket", f"{names.PROM_INFERENCE_TIME_TO_FIRST_CHUNK}_bucket",
            f"{names.PROM_INFERENCE_TIME_PER_OUTPUT_CHUNK}_bucket", f"{names.PROM_USAGE_INPUT_TOKENS}_total",
            f"{names.PROM_USAGE_OUTPUT_TOKENS}_total"} <= named  # fmt: skip
    for expr in exprs:
        assert label_names(expr) <= LABELS | ALERT_LABELS, sorted(label_names(expr) - LABELS - ALERT_LABELS)
    text = "".join(p.read_text(encoding="utf-8") for p in tmp_path.rglob("*") if p.is_file())
    for old in (names.OTEL_OPERATION_DURATION, names.OTEL_TIME_TO_FIRST_CHUNK, names.OTEL_TIME_PER_OUTPUT_CHUNK):
        assert old not in text  # descriptions and comments name the latest instruments too


def test_dup_queries_read_new_or_old(tmp_path: Path) -> None:
    exprs = _exprs(_render(tmp_path, names.SEMCONV_DUP))
    named = set().union(*(series_names(e) for e in exprs))
    assert named <= ALL_SERIES, sorted(named - ALL_SERIES)
    both = 0
    for expr in exprs:
        found = series_names(expr)
        if any(n.startswith(OLD_FAMILIES) for n in found):  # every query of an old series reads the new one first
            assert " or " in expr and any(n.startswith("gen_ai_client_inference_") for n in found), expr
            both += 1
    assert both >= 4  # the rules' four, the dashboard's


def test_default_is_the_shipped_files(tmp_path: Path) -> None:
    dest = _render(tmp_path, names.SEMCONV_DEFAULT)
    written = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    shipped = {p.relative_to(DASHBOARDS).as_posix(): p.read_bytes() for p in DASHBOARDS.rglob("*")
               if p.is_file() and p.suffix in (".json", ".yml", ".yaml")}  # fmt: skip
    assert written == shipped


def test_the_setting_picks_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(names.SEMCONV_ENV, names.SEMCONV_OPT_IN_LATEST)
    assert _run(str(tmp_path / "env")) == 0
    rules = (tmp_path / "env" / "prometheus" / "otelstream.rules.yml").read_text(encoding="utf-8")
    assert names.PROM_INFERENCE_DURATION in rules and names.PROM_OPERATION_DURATION not in rules
    assert _run(str(tmp_path / "arg"), "--semconv", "default") == 0  # the argument wins
    assert names.PROM_OPERATION_DURATION in (tmp_path / "arg" / "prometheus" / "otelstream.rules.yml").read_text()


def test_k8s_manifests_follow(tmp_path: Path) -> None:
    assert _run(str(tmp_path / "out"), "--semconv", "latest", "--k8s", str(tmp_path / "k8s")) == 0
    for name in k8s_manifests.K8S_FILES:
        text = (tmp_path / "k8s" / name).read_text(encoding="utf-8")
        assert "gen_ai_client_operation_" not in text and "gen_ai_client_token_usage" not in text
    assert names.PROM_INFERENCE_DURATION in (tmp_path / "k8s" / "prometheusrule.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "expr",
    [
        # not inside `sum by (...) (rate(...))`: a form the rewrite does not know
        "histogram_quantile(0.5, rate(gen_ai_client_operation_duration_seconds_bucket[5m]))",
        # the token distribution by type has no latest counterpart
        "sum by (le) (rate(gen_ai_client_token_usage_bucket[5m]))",
    ],
)
def test_an_unknown_query_form_is_refused(expr: str) -> None:
    rules = f"groups:\n  - name: g\n    rules:\n      - record: a:b:c\n        expr: {expr}\n".encode()
    with pytest.raises(ValueError, match="gen_ai_client_"):
        semconv_queries.with_semconv("prometheus/x.rules.yml", rules, names.SEMCONV_LATEST)
    assert semconv_queries.with_semconv("prometheus/x.rules.yml", rules, names.SEMCONV_DEFAULT) == rules


def test_every_old_query_form_is_rewritten() -> None:
    """The shipped files' queries of a default gen_ai.client.* series are all of the form the rewrite knows."""
    for path in DASHBOARDS.rglob("*"):
        if path.suffix in (".json", ".yml"):
            text = path.read_text(encoding="utf-8")
            text = re.sub(r"#[^\n]*", "", text) if path.suffix == ".yml" else text
            if path.name.endswith(".test.yml"):
                continue  # input series, rewritten line by line
            rewritten = semconv_queries._AGGREGATE.sub("", text)
            stray = {m[0] for m in semconv_queries._OLD_SERIES.finditer(rewritten)}
            assert not stray, (path.name, sorted(stray))
