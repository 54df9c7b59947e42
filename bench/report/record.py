"""Turns ``bench/results.json`` into ``bench/RESULTS.md`` (``python -m bench.report`` re-renders it)."""

from __future__ import annotations

import json
import os

from bench.report.budgets import BUDGET_IR, BUDGET_IR_HTTP, BUDGET_OPEN, budget_table
from bench.report.tables import cg_table, is_http, memory_table, overhead_table, scale_lines, ttfd_table

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/

HTTP_CELLS = ("`http-chat` and `http-messages` are the HTTP-level observer's cells (`adapters/http/streams.py`: the "
              "streams no SDK adapter sees, e.g. litellm's own providers): a plain client, sync and async, of the "
              "HTTP library the set's openai reads with (in parentheses), streams the same Chat and Messages bodies "
              "from its MockTransport, and the caller reads them with `iter_lines()`, parsing every `data:` payload "
              "but `[DONE]` (Messages' ping included: one event more per stream than the SDK yields); the baseline "
              "does the same uninstrumented. No peer observes such a stream.")  # fmt: skip


def write(res: dict, path: str) -> None:
    m = res.get("machine", {})
    sdks = m.get("sdks") or {"newest": m.get("versions") or {}}
    lines = ["# otelstream benchmark results", "",
             f"Made by `{res.get('command')}` ({res.get('date')}, {res.get('seconds', 0):.0f} s), otelstream at "
             f"`{str(res.get('otelstream_commit'))[:10]}`; `$PEERS_VENV` is a venv from `bench/requirements-peers.txt`, "
             "`$OLDEST_VENV` one from `bench/requirements-oldest.txt`. Rendered by `bench/report/record.py` from the run's "
             "`bench/results.json` (not committed).", "",
             f"Machine: {m.get('cpu')} × {m.get('cores')} cores, {m.get('memory')}, Linux {m.get('kernel')}.", "",
             "SDK sets: " + "; ".join(f"**{k}**: " + ", ".join(f"{n} {v}" for n, v in vs.items())
                                      for k, vs in sdks.items()) + ".", "",
             "Peers (in the newest set): " + ", ".join(f"`{k}` {v or 'not installed'}"
                                                       for k, v in (m.get("peers") or {}).items()) + ".",
             ""]  # fmt: skip
    if len(sdks) < 2:
        lines += ["**The oldest supported SDK releases were not measured in this run** (no `--oldest-python`).", ""]
    lines += ["## docs/benchmarks.md budgets", "", *budget_table(res), ""]
    if "overhead" in res:
        ov = res["overhead"]
        lines += ["## Wall-clock time added per event", "",
                  f"{ov['rounds']} interleaved rounds, a fresh process per configuration and round"
                  + (" (forked from a process that has only imported httpx2 and the SDK)" if ov.get("fork_server") else "")
                  + f", {ov['streams']} "
                  f"timed streams of {ov['deltas']} deltas per process (after 5 warm-up streams); median of per-process "
                  "medians of (stream wall time / events). Ratio = configuration / baseline. Peers with in-memory "
                  "exporters; a configuration that produced no span or metric is marked **no telemetry** and not "
                  "counted. Noise: the SDK itself costs 20–110 µs per event, so differences under ~2 µs are within "
                  "run-to-run noise; the verdict is by callgrind below."
                  + (" The `http-*` rows (the HTTP-level observer, a plain httpx2 client: see the callgrind section) "
                     "have no SDK parsing to hide behind: their baseline is the caller's own line splitting and "
                     "`json.loads`, so their ratios are large." if any(is_http(r["surface"]) for r in ov.get("rows", ()))
                     else ""), ""] + overhead_table(ov) + [""]  # fmt: skip
    if "cg" in res:
        cg = res["cg"]
        if "error" in cg:
            lines += ["## Instructions per event (callgrind)", "", f"Not run: {cg['error']}", ""]
        else:
            lines += ["## Instructions added per event (callgrind)", "",
                      "`valgrind --tool=callgrind --separate-threads=yes`, `PYTHONHASHSEED=0`, one process per SDK "
                      "set and configuration (and heap layout, for otelstream); the worker runs `callgrind_control -d` "
                      "on itself before and after each measured phase (after 2 warm-up streams; each phase ends with "
                      "`otelstream.flush()`), so each dump holds exactly one phase, every thread included (export and "
                      "watchdog), the caller's thread (1) also counted apart. Two phases per surface and mode: "
                      f"{cg.get('short_streams')} streams of {cg.get('short_deltas')} deltas and {cg['streams']} streams "
                      f"of {cg['deltas']} deltas, which split the cost into a fixed part per stream and a marginal part "
                      "per event; added = configuration − baseline. "
                      + ("For otelstream each phase is followed, in the same process, by its twin after "
                         "`uninstrument()` (then `instrument()` again), and the twin is what it is measured against: "
                         "the SDK's own cost per event moves by up to ≈0.5 % between processes with different imports "
                         "(≈4 000 Ir on an 840 000-Ir Chat event), the size of what is measured; within one process it "
                         "does not. "
                         if cg.get("paired") else "")
                      + (f"So each otelstream cell is the median over {len(cg['layouts'])} processes given "
                         f"{', '.join(map(str, cg['layouts']))} extra types and interned names before the imports "
                         "(another type-cache and heap layout each; each process's figure is shown under `layouts`)"
                         + (f"; in the oldest SDK set over {len(cg['oldest_layouts'])}" if "oldest_layouts" in cg
                            and len(sdks) > 1 else "") + ". "
                         if len(cg.get("layouts", ())) > 1 else "")
                      + (f"The watchdog ticks every {cg['watchdog_interval_s']:g} s here: its cost is per second of "
                         "wall time, and under valgrind's ≈50× slowdown a 1 s tick would land on ≈50× fewer events "
                         "than natively; the scale stage measures its share of a core. "
                         if cg.get("watchdog_interval_s", 1) > 1 else "")
                      + (f"Before the first phase, {cg['prewarm']} pre-warm streams per surface and "
                         "mode, uninstrumented (`--instr-atstart=no`; the worker then runs `callgrind_control -i on` on "
                         "itself, before the first phase's warm-up). Back-to-back runs agree to ≈ ±600 Ir "
                         "per event (rms; at most ≈1 600) on the added figures, to ≈0.05 % on the baseline. "
                         if "prewarm" in cg else "Deterministic to a few instructions per event. ")
                      + f"Budgets: marginal ≤ {BUDGET_IR:,} per event (the HTTP-level observer's: ≤ {BUDGET_IR_HTTP:,}); fixed ≤ 0.75 M (default) / 1.1 M (all sinks) per stream, "
                        "≤ 0.3 M of it on the caller's thread (`caller`). Peers: in the newest SDK set only. "
                        + HTTP_CELLS, ""]  # fmt: skip
            for sdk in sdks:
                lines += [f"### {sdk} SDK releases ({', '.join(f'{n} {sdks[sdk].get(n)}' for n in ('openai', 'anthropic'))})",
                          "", *cg_table(cg, sdk), ""]  # fmt: skip
    if "memory" in res:
        lines += ["## Memory per open stream and retained", "",
                  "tracemalloc, sync clients over MockTransport, after 20 warm-up streams: heap growth while holding "
                  "N open streams (first event pulled) / N; then heap growth over N more streams run to the end "
                  "(after `flush()`, GC, and clearing the in-memory span exporter, which keeps spans by design). "
                  "`tracing off` = `instrument()` without a tracer provider (Prometheus only); `on` = in-memory "
                  f"tracer and meter providers (a started span per open stream). Budget: ≤ {BUDGET_OPEN:,} B per open "
                  "stream with tracing off; 0 retained, judged over the run's last half (the heap is read halfway "
                  "too: a one-off change inside the run moves the whole-run figure alike for any N, and a negative "
                  "one is an offset, not proof).", ""] + memory_table(res["memory"]) + [""]  # fmt: skip
    if "scale" in res:
        st = res["scale"].get("settings") or {}
        how = (f"Each stream, once open (headers in, span started), waits unread until all are open, then a "
               f"{st['hold']:g} s hold, then all are read: every stream open at once by construction."
               if "hold" in st else f"{st.get('ttfd', 45):g} s to the first delta so that all are open at once.")
        lines += ["## 10 000 concurrent async streams (fake provider)", "",
                  "`bench/workers/scale.py`: the fake provider in its own process; the streams spread over 50 `AsyncOpenAI` "
                  f"clients with raised `httpx2.Limits`; Chat streams with usage, 10 deltas. {how} Single = the same client process running 500 streams "
                  "one at a time first. CPU per event = client process CPU time (all threads) / events; short "
                  "streams, so the per-stream cost dominates the added figure. The watchdog's share of a core is "
                  "given over the whole phase and over the hold (all streams open).",
                  ""] + scale_lines(res["scale"]) + [""]  # fmt: skip
    if "ttfd" in res:
        lines += ["## Time to first delta with a scripted pause", "",
                  f"The first SSE frame arrives at once, then a {res['ttfd'].get('pause_s')} s pause before the first "
                  "content delta. Truth = the caller's clock from before `create()` to receiving the first delta.",
                  ""] + ttfd_table(res["ttfd"]) + [""]  # fmt: skip
    # the notes (how to run, method, findings) live once, in NOTES.md: the record points there, it does not copy them
    lines += ["## Notes", "", "How to run, the method and the findings behind these figures: [NOTES.md](NOTES.md).", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")


SECTION_BEGIN, SECTION_END = "<!-- cloud-section: begin -->", "<!-- cloud-section: end -->"


def merge_runs(runs: list[dict]) -> dict:
    """Several runs limited to the cloud cells as one: their rows (a cell that failed in one run and was measured in
    another is the measured one), SDK sets and peers; ``runs`` keeps each run's command and callgrind settings."""
    out = json.loads(json.dumps(runs[0]))
    out["runs"] = []
    rows: dict = {}
    for res in runs:
        cg = res.get("cg") or {}
        out["runs"].append({"command": res.get("command"), "date": res.get("date"), "seconds": res.get("seconds"),
                            "otelstream_commit": res.get("otelstream_commit"),
                            **{k: cg.get(k) for k in ("streams", "deltas", "short_deltas", "short_streams",
                                                      "prewarm", "layouts")}})  # fmt: skip
        for r in cg.get("rows", []):
            key = (r.get("sdk"), r["config"], r["surface"], r["mode"])
            if key not in rows or "error" in rows[key]:
                rows[key] = r
        m = res.get("machine") or {}
        for k, v in (m.get("sdks") or {}).items():
            for name, version in v.items():
                out["machine"].setdefault("sdks", {}).setdefault(k, {}).setdefault(name, version)
        for k, v in (m.get("peers") or {}).items():
            if v and not out["machine"].setdefault("peers", {}).get(k):
                out["machine"]["peers"][k] = v
        for k in res.get("sdk_sets") or ():
            if k not in out["sdk_sets"]:
                out["sdk_sets"].append(k)
    out.setdefault("cg", {})["rows"] = [r for r in rows.values() if "error" not in r]
    return out


def cloud_section(res: dict) -> list[str]:
    """The Gemini and Bedrock cells of a run limited to them (callgrind, memory): its own command, versions, budget
    lines, tables and which peers' spans cover the stream. Kept beside the full record, which it does not replace.
    ``res`` may be several runs merged (``merge_runs``)."""
    m = res.get("machine", {})
    sdks = m.get("sdks") or {}
    cg = res.get("cg") or {}
    keep = ("google_genai", "boto3", "botocore", "aiobotocore", "httpx2", "opentelemetry_sdk", "python")
    runs = res.get("runs") or [{"command": res.get("command"), "date": res.get("date"), "seconds": res.get("seconds"),
                                "otelstream_commit": res.get("otelstream_commit"), **cg}]  # fmt: skip
    made = "; and ".join(f"`{r['command']}` ({r['date']}, {r.get('seconds') or 0:.0f} s, otelstream at "
                         f"`{str(r['otelstream_commit'])[:10]}`; callgrind phases {r.get('short_streams')} × "
                         f"{r.get('short_deltas')} and {r.get('streams')} × {r.get('deltas')} deltas, pre-warm "
                         f"{r.get('prewarm')}, {len(r.get('layouts') or ())} heap layout)" for r in runs)  # fmt: skip
    lines = [SECTION_BEGIN, "## Gemini and Bedrock: `generate_content` and `converse` (issue 36)", "",
             f"Made by {made}, on the machine above while other work shared its 2 cores "
             "(instruction counts do not depend on the load). `$PEERS_VENV`: `bench/requirements-peers.txt`; "
             "`$GENAI2_VENV`: `bench/requirements-genai2.txt` (OpenTelemetry's google-genai instrumentation requires "
             "google-genai < 3, so it is measured on the newest 2.x it accepts, beside otelstream and the baseline "
             "on that same release). Rendered by `python -m bench.report --cloud-section` from the run's raw "
             "figures (not committed).", "",
             "SDK sets: " + "; ".join(f"**{k}**: " + ", ".join(f"{n.replace('_', '-')} {v}" for n, v in vs.items()
                                                              if n in keep) for k, vs in sdks.items()) + ".", "",
             "Peers: " + ", ".join(f"`{k}` {v}" for k, v in (m.get("peers") or {}).items() if v) + ".", "",
             "| docs/benchmarks.md budget | SDKs | figures | status |", "|---|---|---|---|",
             *[ln for ln in budget_table(res)[2:] if "blocked by export" not in ln and "regressions:" not in ln], ""]
    if "rows" in cg:
        lines += ["Callgrind as in the record above, at the settings of each run; otelstream against its "
                  "uninstrumented twin. "
                  "google-genai reads over an httpx2 client with a MockTransport; boto3 and aiobotocore are answered "
                  "by a `before-send` handler registered last (`bench/workers/cloud.py`), so botocore parses the "
                  "binary event stream frame by frame; the baseline is the same process layout without any "
                  "instrumentation. A span that ends before the stream goes on is marked **the call only, "
                  "not the stream** (`bench/workers/observed.py`) and is not counted as a cheaper peer.", ""]
        for sdk in sdks:
            rows = [r for r in cg["rows"] if r.get("sdk") == sdk]
            if rows:
                lines += [f"### {sdk}", "", *cg_table(cg, sdk), ""]
        seen = [r for r in cg["rows"] if "observed" in r]
        if seen:
            lines += ["Does the span cover the stream? One stream after the measured phases, 0.2 s between its first "
                      "frame and the rest: spans started for it / spans that ended after that pause.", "",
                      "| SDK set | configuration | surface | mode | spans | ended after the pause |",
                      "|---|---|---|---|---:|---:|"]
            lines += [f"| {r['sdk']} | {r['config']} | {r['surface']} | {r['mode']} | {r['observed']['spans']} | "
                      f"{r['observed']['covering']} |" for r in seen]
            lines.append("")
    if "memory" in res:
        lines += ["Memory per open stream (sync, tracemalloc, as in the record above):", "",
                  *memory_table(res["memory"]), ""]
    return [*lines, SECTION_END]


def write_cloud_section(res: dict, path: str) -> None:
    """Put the cloud section into ``RESULTS.md`` before its notes, replacing an earlier one."""
    with open(path) as f:
        text = f.read()
    section = "\n".join(cloud_section(res)) + "\n"
    if SECTION_BEGIN in text:
        head, _, rest = text.partition(SECTION_BEGIN)
        text = head + section + rest.partition(SECTION_END)[2].lstrip("\n")
    else:
        head, sep, tail = text.partition("## Notes")
        text = head + section + "\n" + sep + tail
    with open(path, "w") as f:
        f.write(text)


def rerender(src: str | None = None) -> None:
    """``RESULTS.md`` again from a run's raw figures (default ``bench/results.json``)."""
    with open(src or os.path.join(HERE, "results.json")) as f:
        write(json.load(f), os.path.join(HERE, "RESULTS.md"))
