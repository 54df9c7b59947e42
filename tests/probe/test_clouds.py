"""The probe on the cloud surfaces, as users run it: ``generate_content`` through the real google-genai client against
the Gemini stand-in, ``converse`` through the real boto3 client against the Bedrock stand-in (dummy credentials from
the environment, as the AWS chain reads them). Each scripted fault gives the row and verdict the contract asks for,
the probe's deadline ends a Bedrock stream that keeps trickling, a config file of both surfaces sends its headers and
writes nothing secret, the monitor counts both surfaces by ``probe_name`` on ``/metrics``, and every bad value is
one refusal in one line."""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.genai")
pytest.importorskip("boto3")

from otelstream import names  # after the skips: the stand-ins import the SDKs
from otelstream.probe import requests
from otelstream.probe.config import ProbeError, Target
from otelstream.probe.requests import PROMPT
from tests.probe.conftest import probe_cli, run_probe
from tests.support import bedrock_server as B
from tests.support import eventstream as ES
from tests.support import gemini_server as G
from tests.support.cloud_server import Pause

GEMINI, BEDROCK = names.GENERATE_CONTENT, names.CONVERSE
FAIL, NOTE = names.VERDICT_FAIL, names.VERDICT_NOTE
BEFORE, DURING = names.PHASE_BEFORE_OUTPUT, names.PHASE_DURING_OUTPUT
NOT_COMPLETED = ((names.VERDICT_NOT_COMPLETED, FAIL),)
INBAND = ((names.VERDICT_INBAND_ERROR, FAIL),)
KEY = "AIza-probe-sentinel-KEY-4d2e"
SECRET_KEY = "aws-probe-sentinel-SECRET-9c1f"
HEADER_VALUE = "hdr-probe-cloud-sentinel-31b7"


@pytest.fixture(scope="module")
def gemini() -> Iterator[G.GeminiServer]:
    with G.GeminiServer() as server:
        yield server


@pytest.fixture(scope="module")
def bedrock() -> Iterator[B.BedrockServer]:
    with B.BedrockServer() as server:
        yield server


def aws_env(tmp_path: Path) -> dict[str, str]:
    """Dummy credentials and a region as the AWS chain reads them; no config file, no instance metadata."""
    return {"AWS_ACCESS_KEY_ID": "AKIAPROBETEST", "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-creds"), "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip


@pytest.fixture
def aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AWS_PROFILE", "AWS_REGION", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(key, raising=False)
    for key, value in aws_env(tmp_path).items():
        monkeypatch.setenv(key, value)


@dataclass(frozen=True)
class Expect:
    outcome: str
    error_class: str | None = None
    error_type: str | None = None
    phase: str | None = None
    findings: tuple[tuple[str, str], ...] = ()
    deltas: int | None = None
    usage: tuple[int | None, int | None] = (None, None)  # input, output tokens

    @property
    def strict_rc(self) -> int:
        return 1 if any(level == FAIL for _, level in self.findings) else 0


