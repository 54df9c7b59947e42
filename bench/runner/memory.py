"""The memory stage's jobs and figures: tracemalloc workers (``bench/workers/memory.py``), heap per open stream and
retained after the streams end, each against the baseline."""

from __future__ import annotations

from bench.runner.procs import run_worker
from bench.runner.sdks import SDKS, applicable

MEM_VARIANTS = (("baseline", "on"), ("otelstream", "off"), ("otelstream-default", "on"))


def mem_jobs(a) -> list[tuple[float, str, object]]:
    """The first surface gets the full ``--mem-total`` retained run; the others 1/5 of it. The oldest SDK set: the
    open-stream figure only (a tenth of the retained run)."""
    jobs = []
    for k, sdk in enumerate(SDKS):
        for n, surface in enumerate(a.mem_surfaces):
            total = a.mem_total if n == 0 else max(1, a.mem_total // 5)
            total = total if k == 0 else max(1, total // 10)
            for cfg, tracing in MEM_VARIANTS:
                if not sdk.runs(surface) or not applicable(cfg, surface, sdk.avail):
                    continue

                def one(sdk=sdk, surface=surface, cfg=cfg, tracing=tracing, total=total):
                    r = run_worker(["memory", cfg, surface, "--open", str(a.mem_open), "--total", str(total),
                                    "--tracing", tracing], timeout=900, sdk=sdk)  # fmt: skip
                    return "memory", (sdk.label, surface, cfg, tracing), r

                jobs.append((5 + total * 0.008, f"memory {sdk.label} {surface} {cfg} tracing {tracing} N={total}", one))
    return jobs


def mem_collect(a, got: dict) -> dict:
    rows = []
    for sdk in SDKS:
        for surface in a.mem_surfaces:
            base = got.get((sdk.label, surface, "baseline", "on"))
            for cfg, tracing in MEM_VARIANTS:
                r = got.get((sdk.label, surface, cfg, tracing))
                if r is None:
                    continue
                row = {"sdk": sdk.label, "config": cfg, "tracing": tracing, "surface": surface}
                if "error" in r:
                    row["error"] = r["error"]
                else:
                    row.update(open_bytes_per_stream=r["open_bytes_per_stream"], retained_bytes=r["retained_bytes"],
                               total_streams=r["total_streams"], open_streams=r["open_streams"])  # fmt: skip
                    if base and "error" not in base:
                        row["added_open_bytes_per_stream"] = r["open_bytes_per_stream"] - base["open_bytes_per_stream"]
                        row["added_retained_bytes"] = r["retained_bytes"] - base["retained_bytes"]
                        if "second_half_retained_bytes" in r and "second_half_retained_bytes" in base:
                            row["second_half_streams"] = r["second_half_streams"]
                            row["added_second_half_retained_bytes"] = (
                                r["second_half_retained_bytes"] - base["second_half_retained_bytes"]
                            )
                rows.append(row)
    return {"rows": rows}
