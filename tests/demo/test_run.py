"""``otelstream demo`` in-process: the table's outcome counts equal the fault plan and the Prometheus samples."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import io
import random
import re
import signal
import socket
from typing import Any

import pytest

from otelstream import names
from otelstream.demo import faults as F
from otelstream.demo import plan as demo_plan
from otelstream.demo import run as R
from otelstream.demo import serving as S
from otelstream.demo import table as T
from tests.demo.demo_process import ServingDemo, free_port
from tests.support.sdk_features import DEMO_SDK, WITHOUT_DEMO_SDK

pytest.importorskip("otelstream.adapters")
demo_sdk = pytest.mark.skipif(not DEMO_SDK, reason=WITHOUT_DEMO_SDK)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    R.add_arguments(parser)
    return parser.parse_args(["--port", "0", "--quiet", *argv])


def _prometheus_outcomes(registry: object) -> dict[str, dict[str, int]]:
    """Straight from the registry's samples (not through the demo's own parser)."""
    out: dict[str, dict[str, int]] = {}
    for family in registry.collect():  # type: ignore[attr-defined]
        for s in family.samples:
            if s.name == names.PROM_STREAMS + "_total" and s.value:
                per = out.setdefault(s.labels[names.LABEL_SURFACE], {})
                per[s.labels[names.LABEL_OUTCOME]] = per.get(s.labels[names.LABEL_OUTCOME], 0) + int(s.value)
    return out


def test_plan_is_exact_and_repeatable() -> None:
    mix = F.FaultMix.parse("default")
    a, b = demo_plan.plan(200, mix, 1), demo_plan.plan(200, mix, 1)
    assert a == b and a != demo_plan.plan(200, mix, 2)
    counts: dict[str, int] = {}
    for job in a:
        counts[job.fault] = counts.get(job.fault, 0) + 1
        assert job.surface in demo_plan.DEMO_SURFACES[job.fault]
    assert counts == {f: n for f, n in mix.counts(200).items() if n}
    assert {j.surface for j in a} == set(names.SURFACES) and {j.is_async for j in a} == {True, False}
    assert {j.via for j in a} == {"", demo_plan.BEDROCK_INVOKE}  # messages also through Bedrock's invoke API
    assert all(j.is_async for j in a if j.fault == F.CANCEL)


def test_plan_drives_only_the_lanes_installed() -> None:
    """Without google-genai and boto3 the plan is the openai and anthropic surfaces alone; boto3 without aiobotocore
    streams Bedrock sync only; a fault no lane serves (reasoning) is left out of the mix, not planned."""
    mix = F.FaultMix.parse("everything")
    usable, dropped = demo_plan.servable(mix, demo_plan.NO_CLOUD)
    assert dropped == [F.REASONING] and usable is not None
    bare = demo_plan.plan(200, usable, 1, demo_plan.NO_CLOUD)
    assert {j.surface for j in bare} == set(names.OPENAI_ANTHROPIC_SURFACES) and {j.via for j in bare} == {""}
    sync_bedrock = demo_plan.Lanes(bedrock_async=False)
    jobs = demo_plan.plan(300, mix, 1, sync_bedrock)
    bedrock = [j for j in jobs if j.surface == names.CONVERSE or j.via]
    assert bedrock and not any(j.is_async for j in bedrock)
    assert not any(j.fault == F.CANCEL for j in bedrock)
    assert demo_plan.servable(F.FaultMix.parse("reasoning"), demo_plan.NO_CLOUD) == (None, [F.REASONING])


def test_fault_mix_parsing() -> None:
    assert F.FaultMix.parse("ok=3,cut=1").counts(8) == {"ok": 6, "cut": 2}
    assert F.FaultMix.parse("cut").counts(3) == {"cut": 3}
    assert sum(F.FaultMix.parse("everything").counts(37).values()) == 37
    for bad in ("nope=1", "ok=-1", "ok=0", "ok=x"):
        with pytest.raises(ValueError):
            F.FaultMix.parse(bad)
    assert F.FaultMix.parse("ok=2,cut=1").assign(3, random.Random(0)).count("ok") == 2


@demo_sdk
def test_demo_in_process_counts_match_plan_and_prometheus() -> None:
    args = _args("--streams", "48", "--concurrency", "16", "--seed", "3", "--faults", "everything")
    out = io.StringIO()
    result = R.execute(args, out=out)
    table = T.parse_outcome_table(result.table)
    total = table.pop("total")
    zero = dict.fromkeys(names.OUTCOMES, 0)
    expected = {s: {**zero, **per} for s, per in result.expected.items()}
    assert table == expected, "the table's outcome counts are the fault plan's"
    prom = _prometheus_outcomes(result.registry)
    assert {s: {**zero, **per} for s, per in prom.items()} == table, "and the Prometheus samples"
    assert sum(total.values()) == 48
    assert result.matches
    # the clouds' streams are in the plan and in the check (the test extra installs their SDKs)
    assert result.lanes == demo_plan.ALL_LANES
    assert {names.GENERATE_CONTENT, names.CONVERSE} <= set(result.stats)
    assert any(j.via == demo_plan.BEDROCK_INVOKE for j in result.jobs)
    # every kind of trouble in the plan shows up somewhere in the second table
    ws = result.stats.get(names.RESPONSES_WEBSOCKET)
    seq_total = sum(st.sequence.get(names.SEQ_GAP, 0) for st in result.stats.values())
    planned_gaps = sum(1 for j in result.jobs if j.fault == F.SEQ_GAP)
    assert seq_total == planned_gaps
    if ws is not None:
        assert ws.tokens_out > 0


@demo_sdk
def test_same_seed_same_outcome_counts() -> None:
    first = R.execute(_args("--streams", "30", "--concurrency", "15", "--seed", "1"), out=io.StringIO())
    second = R.execute(_args("--streams", "30", "--concurrency", "15", "--seed", "1"), out=io.StringIO())
    assert T.parse_outcome_table(first.table) == T.parse_outcome_table(second.table)
    assert first.matches and second.matches


@demo_sdk
def test_run_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = R.run(_args("--streams", "12", "--concurrency", "12", "--faults", "ok=3,cut=1"))
    printed = capsys.readouterr().out
    assert code == 0
    table = T.parse_outcome_table(printed)
    assert table["total"][names.COMPLETED] == 9 and table["total"][names.CUT] == 3
    assert "every outcome above is what the fault plan promised" in printed


@demo_sdk
def test_serve_rounds_keep_working_after_the_first(provider: object) -> None:
    """--serve's light traffic: with a healthy mix, no round raises (every async stream after the first round failed
    with a connection error when each round ran in a new event loop)."""
    assert asyncio.run(S.serve_rounds(provider, F.FaultMix.parse("healthy"), 4, seed=1, rounds=3)) == {}


@demo_sdk
@pytest.mark.parametrize(("signum", "said"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")])
def test_serve_stops_on_sigterm_as_on_ctrl_c(signum: int, said: str) -> None:
    """A service manager stops with SIGTERM: the demo died of it without a word. Now it ends the light traffic,
    closes the provider and /metrics, says so and exits 0, as Ctrl-C does. The WebSocket front is on the port asked
    with --ws-port (it was always a random one)."""
    ws_port = free_port()
    demo = ServingDemo("--serve", "--streams", "8", "--quiet", "--port", "0", "--ws-port", str(ws_port))
    try:
        served = demo.addresses()
        stopped = demo.stop(signum)
    finally:
        demo.kill()
    assert served["fake provider (websocket_base_url)"] == f"ws://127.0.0.1:{ws_port}/v1"
    assert "serving until Ctrl-C or SIGTERM:" in stopped.out
    assert stopped.rc == 0, stopped
    assert f"stopped ({said}): the light traffic ended; closing the fake provider and /metrics" in stopped.out
    assert "Traceback" not in stopped.err, stopped.err


def test_bad_numbers_and_a_busy_provider_port_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (("--streams", "-5"), ("--concurrency", "0"), ("--ws-port", "70000")):
        with pytest.raises(SystemExit) as exited:
            _args(*bad)
        assert exited.value.code == 2
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert R.run(_args("--streams", "4", "--provider-port", str(busy.getsockname()[1]))) == 2
        if DEMO_SDK:  # a busy --ws-port too, refused before any stream, the provider's HTTP front closed again
            assert R.run(_args("--streams", "4", "--ws-port", str(busy.getsockname()[1]))) == 2
    err = capsys.readouterr().err
    assert "not a positive number" in err and "otelstream demo:" in err and "Traceback" not in err
    assert "70000 is not a port" in err


@demo_sdk
@pytest.mark.parametrize("mix", ["outage", "default"])
def test_serve_rounds_serve_every_fault_of_the_mix_at_a_small_concurrency(provider: object, mix: str) -> None:
    """`--faults outage --concurrency 8` (2 streams open at once, rounds of 4) served ok, http_500 and http_429 and
    never a cut, reset or error: each round was allocated by weight alone, the same way every round."""
    parsed = F.FaultMix.parse(mix)
    before = len(provider.requests)  # type: ignore[attr-defined]
    asyncio.run(S.serve_rounds(provider, parsed, 8 // 4, seed=1, rounds=2))
    assert provider.wait_idle(10.0)  # type: ignore[attr-defined]
    served = {rec.fault for rec in provider.requests[before:]}  # type: ignore[attr-defined]
    server_side = {name for name, _ in parsed.weights if name in F.SERVER_FAULTS and name != F.OK}
    assert server_side <= served, server_side - served


FIRST_LINE = r"""
import importlib.abc, sys
written = []