CASES: dict[tuple[str, str], Expect] = {
    (GEMINI, "completed"): Expect(names.COMPLETED, deltas=3, usage=(5, 3)),
    (GEMINI, "pause"): Expect(names.COMPLETED, deltas=3, usage=(5, 3)),
    (GEMINI, "reasoning"): Expect(names.COMPLETED, deltas=4, usage=(5, 9)),
    (GEMINI, "cut"): Expect(names.CUT, names.EC_CUT, None, DURING, NOT_COMPLETED, deltas=2),
    (GEMINI, "error_exhausted"): Expect(names.ERROR, names.EC_RATE_LIMITED, "RESOURCE_EXHAUSTED", DURING, INBAND,
                                        deltas=1),
    (GEMINI, "max_tokens"): Expect(names.INCOMPLETE, findings=NOT_COMPLETED, deltas=2, usage=(5, 2)),
    (GEMINI, "http_429"): Expect(names.HTTP_ERROR, names.EC_RATE_LIMITED, "RESOURCE_EXHAUSTED", BEFORE, NOT_COMPLETED),
    (GEMINI, "http_503"): Expect(names.HTTP_ERROR, names.EC_OVERLOADED, "UNAVAILABLE", BEFORE, NOT_COMPLETED),
    (GEMINI, "stall"): Expect(names.TRANSPORT_ERROR, names.EC_TIMEOUT, None, DURING, NOT_COMPLETED, deltas=1),
    (BEDROCK, "completed"): Expect(names.COMPLETED, deltas=2, usage=(8, 3)),  # input counts the cache read and write
    (BEDROCK, "pause"): Expect(names.COMPLETED, deltas=2, usage=(5, 3)),
    (BEDROCK, "reasoning"): Expect(names.COMPLETED, deltas=3, usage=(5, 9)),
    (BEDROCK, "cut"): Expect(names.CUT, names.EC_CUT, None, DURING, NOT_COMPLETED, deltas=2),
    (BEDROCK, "throttled"): Expect(names.ERROR, names.EC_RATE_LIMITED, "throttlingException", DURING, INBAND,
                                   deltas=1),
    (BEDROCK, "max_tokens"): Expect(names.INCOMPLETE, findings=NOT_COMPLETED, deltas=2, usage=(5, 2)),
    (BEDROCK, "http_429"): Expect(names.HTTP_ERROR, names.EC_RATE_LIMITED, "ThrottlingException", BEFORE,
                                  NOT_COMPLETED),
    (BEDROCK, "http_503"): Expect(names.HTTP_ERROR, names.EC_OVERLOADED, "ServiceUnavailableException", BEFORE,
                                  NOT_COMPLETED),
    (BEDROCK, "stall"): Expect(names.TRANSPORT_ERROR, names.EC_TIMEOUT, None, DURING, NOT_COMPLETED, deltas=1),
}


def _probe(surface: str, base_url: str, model: str, *more: str) -> tuple[int, dict[str, Any]]:
    region = ["--region", "us-east-1"] if surface == BEDROCK else []
    run = run_probe("--base-url", base_url, "--surface", surface, "--model", model, "--requests", "1", "--json",
                    "--strict", *region, *more)  # fmt: skip
    assert "Traceback" not in run.err, run.err
    target: dict[str, Any] = run.json()["targets"][0]
    return run.rc, target


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize(("surface", "script"), list(CASES), ids=[f"{s}-{f}" for s, f in CASES])
def test_row_and_verdict_of_each_fault(surface: str, script: str, gemini: G.GeminiServer,
                                       bedrock: B.BedrockServer) -> None:  # fmt: skip
    want = CASES[surface, script]
    server = gemini if surface == GEMINI else bedrock
    timeout = "1" if script == "stall" else "10"  # the stall: the SDK's read timeout ends it
    rc, target = _probe(surface, server.base_url, script, "--timeout", timeout)
    assert rc == want.strict_rc, target
    row = target["rows"][0]
    assert (row["outcome"], row["error_class"], row["error_type"], row["failure_phase"]) == (
        want.outcome, want.error_class, want.error_type, want.phase), row  # fmt: skip
    verdict = target["verdict"]
    assert [(f["code"], f["level"]) for f in verdict["findings"]] == list(want.findings), verdict
    assert target["summary"]["outcomes"] == {want.outcome: 1}
    assert row["observed"] is True and row["timed_out"] is False and row["unobserved"] == []
    if want.deltas is not None:
        assert row["deltas"] == want.deltas
    assert (row["usage"]["input_tokens"], row["usage"]["output_tokens"]) == want.usage
    assert row["request_id"] == (B.REQUEST_ID if surface == BEDROCK else None)
    assert row["keepalives"] in (0, None) and row["done_sentinel"] in (False, None)
    if script == "pause":  # the wait before the first delta is the server's, whatever came before it
        assert row["time_to_first_delta_s"] >= G.PAUSE_S - 0.05
        if surface == BEDROCK:  # messageStart reached the caller before the pause
            assert row["time_to_first_event_s"] < row["time_to_first_delta_s"]
    if script == "reasoning":  # reasoning first: the first output that is not reasoning comes later
        assert row["time_to_first_output_s"] > row["time_to_first_delta_s"]
    if script == "completed":
        assert row["anomalies"] == {} and row["usage_reported"] is True


