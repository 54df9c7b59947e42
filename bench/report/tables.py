"""RESULTS.md's tables, one per stage, and the small formatters they share with the budgets (``budgets.py``)."""

from __future__ import annotations


def us(ns: float | None) -> str:
    return "–" if ns is None else f"{ns / 1000:+.2f}"


def fmt(v: float | None, spec: str = ".0f") -> str:
    return "–" if v is None else format(v, spec)


def is_http(surface: str) -> bool:
    """The HTTP-level observer's surfaces (``bench/canned.py``): no SDK, so no peer, and budgets judged apart."""
    return surface.startswith("http-")


def is_cloud(surface: str) -> bool:
    """The cloud SDKs' surfaces (google-genai, boto3 / aiobotocore): judged on lines of their own."""
    return surface in ("generate_content", "converse")


def family(surface: str) -> str:
    """Which budget lines a surface is judged on: ``sdk`` (openai, anthropic), ``cloud`` or ``http``."""
    return "http" if is_http(surface) else "cloud" if is_cloud(surface) else "sdk"


_CONFIGS = ("otelstream", "otelstream-default", "anthropic-builtin", "openinference", "openllmetry", "otel-genai",
            "otel-botocore")  # fmt: skip


def _configs(rows: list[dict]) -> list[str]:
    """The measured configurations that have rows, in the tables' column order."""
    return [c for c in _CONFIGS if any(r["config"] == c for r in rows)]


def _by_cell(rows: list[dict]) -> list[tuple[str, str, dict]]:
    """(surface, mode, {configuration: row}) per table row: surfaces in order, sync before async."""
    cells = sorted({(r["surface"], r["mode"]) for r in rows}, key=lambda g: (g[0], g[1] != "sync"))
    return [(s, m, {r["config"]: r for r in rows if r["surface"] == s and r["mode"] == m}) for s, m in cells]


def overhead_table(ov: dict) -> list[str]:
    rows = ov.get("rows", [])
    cfgs = _configs(rows)
    out = ["| surface | mode | baseline µs/event | " + " | ".join(f"{c} added µs/event (ratio)" for c in cfgs) + " |",
           "|---|---|---:|" + "---:|" * len(cfgs)]  # fmt: skip
    for surface, mode, by in _by_cell(rows):
        b = by.get("baseline")
        cells = []
        for c in cfgs:
            r = by.get(c)
            if r is None:
                cells.append("n/a")
            elif "error" in r:
                cells.append("error")
            elif not r.get("produced"):
                cells.append(f"**no telemetry** ({us(r['added_ns'])})")
            else:
                cells.append(f"{us(r['added_ns'])} ({r['ratio']:.3f})")
        out.append(f"| {surface} | {mode} | {fmt(b and b['per_event_ns'] / 1000, '.1f')} | " + " | ".join(cells) + " |")
    return out


def cg_table(cg: dict, sdk: str = "newest") -> list[str]:
    rows = [r for r in cg.get("rows", []) if r.get("sdk", "newest") == sdk]
    cfgs = _configs(rows)
    ref = cg.get("ref_events", 200)
    paired = any(r.get("paired") for r in rows)
    out = [f"Added Ir per event for a stream of {ref} events = marginal per event + fixed per stream / {ref}; "
           "below it, marginal Ir per event / fixed Ir per stream"
           + ("; for otelstream against its uninstrumented twin phases in the same process (the verdict), and below "
              "that the same against the baseline process." if paired else "."), "",
           "| surface | mode | baseline Ir/event | " + " | ".join(cfgs) + " |",
           "|---|---|---:|" + "---:|" * len(cfgs)]  # fmt: skip
    for surface, mode, by in _by_cell(rows):
        b = by.get("baseline")
        cells = []
        for c in cfgs:
            r = by.get(c)
            if r is None:
                cells.append("–")
            elif "error" in r:
                cells.append("error")
            else:
                v = r["added_ir_per_event"]
                txt = f"**{v:,.0f}**<br>{r['added_marginal_ir_per_event']:,.0f} / {r['added_fixed_ir_per_stream']:,.0f}"
                if "added_fixed_caller_ir_per_stream" in r and c.startswith("otelstream"):
                    txt += f" (caller {r['added_fixed_caller_ir_per_stream']:,.0f})"
                if "layouts" in r:
                    txt += "<br>layouts: " + " / ".join(f"{x:,}" for x in r["layouts"])
                if "cross_added_ir_per_event" in r:
                    txt += f"<br>(vs the baseline process: {r['cross_added_ir_per_event']:,.0f})"
                if not r.get("produced"):
                    txt = "**no telemetry** " + txt
                elif r.get("observes_stream") is False:
                    txt = "**the call only, not the stream** " + txt
                cells.append(txt)
        lib = next((r["http"] for r in by.values() if r.get("http")), None) if family(surface) != "sdk" else None
        where = f"{surface} ({lib})" if lib else surface
        out.append(f"| {where} | {mode} | {fmt(b and b['ir_per_event'], ',.0f')} | " + " | ".join(cells) + " |")
    return out


