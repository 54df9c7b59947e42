"""prometheus_client multiprocess mode: 4 worker processes stream, one scrape of the aggregate shows the sum."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.paths import REPO

WORKER = textwrap.dedent(
    """
    import sys
    from tests.export.harness import Clock, FakeTracker, make_start, run_stream
    from prometheus_client import CollectorRegistry
    from otelstream import config
    from otelstream.export import build_pipeline
    from otelstream.export.prometheus import multiprocess_mode

    assert multiprocess_mode()
    p = build_pipeline(config.load({"watchdog_interval_s": 3600}, environ={}), registry=CollectorRegistry())
    clock = Clock()
    for _ in range(5):
        run_stream(p, clock)
    start = make_start(t_request_ns=clock())
    tracker = FakeTracker(start, clock)  # one stream left open: the livesum gauge counts it
    p.stream_started(start, tracker)
    p.watchdog.tick()  # multiprocess mode: the tick writes the live gauges into the process's file
    assert p.flush(10)
    if "shutdown" in sys.argv[1:]:
        p.shutdown()  # what uninstrument() ends in: this process no longer tracks the open stream
    print("ok", flush=True)
    if "exit" not in sys.argv[1:]:
        sys.stdin.read()  # alive until the scrape is done: live gauges count live processes only
    """
)

SERVER = textwrap.dedent(
    """
    import sys, urllib.request
    from otelstream.export import start_metrics_server
    port = int(sys.argv[1])
    server = start_metrics_server(port, "127.0.0.1")
    assert server is not None
    assert start_metrics_server(port, "127.0.0.1") is None  # a second "worker": port taken, logged, no crash
    print(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode())
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape_after(
    tmp_path: Path, workers: list[list[str]], pre_scrape: str = ""
) -> tuple[dict[tuple[str, ...], float], str]:
    mp_dir = tmp_path / "prom"
    mp_dir.mkdir()
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(mp_dir))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    pipe = subprocess.PIPE
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, *a], env=env, stdin=pipe, stdout=pipe,
                              stderr=pipe) for a in workers]  # fmt: skip
    try:
        for w in procs:
            assert w.stdout is not None
            assert w.stdout.readline().decode().strip() == "ok", w.communicate(timeout=60)[1].decode()
        for w, a in zip(procs, workers, strict=True):
            if "exit" in a:
                assert w.wait(timeout=60) == 0
        scrape = subprocess.run([sys.executable, "-c", pre_scrape + SERVER, str(free_port())], env=env,
                                capture_output=True, timeout=60, check=False)  # fmt: skip
    finally:
        for w in procs:
            _, err = w.communicate(timeout=60)
            assert w.returncode == 0, err.decode()
    assert scrape.returncode == 0, scrape.stderr.decode()
    samples = {
        (s.name, s.labels.get("surface"), s.labels.get("outcome"), s.labels.get("le")): s.value
        for fam in text_string_to_metric_families(scrape.stdout.decode())
        for s in fam.samples
    }
    return samples, scrape.stdout.decode()


def test_four_workers_one_aggregated_scrape(tmp_path: Path) -> None:
    samples, text = _scrape_after(tmp_path, [[]] * 4)
    assert samples[("otelstream_streams_total", "responses", "completed", None)] == 20
    assert samples[("gen_ai_client_operation_duration_seconds_count", None, None, None)] == 20
    assert samples[("gen_ai_client_operation_time_to_first_chunk_seconds_bucket", None, None, "0.32")] == 20
    assert samples[("otelstream_streams_active", "responses", None, None)] == 4
    assert "trace_id" not in text  # no exemplars in multiprocess mode


def test_a_shut_down_pipeline_leaves_no_open_streams_in_the_gauge(tmp_path: Path) -> None:
    """livesum sums every live process's file: a pipeline that stops tracking its streams writes 0 there, else the
    process would report an open stream for good."""
    samples, _ = _scrape_after(tmp_path, [["shutdown"], []])
    assert samples[("otelstream_streams_active", "responses", None, None)] == 1
    assert samples[("otelstream_streams_total", "responses", "completed", None)] == 10


def test_exited_workers_stop_counting_in_the_live_gauges_and_their_counters_stay(tmp_path: Path) -> None:
    """A worker that exits (or is killed) with a stream open counted in otelstream_streams_active for good: its
    livesum file stayed, and only a mark_process_dead hook the application writes removed it. Now the scrape sweeps
    the live gauges of processes that are gone; counters of its finished streams stay."""
    samples, _ = _scrape_after(tmp_path, [["exit"], ["exit"], []])
    assert samples[("otelstream_streams_active", "responses", None, None)] == 1  # the one live worker
    assert samples[("otelstream_streams_total", "responses", "completed", None)] == 15
    assert not [p for p in os.listdir(tmp_path / "prom") if p.startswith("gauge_livesum_")][1:]


REUSED_PID = textwrap.dedent(
    """
    import glob, os
    from otelstream import config
    from otelstream.export import build_pipeline
    from prometheus_client import CollectorRegistry
    # A container restart: this process has the pid a previous run's worker had, whose open stream is in the file.
    [old] = glob.glob(os.path.join(os.environ["PROMETHEUS_MULTIPROC_DIR"], "gauge_livesum_*.db"))
    os.rename(old, os.path.join(os.path.dirname(old), f"gauge_livesum_{os.getpid()}.db"))
    build_pipeline(config.load({}, environ={}), registry=CollectorRegistry())
    """
)


def test_a_restart_with_a_previous_workers_pid_does_not_inherit_its_gauges(tmp_path: Path) -> None:
    samples, _ = _scrape_after(tmp_path, [["exit"]], pre_scrape=REUSED_PID)
    assert samples.get(("otelstream_streams_active", "responses", None, None), 0) == 0
    assert samples[("otelstream_streams_total", "responses", "completed", None)] == 5