@pytest.mark.usefixtures("aws")
def test_usage_that_never_comes_fails_the_verdict(gemini: G.GeminiServer, bedrock: B.BedrockServer) -> None:
    """Gemini's usage rides its last chunk unasked; Bedrock's comes in the metadata event after messageStop."""
    no_usage = gemini.add_stream([G.chunk([G.text("Hel")]), G.chunk([G.text("lo")], "STOP")])
    rc, target = _probe(GEMINI, gemini.base_url, no_usage)
    assert rc == 1 and target["rows"][0]["outcome"] == names.COMPLETED
    assert [f["code"] for f in target["verdict"]["findings"]] == [names.VERDICT_NO_USAGE]
    start = ES.event("messageStart", {"role": "assistant"})
    text = ES.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hello"}})
    stop = ES.event("messageStop", {"stopReason": "end_turn"})
    no_metadata = bedrock.add_stream([start, text, stop])
    rc, target = _probe(BEDROCK, bedrock.base_url, no_metadata)
    assert rc == 1 and target["rows"][0]["outcome"] == names.COMPLETED
    assert target["rows"][0]["anomalies"] == {names.ANOM_USAGE_MISSING: 1}
    assert [f["code"] for f in target["verdict"]["findings"]] == [names.ANOM_USAGE_MISSING]


@pytest.mark.usefixtures("aws")
def test_the_deadline_ends_a_bedrock_stream_that_keeps_trickling(bedrock: B.BedrockServer) -> None:
    """Each wait is under botocore's read timeout, so only the probe's own deadline (timeout + 1 s) ends it: at the
    next event, by the caller's close, as an application leaving its loop would."""
    text = ES.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "."}})
    trickle = bedrock.add_stream([ES.event("messageStart", {"role": "assistant"}), *[Pause(0.25), text] * 40])
    rc, target = _probe(BEDROCK, bedrock.base_url, trickle, "--timeout", "1")
    row = target["rows"][0]
    assert rc == 1 and row["timed_out"] is True and row["raised"] is None
    assert (row["outcome"], row["error_class"], row["failure_phase"]) == (names.ABANDONED, None, None)
    assert 1 <= row["deltas"] < 40  # ended before the 40 deltas of its 10 s body
    assert row["duration_s"] >= 2  # not before the deadline


@pytest.mark.usefixtures("aws")
def test_bedrock_requests_run_side_by_side_on_the_client_s_threads(bedrock: B.BedrockServer) -> None:
    """--concurrency 3 on boto3's pool of threads: every request is sent once and reported, in order, each with its
    own wait before the first delta (none reads another's report)."""
    before = len(bedrock.requests)
    run = run_probe("--base-url", bedrock.base_url, "--surface", "converse", "--model", "pause", "--region",
                    "us-east-1", "--requests", "3", "--concurrency", "3", "--json")  # fmt: skip
    assert run.rc == 0, run.err
    target = run.json()["targets"][0]
    assert [(r["request"], r["outcome"]) for r in target["rows"]] == [(i, names.COMPLETED) for i in (1, 2, 3)]
    assert len(bedrock.requests) - before == 3
    assert all(r["time_to_first_delta_s"] >= B.PAUSE_S - 0.05 for r in target["rows"])


