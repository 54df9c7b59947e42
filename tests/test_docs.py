"""The docs say what the code does: the README's alert table is the shipped rules' alerts, exactly (name, `for`,
severity); no text in the repository points at a design document it does not ship; the install commands the README
gives are the ones CI runs."""

from __future__ import annotations

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
