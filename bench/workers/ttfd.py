"""``workers/main.py ttfd``: one stream with a scripted pause before its first delta, and what the configuration's
telemetry says the time to first delta was."""

from __future__ import annotations

import time

from bench import canned, configs
from bench.workers.clients import make_client, open_stream, run_sync

_FIRST_DELTA_INDEX = {"responses": 4, "chat": 1, "completions": 0, "messages": 3}


def _is_delta(surface: str, ev) -> bool:
    d = ev.__dict__
    if surface == "responses":
        return d.get("type") == "response.output_text.delta"
    if surface == "chat":
        ch = d.get("choices") or []
        return bool(ch and ch[0].delta.content)
    if surface == "completions":
        ch = d.get("choices") or []
        return bool(ch and ch[0].text)
    return d.get("type") == "content_block_delta"


def cmd_ttfd(a) -> dict:
    """One stream whose first frame arrives at once, then a pause of ``--pause`` s before the first delta.
    Truth = the caller's clock from just before ``create()`` to the first delta it receives."""
    setup = configs.setup(a.config, a.surface)
    frames = canned.frames(a.surface, 5)
    idx = _FIRST_DELTA_INDEX[a.surface]
    pause = {"on": False}

    def body(_r):
        def gen():
            for i, f in enumerate(frames):
                if i == idx and pause["on"]:
                    time.sleep(a.pause)
                yield f

        return gen()

    client = make_client(a.surface, "sync", setup, body)
    run_sync(client, a.surface)  # warm-up, no pause
    setup.flush()
    if setup.spans is not None:
        setup.spans.clear()
    if setup.reader is not None:
        setup.reader.get_metrics_data()  # (cumulative; we read the new sum below by difference)
    before = _ttft_metric(setup)
    pause["on"] = True
    t0 = time.perf_counter()
    truth = None
    for ev in open_stream(client, a.surface):
        if truth is None and _is_delta(a.surface, ev):
            truth = time.perf_counter() - t0
    setup.flush()
    measured, source = _measured_ttfd(a.config, setup, before)
    return {"truth_s": truth, "measured_s": measured, "source": source, "pause_s": a.pause,
            "telemetry": setup.check()}  # fmt: skip


_TTFT_METRICS = ("gen_ai.client.operation.time_to_first_chunk", "gen_ai.server.time_to_first_token",
                 "otelstream.stream.time_to_first_delta")  # fmt: skip


def _ttft_metric(setup) -> dict:
    out: dict = {}
    if setup.reader is None:
        return out
    data = setup.reader.get_metrics_data()
    for rm in getattr(data, "resource_metrics", ()) or ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name in _TTFT_METRICS or "first" in m.name:
                    for p in m.data.data_points:
                        c = out.setdefault(m.name, [0.0, 0])
                        c[0] += getattr(p, "sum", 0.0)
                        c[1] += getattr(p, "count", 0)
    return out


def _measured_ttfd(config: str, setup, before: dict):
    """What the instrumentation says: span attribute, else span event offset, else metric (new sum / new count)."""
    spans = setup.finished_spans()
    # the stream's own span is the root-most with a TTFT-ish attribute; anthropic/openai HTTP spans have none
    for key in ("otelstream.time_to_first_delta", "gen_ai.response.time_to_first_chunk"):
        for s in spans:
            v = (s.attributes or {}).get(key)
            if v is not None:
                return float(v), f"span attribute {key}"
    for s in spans:
        for e in s.events or ():
            if "first" in e.name.lower():
                return (e.timestamp - s.start_time) / 1e9, f"span event {e.name!r} - span start"
    after = _ttft_metric(setup)
    for name in _TTFT_METRICS + tuple(after):
        if name in after:
            s1, c1 = after[name]
            s0, c0 = before.get(name, [0.0, 0])
            if c1 > c0:
                v = (s1 - s0) / (c1 - c0)
                return (v / 1000.0 if v > 50 else v), f"metric {name}"
    return None, "none"