def _config(tmp_path: Path, gemini: G.GeminiServer, bedrock: B.BedrockServer, every: str = "") -> Path:
    path = tmp_path / "probes.toml"
    path.write_text(f"""
[[target]]
name = "gemini"
base_url = "{gemini.base_url}"
surface = "generate_content"
model = "completed"
api_key_env = "PROBE_GEMINI_KEY"
requests = 2
{every}
[target.headers_env]
X-Probe-Team = "PROBE_TEAM"

[[target]]
name = "bedrock"
base_url = "{bedrock.base_url}"
surface = "converse"
model = "cut"
region = "us-west-2"
requests = 2
headers_env = {{ X-Probe-Team = "PROBE_TEAM" }}
{every}
""")
    return path


def test_a_config_file_of_both_surfaces_sends_its_headers_and_writes_nothing_secret(
        gemini: G.GeminiServer, bedrock: B.BedrockServer, tmp_path: Path) -> None:  # fmt: skip
    """The installed command on a file: the key and header reach the servers, the region signs the request; the key,
    the AWS secret, the header value, the prompt and the answer appear nowhere the probe writes, spans and metrics
    included (console exporters)."""
    before_g, before_b = len(gemini.requests), len(bedrock.requests)
    env = {**aws_env(tmp_path), "PROBE_GEMINI_KEY": KEY, "PROBE_TEAM": HEADER_VALUE, "OTEL_TRACES_EXPORTER": "console",
           "OTEL_METRICS_EXPORTER": "console", "OTEL_METRIC_EXPORT_INTERVAL": "100"}  # fmt: skip
    run = probe_cli("--config", str(_config(tmp_path, gemini, bedrock)), "--strict", env=env)
    assert run.rc == 1, run.err  # the bedrock target cuts every answer
    written = run.out + run.err
    for secret in (KEY, SECRET_KEY, HEADER_VALUE, PROMPT, "Hel"):
        assert secret not in written, secret
    assert "Traceback" not in written
    assert '"gen_ai.provider.name": "gcp.gemini"' in written and '"gen_ai.provider.name": "aws.bedrock"' in written
    assert '"otelstream.outcome": "cut"' in written and '"probe_name": "bedrock"' in written
    assert "target gemini: generate_content, model completed" in run.out and "verdict: conforms" in run.out
    assert "fail  not_completed (2 requests): cut (cut), during output" in run.out
    sent_g, sent_b = gemini.requests[before_g:], bedrock.requests[before_b:]
    assert len(sent_g) == 2 and len(sent_b) == 2  # one attempt each: no retries
    assert all(r.headers["x-probe-team"] == HEADER_VALUE for r in sent_g + sent_b)
    assert all(r.headers["x-goog-api-key"] == KEY for r in sent_g)
    assert all("/us-west-2/bedrock/aws4_request" in r.headers["authorization"] for r in sent_b)
    assert all(PROMPT in json.loads(r.body)["contents"][0]["parts"][0]["text"] for r in sent_g)
    assert all(json.loads(r.body)["inferenceConfig"] == {"maxTokens": 32} for r in sent_b)


