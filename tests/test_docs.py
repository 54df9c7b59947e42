"""The docs say what the code does: the README's alert table is the shipped rules' alerts, exactly (name, `for`,
severity); no text in the repository points at a design document it does not ship; the install commands the README
gives are the ones CI runs."""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO

yaml = pytest.importorskip("yaml", reason="pyyaml not installed (it is in the test extra)")

README = REPO / "README.md"
RULES = REPO / "dashboards" / "prometheus" / "otelstream.rules.yml"


def _readme_alerts() -> dict[str, tuple[str, str]]:
    """``| `Name` | when | for | severity |`` rows of the README: name -> (for, severity)."""
    rows = re.findall(r"^\| `(Otelstream\w+)` \| .+? \| (\w+) \| (critical|warning) \|$", README.read_text(), re.M)
    names = [r[0] for r in rows]
    assert len(names) == len(set(names)), names
    return {name: (wait, severity) for name, wait, severity in rows}


def test_the_readme_lists_every_shipped_alert_exactly() -> None:
    shipped = {
        rule["alert"]: (str(rule["for"]), rule["labels"]["severity"])
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    assert _readme_alerts() == shipped


def test_no_text_refers_to_a_design_document_the_repository_lacks() -> None:
    """README, docs, docstrings and comments once cited "DESIGN §…"; the repository has no DESIGN to read."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    assert not (REPO / "DESIGN.md").exists()
    found = []
    for name in files:
        path = REPO / name
        if path.suffix not in (".py", ".md", ".yml", ".yaml", ".json", ".toml", ".sh", ".txt") or not path.is_file():
            continue
        if path == Path(__file__).resolve():
            continue  # this test names what it looks for
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if re.search(r"DESIGN(\.md)? ?§|DESIGN\.md", line):
                found.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


def test_the_readme_install_commands_are_the_ones_ci_runs() -> None:
    """.ci/wheel.sh installs the built wheel with the extras the README names, as the README writes it."""
    readme = README.read_text()
    wheel_sh = (REPO / ".ci" / "wheel.sh").read_text()
    assert "pip install 'dist/otelstream-0.1.0-py3-none-any.whl[openai,anthropic,otlp]'" in readme
    assert "python -m build" in readme and "python -m build" in wheel_sh
    assert '"$wheel[openai,anthropic,otlp]"' in wheel_sh
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert version is not None and f"otelstream-{version.group(1)}-py3-none-any.whl" in readme


def _fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)


def test_the_probe_deployment_runs_an_image_built_from_the_wheel() -> None:
    """otelstream is not on the package index: a pod that pip-installs it by name crash-loops, or installs whoever
    registered the name. docs/probe.md builds an image from the wheel a checkout builds, and the Deployment runs it."""
    from otelstream.probe import command as probe_command

    text = (REPO / "docs" / "probe.md").read_text()
    section = text[text.index("### Kubernetes") :]
    project = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    extras = re.search(r"^\[project\.optional-dependencies\]\n(.*?)^\[", (REPO / "pyproject.toml").read_text(),
                       re.M | re.S)  # fmt: skip
    assert project is not None and extras is not None
    wheel = f"otelstream-{project.group(1)}-py3-none-any.whl"  # the build without the compiled accelerator
    known_extras = set(re.findall(r"^([\w-]+) = \[", extras.group(1), re.M))

    (dockerfile,) = [b for b in _fenced(section, "dockerfile") if "FROM " in b]
    assert f"COPY {wheel} /tmp/" in dockerfile
    installed = re.search(rf"RUN pip install --no-cache-dir '/tmp/{re.escape(wheel)}\[([\w,-]+)\]'", dockerfile)
    assert installed and set(installed.group(1).split(",")) <= known_extras, dockerfile
    assert 'ENTRYPOINT ["otelstream"]' in dockerfile
    assert "otelstream = \"otelstream.cli:main\"" in (REPO / "pyproject.toml").read_text()  # the entry point exists

    (build,) = [b for b in _fenced(section, "bash") if "docker build" in b]
    assert f"OTELSTREAM_PURE_PYTHON=1 python -m build --wheel  # in the checkout: dist/{wheel}" in build
    registry = re.search(r"^REGISTRY=(\S+)", build, re.M)
    tag = re.search(r'docker build -f probe\.Dockerfile -t "\$REGISTRY/([^"]+)" dist$', build, re.M)
    assert registry and tag, build

    (manifests,) = [b for b in _fenced(section, "yaml") if "kind: Deployment" in b]
    deployment = next(d for d in yaml.safe_load_all(manifests) if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{registry.group(1)}/{tag.group(1)}"
    assert "command" not in container and "pip" not in manifests  # the image's entry point; nothing installed
    # the args are a probe command line the probe takes
    args = container["args"]
    assert args[0] == "probe"
    parser = argparse.ArgumentParser()
    probe_command.add_arguments(parser)
    parsed = parser.parse_args(args[1:])
    mount = container["volumeMounts"][0]["mountPath"]
    config_map = next(d for d in yaml.safe_load_all(manifests) if d["kind"] == "ConfigMap")
    assert parsed.config in {f"{mount}/{key}" for key in config_map["data"]}
    assert str(parsed.serve) in {str(p["containerPort"]) for p in container["ports"]}


def test_the_readme_says_how_long_the_tests_take_and_why_some_skip() -> None:
    """Near the top, beside the test command: its duration, and the two reasons a fresh machine skips tests, each
    with the remedy the skipped tests themselves print."""
    readme = README.read_text()
    top = readme[: readme.index("## Install into your service")]
    # the two commands, exactly as a newcomer copies them
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[demo]' && otelstream demo\n" in top
    command = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && python -m pytest -q\n"
    assert command in top
    after = top[top.index(command) :]
    assert "about 26 minutes on two cores" in after
    assert "Debian's `prometheus` package" in after and "`sudo apt-get install prometheus`" in after
    assert "`../shared/captures`" in after
    tests = REPO / "tests"
    assert "apt-get install prometheus" in (tests / "dashboards" / "test_prometheus_e2e.py").read_text()
    assert "../shared/captures" in (tests / "conftest.py").read_text()
    assert (tests / "support" / "paths.py").read_text().count('REPO.parent / "shared" / "captures"') == 1
