"""The README's probe command works as written against the demo's fake provider (what ``otelstream demo --serve
--provider-port 8900`` keeps running), on a free port instead of 8900."""

from __future__ import annotations

import argparse
import re
import shlex

from otelstream import names
from otelstream.demo import run as demo_run
from otelstream.demo.provider import FakeProvider
from tests.probe.conftest import run_probe
from tests.support.paths import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
SECTION = README[README.index("## Synthetic probing") : README.index("## More")]


def test_the_readme_probe_command_runs_against_the_demo_provider() -> None:
    demo = re.search(r"`(otelstream demo [^`]*--provider-port (\d+))`", SECTION)
    assert demo, "the section says how to start the demo's fake provider"
    parser = argparse.ArgumentParser()
    demo_run.add_arguments(parser)
    parser.parse_args(shlex.split(demo.group(1))[2:])  # the demo takes the flags as written
    (command,) = [line for line in SECTION.splitlines() if line.startswith("otelstream probe --base-url")]
    argv = shlex.split(command.split("#")[0])[2:]
    assert f"http://127.0.0.1:{demo.group(2)}/v1" in argv
    with FakeProvider(websocket=False) as provider:
        port = provider.base_url.rsplit(":", 1)[1]
        run = run_probe(*[a.replace(f":{demo.group(2)}/", f":{port}/") for a in argv])
    assert run.rc == 0, run.err
    requests = int(argv[argv.index("--requests") + 1])
    lines = run.out.splitlines()
    assert [line.split()[1] for line in lines[2 : 2 + requests]] == [names.COMPLETED] * requests
    assert lines[-1] == "verdict: conforms"