def _streams(metrics: str, probe: str, surface: str, outcome: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith("otelstream_streams_total{") and f'probe_name="{probe}"' in line \
                and f'surface="{surface}"' in line and f'outcome="{outcome}"' in line:  # fmt: skip
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_the_monitor_counts_both_surfaces_by_probe_name(gemini: G.GeminiServer, bedrock: B.BedrockServer,
                                                        tmp_path: Path) -> None:  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELSTREAM_", "AWS_", "GOOGLE_"))}
    env |= {**aws_env(tmp_path), "PROBE_GEMINI_KEY": KEY, "PROBE_TEAM": HEADER_VALUE, "OTELSTREAM_SELF_CHECK": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "otelstream.cli", "probe", "--config",
                             str(_config(tmp_path, gemini, bedrock, every="every = 1")), "--serve", "0", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert proc.stderr is not None
        found = re.search(r"metrics on (http://\S+/metrics)", proc.stderr.readline())
        assert found
        deadline = time.monotonic() + 30
        metrics = ""
        while time.monotonic() < deadline:
            with urllib.request.urlopen(found.group(1), timeout=5) as response:
                metrics = response.read().decode()
            if _streams(metrics, "gemini", GEMINI, names.COMPLETED) >= 2 and \
                    _streams(metrics, "bedrock", BEDROCK, names.CUT) >= 2:  # fmt: skip
                break
            time.sleep(0.2)
        else:
            raise AssertionError(metrics)
        assert _streams(metrics, "gemini", GEMINI, names.CUT) == 0
        assert _streams(metrics, "bedrock", BEDROCK, names.COMPLETED) == 0
        assert re.search(r'otelstream_streams_total\{[^}]*gen_ai_provider_name="aws.bedrock"[^}]*probe_name="bedrock"',
                         metrics)  # fmt: skip
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and "Traceback" not in err, err
    rounds = [json.loads(line) for line in out.splitlines()]
    assert {r["surface"] for r in rounds} == {GEMINI, BEDROCK}
    assert all(r["verdict"]["ok"] is (r["name"] == "gemini") for r in rounds)


@pytest.mark.parametrize("script", ["completed", "cut"])
def test_vertex_ai_with_application_default_credentials(script: str, gemini: G.GeminiServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A project makes the target Vertex AI: the request goes to the project's and location's path, signed with the
    token google-auth got for the service account named by GOOGLE_APPLICATION_CREDENTIALS."""
    pytest.importorskip("cryptography")
    from tests.probe import google_adc

    with google_adc.TokenServer() as tokens:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS",
                           str(google_adc.service_account_file(tmp_path, tokens.url)))  # fmt: skip
        before = len(gemini.requests)
        rc, target = _probe(GEMINI, gemini.base_url, script, "--project", google_adc.PROJECT, "--location",
                            "europe-west4")  # fmt: skip
        assert tokens.grants == 1
    want = CASES[GEMINI, script]
    row = target["rows"][0]
    assert rc == want.strict_rc and (row["outcome"], row["deltas"]) == (want.outcome, want.deltas), row
    (sent,) = gemini.requests[before:]
    assert sent.path.startswith(f"/v1beta1/projects/{google_adc.PROJECT}/locations/europe-west4/publishers/google/"
                                f"models/{script}:streamGenerateContent")  # fmt: skip
    assert sent.headers["authorization"] == f"Bearer {google_adc.TOKEN}" and "x-goog-api-key" not in sent.headers


# --- refusals ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "said"), [
    (["--surface", "converse", "--api-key-env", "AWS_SECRET_ACCESS_KEY"],
     "--api-key-env: surface converse signs with the AWS credential chain"),
    (["--surface", "generate_content", "--region", "us-east-1"], "--region: only surface converse takes a region"),
    (["--surface", "converse", "--region", "US East"], "--region: an AWS region name is needed"),
    (["--surface", "converse", "--base-url", "bedrock.example"], "--base-url: an absolute http/https URL"),
    (["--surface", "gemini"], "argument --surface: invalid choice"),
    (["--surface", "converse", "--project", "p-1"], "--project: only surface generate_content takes a project"),
    (["--surface", "generate_content", "--location", "us-central1"], "--location: a location needs a project"),
    (["--surface", "generate_content", "--project", "Bad Project"], "--project: a Google Cloud project id"),
    (["--surface", "generate_content", "--project", "p-1", "--api-key-env", "K"],
     "--api-key-env: a Vertex AI target (project) signs with Google's Application Default Credentials"),
])  # fmt: skip
def test_bad_values_are_refused_in_one_line(argv: list[str], said: str) -> None:
    base = {"--base-url": "http://127.0.0.1:9", "--model": "m"}
    given = dict(zip(argv[::2], argv[1::2], strict=True))
    run = run_probe(*[x for k, v in {**base, **given}.items() for x in (k, v)])
    assert run.rc == 2 and run.out == "", run
    assert run.err.startswith("otelstream probe: ") and run.err.count("\n") == 1 and said in run.err, run.err


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize(("drop", "said"), [
    ("AWS_DEFAULT_REGION", "surface converse needs an AWS region: --region, region in the file, or "
                           "AWS_DEFAULT_REGION"),
    ("AWS_ACCESS_KEY_ID", "no AWS credentials found: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                          "or AWS_BEARER_TOKEN_BEDROCK, or run where a role provides them"),
])  # fmt: skip
def test_a_converse_target_without_region_or_credentials_is_refused_before_sending(
        drop: str, said: str, bedrock: B.BedrockServer, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    before = len(bedrock.requests)
    monkeypatch.delenv(drop)
    run = run_probe("--base-url", bedrock.base_url, "--surface", "converse", "--model", "completed")
    assert run.rc == 2 and run.out == "", run
    assert run.err == f"otelstream probe: target '127.0.0.1-converse': {said}\n"
    assert len(bedrock.requests) == before


def test_a_vertex_target_without_default_credentials_is_refused_before_sending(gemini: G.GeminiServer,
                                                                               tmp_path: Path) -> None:  # fmt: skip
    """No key file, no gcloud credentials, not on Google Cloud (NO_GCE_CHECK: the metadata server is not asked)."""
    before = len(gemini.requests)
    env = {"GOOGLE_APPLICATION_CREDENTIALS": "", "CLOUDSDK_CONFIG": str(tmp_path), "NO_GCE_CHECK": "true"}
    run = probe_cli("--base-url", gemini.base_url, "--surface", "generate_content", "--model", "completed",
                    "--project", "p-1", env=env)  # fmt: skip
    assert run.rc == 2 and run.out == "", run
    assert run.err.startswith("otelstream probe: target '127.0.0.1-generate_content': no Google Application Default "
                              "Credentials (") and run.err.count("\n") == 1, run.err  # fmt: skip
    assert "GOOGLE_APPLICATION_CREDENTIALS" in run.err and "Traceback" not in run.err
    assert len(gemini.requests) == before


def test_a_bad_cloud_target_in_a_file_names_its_line(tmp_path: Path) -> None:
    head = '[[target]]\nname = "b"\nbase_url = "http://h"\nsurface = "converse"\nmodel = "m"\n'
    for extra, line, said in (
        ('api_key_env = "K"\n', 6, "target[0] key 'api_key_env': surface converse signs"),
        ('region = "Mars 1"\n', 6, "target[0] key 'region': an AWS region name"),
        ('regoin = "us-east-1"\n', 6, "target[0] key 'regoin': unknown key"),
        ('project = "p-1"\n', 6, "target[0] key 'project': only surface generate_content"),
    ):
        path = tmp_path / "p.toml"
        path.write_text(head + extra)
        run = run_probe("--config", str(path))
        assert run.rc == 2 and run.err.startswith(f"otelstream probe: {path}:{line}: {said}"), run.err
    path.write_text(head.replace("converse", "generate_content") + 'region = "us-east-1"\n')
    run = run_probe("--config", str(path))
    assert run.rc == 2 and "key 'region': only surface converse takes a region" in run.err, run.err
    path.write_text(head.replace("converse", "generate_content") + 'location = "us-central1"\n')
    run = run_probe("--config", str(path))
    assert run.rc == 2 and "key 'location': a location needs a project" in run.err, run.err


@pytest.mark.parametrize(("surface", "module", "extra"), [(GEMINI, "google.genai", "google"),
                                                         (BEDROCK, "boto3", "bedrock")])  # fmt: skip
def test_a_missing_sdk_names_the_extra_that_installs_it(surface: str, module: str, extra: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    real = importlib.import_module

    def without(name: str, *args: object) -> object:
        if name == module:
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without)
    with pytest.raises(ProbeError) as raised:
        requests.require_sdk(Target("t", "http://127.0.0.1:1", surface, "m"))
    said = str(raised.value)
    assert said.startswith(f"surface {surface} needs the {module} SDK: ") and "\n" not in said
    assert f"pip install '/path/to/otelstream[{extra}]'" in said
