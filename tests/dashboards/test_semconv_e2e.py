"""End to end for ``otelstream dashboards --semconv``: a real Prometheus scrapes otelstream's instrumented load
(``instrumented_worker.py``, its fault mix) running with ``OTEL_SEMCONV_STABILITY_OPT_IN`` set to
``gen_ai_latest_experimental/dup``, so both namings are exposed. The ``--semconv latest`` rules are loaded; every
panel query of the latest and the dup dashboards that reads a v0.1.0 series returns data, every ``gen_ai:``
recording rule does, and each dup rule (new or old) gives exactly the latest rule's value where a process emits both:
the two are never added up.

Needs the ``prometheus`` binary (Debian: ``apt-get install prometheus``). About 25 s.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from otelstream import names
from otelstream.dashboards import command_line
from tests.dashboards.harness import Prometheus, has_finite_value, iter_panels, substitute, tool
from tests.dashboards.loadsource import LoadSource, start_load

yaml = pytest.importorskip("yaml", reason="pyyaml not installed (it is in the test extra)")

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.skipif(
        tool("prometheus") is None, reason="prometheus not installed (Debian: apt-get install prometheus)"
    ),
    pytest.mark.timeout(180),
]

JOB = "worker"
VARIABLES = {"job": JOB, "instance": ".*", "provider": ".*", "model": ".*", "surface": ".*"}
MIN_SAMPLES = 12
NEW = "gen_ai_client_inference_"


@dataclass
class Stack:
    prometheus: Prometheus
    source: LoadSource
    written: dict[str, Path]  # semconv -> the folder `otelstream dashboards --semconv` wrote


def _write(dest: Path, semconv: str) -> Path:
    parser = argparse.ArgumentParser()
    command_line.add_arguments(parser)
    assert command_line.run(parser.parse_args([str(dest), "--semconv", semconv])) == 0
    return dest


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir: Path = tmp_path_factory.mktemp("semconv-e2e")
    if os.environ.get("OTELSTREAM_E2E_STAND_IN") == "1":
        pytest.skip("the stand-in load emits the default names only")
    written = {m: _write(workdir / m, m) for m in (names.SEMCONV_LATEST, names.SEMCONV_DUP)}
    with pytest.MonkeyPatch.context() as env:
        env.setenv(names.SEMCONV_ENV, names.SEMCONV_OPT_IN_DUP)  # the worker inherits it
        source = start_load(workdir, "worker")
    assert source is not None
    prometheus: Prometheus | None = None
    try:
        rules = written[names.SEMCONV_LATEST] / "prometheus" / "otelstream.rules.yml"
        prometheus = Prometheus(workdir, {JOB: [source.target]}, [rules])
        prometheus.wait_ready()
        deadline = time.monotonic() + 60
        while True:
            source.check()
            up = prometheus.query(f'count_over_time(up{{job="{JOB}"}}[1m])')
            if up and float(up[0]["value"][1]) >= MIN_SAMPLES:
                break
            assert time.monotonic() < deadline, f"no {MIN_SAMPLES} scrapes in 60 s:\n{prometheus.log_tail()}"
            time.sleep(0.5)
        yield Stack(prometheus, source, written)
    finally:
        if prometheus is not None:
            prometheus.stop()
        source.stop()


def _panel_queries(folder: Path) -> list[tuple[str, str]]:
    out = []
    for path in sorted((folder / "grafana").glob("*.json")):
        for panel in iter_panels(json.loads(path.read_text(encoding="utf-8"))):
            out.extend((panel["title"], t["expr"]) for t in panel.get("targets", []) if NEW in t["expr"])
    return out


def _rules(folder: Path) -> dict[str, str]:
    data = yaml.safe_load((folder / "prometheus" / "otelstream.rules.yml").read_text(encoding="utf-8"))
    return {r["record"]: r["expr"] for g in data["groups"] for r in g["rules"] if "record" in r}


def _until_data(prometheus: Prometheus, expr: str, seconds: float = 15) -> list[dict[str, Any]]:
    deadline = time.monotonic() + seconds
    while True:
        result = prometheus.query_range(expr, seconds=30)
        if (result and has_finite_value(result)) or time.monotonic() > deadline:
            return result
        time.sleep(0.5)


def test_the_load_exposes_both_namings(stack: Stack) -> None:
    target = json.dumps(stack.source.target)
    metadata = stack.prometheus.api("/api/v1/targets/metadata", match_target=f"{{instance={target}}}")
    announced = {m["metric"].removesuffix("_total") for m in metadata}
    for family in (names.PROM_OPERATION_DURATION, names.PROM_INFERENCE_DURATION, names.PROM_TOKEN_USAGE,
                   names.PROM_USAGE_INPUT_TOKENS, names.PROM_USAGE_OUTPUT_TOKENS,
                   names.PROM_OPERATION_INPUT_TOKENS, names.PROM_INFERENCE_TIME_TO_FIRST_CHUNK):  # fmt: skip
        assert family in announced, family


@pytest.mark.parametrize("semconv", [names.SEMCONV_LATEST, names.SEMCONV_DUP])
def test_panels_on_the_new_series_show_data(stack: Stack, semconv: str) -> None:
    queries = _panel_queries(stack.written[semconv])
    assert len(queries) >= 10  # latency, duration and token panels
    empty = [title for title, expr in queries
             if not has_finite_value(_until_data(stack.prometheus, substitute(expr, VARIABLES, "10s", "2s")))]
    assert not empty, empty


def test_gen_ai_recording_rules_have_data(stack: Stack) -> None:
    recorded = [r for r in _rules(stack.written[names.SEMCONV_LATEST]) if r.startswith("gen_ai:")]
    assert "gen_ai:token_usage:rate5m" in recorded
    empty = [r for r in recorded if not has_finite_value(_until_data(stack.prometheus, r))]
    assert not empty, empty
    kinds = {s["metric"].get(names.LABEL_TOKEN_TYPE) for s in stack.prometheus.query("gen_ai:token_usage:rate5m")}
    assert kinds == {names.TOKEN_TYPE_INPUT, names.TOKEN_TYPE_OUTPUT}


def test_dup_rules_count_once(stack: Stack) -> None:
    """Each dup rule reads the new series or the old; with both exposed it equals the latest rule exactly."""
    latest, dup = _rules(stack.written[names.SEMCONV_LATEST]), _rules(stack.written[names.SEMCONV_DUP])
    compared = 0
    at = str(time.time() - 2)
    for record, expr in dup.items():
        if expr == latest[record] or " or " not in expr:
            continue
        a = stack.prometheus.api("/api/v1/query", query=latest[record], time=at)["result"]
        b = stack.prometheus.api("/api/v1/query", query=expr, time=at)["result"]
        assert a, record
        values = {json.dumps(s["metric"], sort_keys=True): s["value"][1] for s in a}
        assert {json.dumps(s["metric"], sort_keys=True): s["value"][1] for s in b} == values, record
        compared += 1
    assert compared >= 4