def memory_table(mem: dict) -> list[str]:
    out = ["| SDKs | surface | configuration | tracing | heap per open stream (B) | added vs baseline (B) | retained "
           "after N streams (B) | added retained (B) |", "|---|---|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for r in mem.get("rows", []):
        sdk = r.get("sdk", "newest")
        if "error" in r:
            out.append(f"| {sdk} | {r['surface']} | {r['config']} | {r['tracing']} | error | | | |")
            continue
        out.append(f"| {sdk} | {r['surface']} | {r['config']} | {r['tracing']} | {r['open_bytes_per_stream']:,.0f} | "
                   f"{fmt(r.get('added_open_bytes_per_stream'), ',.0f')} | {r['retained_bytes']:,} "
                   f"(N={r['total_streams']:,}) | {fmt(r.get('added_retained_bytes'), ',.0f')}"
                   + (f" (last {r['second_half_streams']:,}: {r['added_second_half_retained_bytes']:,})"
                      if "added_second_half_retained_bytes" in r else "") + " |")  # fmt: skip
    return out


def ttfd_table(t: dict) -> list[str]:
    out = ["| surface | configuration | truth (s) | measured (s) | error (s) | source |", "|---|---|---:|---:|---:|---|"]
    for r in t.get("rows", []):
        out.append(f"| {r['surface']} | {r['config']} | {fmt(r.get('truth_s'), '.3f')} | "
                   f"{fmt(r.get('measured_s'), '.3f')} | {fmt(r.get('error_s'), '+.3f')} | "
                   f"{r.get('source') or r.get('error') or ''} |")  # fmt: skip
    return out


def scale_lines(sc: dict) -> list[str]:
    if "error" in sc:
        return [f"Scale run failed: `{sc['error']}`"]
    s = sc.get("summary", {})
    out = ["| phase | baseline CPU µs/event | otelstream CPU µs/event | added µs/event |", "|---|---:|---:|---:|"]
    for ph in ("single", "concurrent"):
        r = s.get(ph, {})
        out.append(f"| {ph} | {fmt((r.get('baseline_cpu_per_event_ns') or 0) / 1000, '.2f')} | "
                   f"{fmt((r.get('otelstream_cpu_per_event_ns') or 0) / 1000, '.2f')} | {us(r.get('added_ns'))} |")
    out.append("")
    for cfg, runs in sc.get("runs", {}).items():
        for r in runs:
            if "error" in r:
                out.append(f"- {cfg}: error `{r['error']}`")
                continue
            c = r["concurrent"]
            th = ", ".join(f"{k}: {v['cpu_s']:.3f} s CPU = {100 * v['core_share']:.2f} % of a core"
                           for k, v in c.get("threads", {}).items())  # fmt: skip
            line = (f"- {cfg}: {c['streams']:,} streams, peak {c['peak_open']:,} open at once, {c['events']:,} "
                    f"events, {c['failed']} failed {c.get('errors') or ''}, wall {c['wall_s']:.1f} s, client CPU "
                    f"{c['cpu_s']:.1f} s" + (f"; threads over the phase: {th}" if th else ""))  # fmt: skip
            hold = c.get("hold")
            if hold:
                line += f"; all open after {c['all_open_after_s']:.1f} s"
                hth = ", ".join(f"{k}: {100 * v['core_share']:.2f} % of a core"
                                for k, v in hold.get("threads", {}).items())  # fmt: skip
                if hth:
                    line += f"; during the {hold['seconds']:.0f} s hold with {hold['open']:,} open: {hth}"
            prov = r.get("provider_cpu_s")
            if prov:
                line += f"; provider CPU {prov['user']:.1f} s user + {prov['sys']:.1f} s sys"
            out.append(line)
    return out

