"""The SDK sets a run measures: each one's interpreter, which configurations apply there, and which releases (and
peers) it has installed, for the record's header."""

from __future__ import annotations

import json
import os
import platform
import subprocess

from bench import configs


class Sdk:
    """One SDK set: a label (``newest``, ``oldest``) and the interpreter whose venv has those releases installed."""

    def __init__(self, label: str, python: str, surfaces: tuple[str, ...] | None = None, peers: bool = False) -> None:
        self.label, self.python = label, python
        self.surfaces = surfaces  # None: every surface it can run; else only these (a venv kept for one peer)
        self.peers = peers  # whether the peers are measured in this set
        self.avail: dict = {}
        self.versions: dict = {}

    def runs(self, surface: str) -> bool:
        return self.surfaces is None or surface in self.surfaces


SDKS: list[Sdk] = []  # filled by main(); SDKS[0] is the newest: the wall-clock stages and the peers run there
# the SDK set of OpenTelemetry's google-genai instrumentation, which requires google-genai < 3: the newest 2.x it
# accepts, generate_content only, the peer beside otelstream and the baseline on the same release
GENAI2 = "genai2"


def python() -> str:
    return SDKS[0].python


def applicable(config: str, surface: str, avail: dict) -> bool:
    return avail.get((config, surface), False)


def machine() -> dict:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    sdks = {}
    for sdk in SDKS:
        # httpx only where an SDK reads with it (openai 2.x): a package not installed is left out
        vers = dist_versions(sdk.python, ["openai", "anthropic", "google-genai", "boto3", "botocore", "aiobotocore",
                                          "httpx2", "httpx", "opentelemetry-sdk", "pydantic"])  # fmt: skip
        sdk.versions = {k.replace("-", "_"): v for k, v in vers.items() if v}
        sdks[sdk.label] = sdk.versions
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "kernel": platform.release(),
            "versions": SDKS[0].versions, "sdks": sdks, "peers": peer_versions()}  # fmt: skip


def dist_versions(py: str, names: list[str]) -> dict:
    """The interpreter's Python version (``python``) and each distribution's installed version (None: not installed)."""
    code = ("import importlib.metadata as m, json, sys; out = {'python': sys.version.split()[0]}\n"
            "for n in %r:\n    try: out[n] = m.version(n)\n    except Exception: out[n] = None\nprint(json.dumps(out))")
    p = subprocess.run([py, "-c", code % (names,)], capture_output=True, text=True)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        return {}


def peer_versions() -> dict:
    names = [n for pair in configs.PIP_NAMES.values() for n in pair]
    vers: dict = {}
    for sdk in SDKS:
        if not sdk.peers:
            continue
        found = dist_versions(sdk.python, names)
        found.pop("python", None)
        for n, v in found.items():
            if v and not vers.get(n):
                vers[n] = v if sdk is SDKS[0] else f"{v} (in the {sdk.label} set)"
            vers.setdefault(n, v)
    return vers

