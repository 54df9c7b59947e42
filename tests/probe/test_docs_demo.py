"""docs/probe.md's example against the demo works as written: its demo command (the ports it names swapped for free
ones, and a short first run) in a process of its own, then each of its probe commands against it. The WebSocket
one failed while the demo's WebSocket port was always random."""

from __future__ import annotations

import re
import shlex

import pytest

from otelstream import names
from tests.demo.demo_process import ServingDemo, free_port
from tests.probe.conftest import run_probe
from tests.support.paths import REPO
from tests.support.sdk_features import DEMO_SDK, WITHOUT_DEMO_SDK

DOC = (REPO / "docs" / "probe.md").read_text(encoding="utf-8")
SECTION = DOC[DOC.index("Try it against the demo's fake provider") : DOC.index("## Options")]


def _commands(prefix: str) -> list[list[str]]:
    blocks = re.findall(r"^```bash\n(.*?)^```$", SECTION, re.M | re.S)
    return [shlex.split(line)[2:] for block in blocks for line in block.splitlines() if line.startswith(prefix)]


@pytest.mark.skipif(not DEMO_SDK, reason=WITHOUT_DEMO_SDK)
def test_the_probe_docs_example_runs_against_the_demo() -> None:
    (demo_argv,) = _commands("otelstream demo ")
    probes = _commands("otelstream probe ")
    assert {argv[argv.index("--surface") + 1] for argv in probes} == {names.CHAT_COMPLETIONS,
                                                                      names.RESPONSES_WEBSOCKET}  # fmt: skip
    documented = {flag: demo_argv[demo_argv.index(flag) + 1] for flag in ("--provider-port", "--ws-port")}
    free = {port: str(free_port()) for port in documented.values()}
    demo = ServingDemo(*[free.get(a, a) for a in demo_argv], "--streams", "8", "--quiet", "--port", "0")
    try:
        served = demo.addresses()
        assert served["fake provider (websocket_base_url)"] == f"ws://127.0.0.1:{free[documented['--ws-port']]}/v1"
        runs = []
        for argv in probes:
            for port, swapped in free.items():
                argv = [a.replace(f":{port}/", f":{swapped}/") for a in argv]
            runs.append((argv, run_probe(*argv)))
    finally:
        stopped = demo.stop()
        demo.kill()
    assert stopped.rc == 0, stopped.err
    for argv, run in runs:
        assert run.rc == 0, (argv, run.err)  # 2: the target could not be reached
        requests = int(argv[argv.index("--requests") + 1])
        rows = run.out.splitlines()[2 : 2 + requests]
        assert [row.split()[0] for row in rows] == [str(n) for n in range(1, requests + 1)], run.out
        assert all(row.split()[1] in names.OUTCOMES for row in rows), run.out
        # a WebSocket URL on the HTTP port is answered 404, not refused: the rows would still be there
        assert "handshake failed" not in run.out and " 404 " not in run.out, run.out