class Tee:
    def __init__(self, real): self.real = real
    def write(self, s):
        written.append(s)
        return self.real.write(s)
    def __getattr__(self, name): return getattr(self.real, name)

class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("openai", "anthropic", "prometheus_client") or name.startswith("opentelemetry.sdk"):
            sys.stderr.write(f"first heavy import {name} after {len(''.join(written))} characters\n")
            sys.stderr.flush()
            sys.meta_path.remove(self)
        return None

sys.stdout = Tee(sys.stdout)
sys.meta_path.insert(0, Watch())
from otelstream.cli import main
sys.exit(main(["demo", "--streams", "4", "--port", "0", "--quiet", "--faults", "healthy"]))
"""


def test_the_demo_prints_its_first_line_before_loading_the_sdks() -> None:
    """The demo once showed ~15 s of blank screen (SDK imports, warm-up) before anything; its first line now comes
    before any SDK, OTel SDK or prometheus_client import, within 2 s of starting."""
    import subprocess
    import sys
    import time

    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", FIRST_LINE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        heavy = proc.stderr.readline()  # the demo need not finish: what came before the first heavy import counts
        first = proc.stdout.readline()
        first_after = time.monotonic() - t0
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert first.startswith("otelstream demo: 4 streams"), (first, heavy)
    assert heavy.startswith("first heavy import ") and heavy.split()[-2] == str(len(first)), (heavy, first)
    assert first_after < 2.0, first_after


@demo_sdk
def test_the_demo_says_each_set_up_step_while_it_happens() -> None:
    """After its first line the demo was silent for ~9 s (SDK imports, warm-up); now each step is said before it
    runs: the loading line before the first SDK import, the warm-up and instrumented lines before the first stream."""
    import subprocess
    import sys

    script = FIRST_LINE.replace('"--quiet", ', "")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    steps = [i for i, line in enumerate(lines) if line.startswith("  ")][:4]
    assert [lines[i].split()[0] for i in steps] == ["loading", "loaded", "one", "instrumented;"], lines[:6]
    # the loading line was written before the first heavy import (the import watcher counts what was written)
    heavy = next(line for line in done.stderr.splitlines() if line.startswith("first heavy import "))
    written_before = int(heavy.split()[-2])
    assert written_before >= len("\n".join(lines[: steps[0] + 1])), (heavy, lines[:2])
    # then the streams' progress (on stderr)
    assert "streams [" in done.stderr


def test_the_demo_refuses_an_openai_below_its_floor(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An openai without WebSocket mode observed: exit 2 with what to install, not a traceback halfway through."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "openai._websocket_connection" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert R.run(_args("--streams", "4")) == 2
    err = capsys.readouterr().err
    assert "the demo needs openai >= 3.32" in err
    # from a checkout or its wheel, with the extra: the package index has no otelstream
    assert "pip install '/path/to/otelstream[demo]'" in err and "pip install 'otelstream[" not in err
    assert re.search(r"pip install 'dist/otelstream-[\w.]+-py3-none-any\.whl\[demo\]'", err), err


@demo_sdk
def test_the_demo_shows_failed_streams_by_error_class() -> None:
    """A 429, a 500, an overload and a read timeout before the headers come out as four classes, in the stats read
    back from Prometheus and in the printed table."""
    args = _args("--streams", "16", "--concurrency", "16", "--seed", "2",
                 "--faults", "ok=4,http_429=3,http_500=3,overloaded=3,no_headers=3")  # fmt: skip
    result = R.execute(args, out=io.StringIO())
    assert result.matches
    classes: dict[str, int] = {}
    for st in result.stats.values():
        for klass, n in st.error_classes.items():
            classes[klass] = classes.get(klass, 0) + n
    assert classes == {names.EC_RATE_LIMITED: 3, names.EC_SERVER_ERROR: 3, names.EC_OVERLOADED: 3,
                       names.EC_TIMEOUT: 3}  # fmt: skip
    assert "Failed streams by error class" in result.table
    assert all(k in result.table for k in classes)
