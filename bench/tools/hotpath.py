"""Where the per-event instructions go: ``StreamTracker.event`` alone, per surface, against a clock read and one
generator layer (the two other per-event costs of an adapter).

    python bench/tools/hotpath.py            # callgrind (deterministic): Ir per call, every surface + references
    python bench/tools/hotpath.py --opcodes  # bytecodes executed per event, per function (sys.settrace), no valgrind
    python bench/tools/hotpath.py http/      # only the cases whose name starts so (here: the HTTP-level observer's)
    python bench/tools/hotpath.py --ns       # wall ns per event (median of 15 runs), beside an empty method call
    python bench/tools/hotpath.py --adapter  # callgrind: marginal Ir per event of the whole observation, per surface
                                             # and mode (real SDK streams over MockTransport, a listener that exports
                                             # nothing): the tap, the generator around __stream__, tracker.event
    python bench/tools/hotpath.py --adapter chat/sync messages/async --variant no-pulling
                                             # some cells, with one part taken out (diagnostics, see VARIANTS)

One delta event per surface, fed to one tracker in a loop (Responses with increasing ``sequence_number``): as decoded
JSON (what offline replay passes) and as the SDK's model object built through the SDK's ``construct_type``
(``/model``: what the SSE and WebSocket adapters pass). ``http/…``: the HTTP-level observer's whole per-event path
(its body wrapper, the SSE split, the delta check or ``json.loads``, the tracker), one event per byte chunk, against
the caller's loop over the same chunks; ``http/…/stream``: whole streams of the events that are not plain deltas.
"""

from __future__ import annotations

import collections
import os
import shutil
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/tools/ -> the repo
if ROOT not in sys.path:
    sys.path.append(ROOT)

from bench import canned  # noqa: E402
from bench.tools.callgrind_dumps import dump_totals  # noqa: E402

N = 20_000
SURFACES = ("chat_completions", "responses", "messages")
# decoded JSON (offline replay) and the SDK's model (what the SSE and WebSocket adapters pass)
# the HTTP-level observer (adapters/http/): one SSE event per byte chunk through its body wrapper, in the providers'
# compact JSON, in spaced JSON, and padded as the providers pad their events (a value or whitespace that changes with
# every event: OpenAI's obfuscation, Anthropic's spaces)
HTTP = ("http/chat_completions", "http/messages", "http/chat_completions/spaced", "http/messages/spaced",
        "http/chat_completions/padded", "http/messages/padded",
        # whole streams without a delta (the events every stream has: Chat's role, finish, usage chunks and [DONE],
        # Messages' start, block start, ping, block stop, delta, stop): Ir per stream
        "http/chat_completions/stream", "http/messages/stream")  # fmt: skip
STREAMS = 200  # the /stream cases' iterations


def count(what: str) -> int:
    return STREAMS if what.endswith("/stream") else N
WHAT = (*SURFACES, *(f"{s}/model" for s in SURFACES), *HTTP, "clock", "generator_layer")


def _events():
    import anthropic._models as am
    import openai._models as om
    from anthropic.types import RawContentBlockDeltaEvent
    from openai.types.chat import ChatCompletionChunk
    from openai.types.responses import ResponseTextDeltaEvent

    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}], "usage": None}  # fmt: skip
    rde = {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": "Hi",
           "logprobs": [], "sequence_number": 0}  # fmt: skip
    ade = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}
    return {
        "chat_completions": (chunk, None),
        "responses": (rde, "response.output_text.delta"),
        "messages": (ade, "content_block_delta"),
        "chat_completions/model": (om.construct_type(type_=ChatCompletionChunk, value=chunk), None),
        "responses/model": (om.construct_type(type_=ResponseTextDeltaEvent, value=rde), "response.output_text.delta"),
        "messages/model": (am.construct_type(type_=RawContentBlockDeltaEvent, value=ade), "content_block_delta"),
    }


def loops(what: str, n: int = N):
    """(body, reference): the measured loop and the same loop without the thing measured."""
    from otelstream.core.report import StreamStart
    from otelstream.core.tracker import StreamTracker

    def empty():
        for _ in range(n):
            pass

    if what == "clock":
        def clock():
            c = time.monotonic_ns
            for _ in range(n):
                c()

        return clock, empty
    if what == "generator_layer":
        def src():
            for _ in range(n):
                yield None

        def one(g):
            yield from g

        def with_layer():
            for _ in one(src()):
                pass

        def without():
            for _ in src():
                pass

        return with_layer, without
    if what.startswith("http/"):
        return _http_loops(what, n)
    ev, name = _events()[what]
    start = StreamStart(surface=what.split("/")[0], provider="x", request_model="m", server_address=None, server_port=None,
                        api_type=None, t_request_ns=time.monotonic_ns(), resumed=False)  # fmt: skip
    t = StreamTracker(start, clock=time.monotonic_ns)
    if what.startswith("responses"):
        d = ev if type(ev) is dict else ev.__dict__
        nxt = [0]  # sequence numbers keep increasing across calls of body(): in order, as on the wire

        def body():
            e = t.event
            s = nxt[0]
            for s in range(s, s + n):
                d["sequence_number"] = s
                e(ev, name)
            nxt[0] = s + 1

        def ref():
            x = 0
            for s in range(x, x + n):
                d["sequence_number"] = s

        return body, ref

    def body2():
        e = t.event
        for _ in range(n):
            e(ev, name)

    return body2, empty


def _http_loops(what: str, n: int):
    """The caller's loop over the body's chunks, through the observer's wrapper (body) and without it (reference):
    what the wrapper adds per chunk, a clock read, the SSE split, the delta check or json.loads, ``tracker.event``."""
    import json

    from otelstream.adapters.calls import Call
    from otelstream.adapters.http import body as http_body
    from otelstream.adapters.http.decoding import Observed
    from otelstream.core.report import StreamStart
    from otelstream.core.tracker import StreamTracker

    class _Quiet:  # a listener that takes the one report of each measured stream and does nothing with it
        def stream_finished(self, report, handle):
            pass

    surface = what.split("/")[1]
    sep = None if what.endswith("/spaced") else (",", ":")
    if surface == "messages":
        frames = [("message_start", {"type": "message_start", "message": {"id": "m", "model": "m", "usage": {"input_tokens": 1}}}),
                  ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
        delta = ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}})
    else:
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "system_fingerprint": "fp",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]}
        frames = [(None, chunk)]
        delta = (None, {**chunk, "choices": [{"index": 0, "delta": {"content": "Hi"}, "logprobs": None, "finish_reason": None}]})

    def sse(name, obj):
        return (f"event: {name}\n" if name else "").encode() + b"data: " + json.dumps(obj, separators=sep).encode() + b"\n\n"

    if what.endswith("/stream"):
        events = canned.frames("http-messages" if surface == "messages" else "http-chat", 0)

        def streams():
            for _ in range(n):
                start = StreamStart(surface=surface, provider="x", request_model="m", t_request_ns=time.monotonic_ns())
                obs = Observed(Call(StreamTracker(start, clock=time.monotonic_ns), _Quiet()))
                for _ in http_body._iter_sync(iter(events), obs):
                    pass

        def no_streams():
            for _ in range(n):
                for _ in iter(events):
                    pass

        return streams, no_streams

    # the stream's first events (the tracker is steady after them: 2 of n + 2 events), then n deltas
    chunks = [*(sse(*f) for f in frames), *[sse(*delta)] * n]
    if what.endswith("/padded"):  # each delta padded differently (1 to 16 bytes)
        name, obj = delta
        if surface == "messages":
            plain = sse(name, obj)
            chunks[len(frames):] = [plain[:-3] + b" " * (1 + i % 16) + b"}\n\n" for i in range(n)]
        else:
            chunks[len(frames):] = [sse(name, {**obj, "obfuscation": "aB3" * (1 + i % 5)}) for i in range(n)]

    def body():
        start = StreamStart(surface=surface, provider="x", request_model="m", t_request_ns=time.monotonic_ns())
        obs = Observed(Call(StreamTracker(start, clock=time.monotonic_ns), _Quiet()))
        for _ in http_body._iter_sync(iter(chunks), obs):
            pass

    def ref():
        for _ in iter(chunks):
            pass

    return body, ref


def child(what: str) -> None:
    body, ref = loops(what, count(what))
    body()
    ref()
    os.getppid()
    ref()
    os.getppid()
    body()
    os.getppid()


# --adapter: what the adapters add per event on the one observation path (the SDK's own generators, our tap on
# _iter_events and our generator around __stream__, tracker.event): no export, which is per stream
ADAPTER_CELLS = ("responses", "chat", "messages")
_SHORT, _LONG, _STREAMS = 10, 110, 2


class _NullListener:
    def stream_started(self, start, tracker, parent=None):
        return None

    def activate(self, handle):
        return None

    def deactivate(self, token):
        pass

    def stream_finished(self, report, handle):
        pass


# --adapter --variant: the same observation with one per-event part taken out, to measure what it costs (not a working
# configuration: what the part observes is lost)
VARIANTS = {
    "as-is": "",
    "no-pulling": "the pulling thread / task not recorded per pull (observing.py: call.pulling)",
    "no-comments": "the body's comment lines not counted (ending.py: _comments)",
    "no-body-layer": "no generator around the body's chunks (ending.py: _read_sync / _read_async)",
}


def _take_out(variant: str) -> None:
    from otelstream.adapters import ending, observing
    from otelstream.adapters.calls import Call

    if variant == "no-comments":
        ending._BodyBase._otelstream_plain = False  # type: ignore[assignment]
    elif variant == "no-body-layer":
        ending._SyncBody.__iter__ = lambda self: iter(self._otelstream_body)  # type: ignore[method-assign]
        ending._AsyncBody.__aiter__ = lambda self: self._otelstream_body.__aiter__()  # type: ignore[method-assign]
    elif variant == "no-pulling":
        _guard = observing._guard

        def observe_sync(gen, call: Call, classify):  # observing.observe_sync without call.pulling
            tracker = call.tracker
            clock = tracker.clock
            with observing._StreamEnd(call, classify):
                tracker.first_pull(clock())
                for item in gen:
                    try:
                        tracker.event(item, call.frame)
                    except Exception as exc:
                        _guard.report("adapters.event", exc)
                    yield item
                    tracker.t_pull = clock()

        async def observe_async(agen, call: Call, classify):
            tracker = call.tracker
            clock = tracker.clock
            with observing._StreamEnd(call, classify):
                tracker.first_pull(clock())
                async for item in agen:
                    try:
                        tracker.event(item, call.frame)
                    except Exception as exc:
                        _guard.report("adapters.event", exc)
                    yield item
                    tracker.t_pull = clock()

        observing.observe_sync = observe_sync  # type: ignore[assignment]
        observing.observe_async = observe_async  # type: ignore[assignment]


def adapter_child(surface: str, mode: str, variant: str = "as-is") -> None:
    import asyncio

    from bench import canned, configs, worker_clients
    from otelstream import adapters

    _take_out(variant)

    setup = configs.Setup("baseline", anthropic_kwargs={"open_telemetry": False})
    try:
        worker_clients.make_client(surface, mode, setup, lambda r: [])
    except TypeError:  # an anthropic release without the open_telemetry option
        setup = configs.Setup("baseline")
    bodies = {n: canned.frames(surface, n) for n in (_SHORT, _LONG)}
    client = worker_clients.make_client(surface, mode, setup, lambda r: bodies[int(r.headers["x-deltas"])])
    loop = asyncio.new_event_loop() if mode == "async" else None

    def run(n: int) -> None:
        for _ in range(_STREAMS):
            s = worker_clients.open_stream(client, surface, {"x-deltas": str(n)})
            if loop is None:
                for _ in s:
                    pass
            else:
                async def drain(s=s):
                    async for _ in await s:
                        pass

                loop.run_until_complete(drain())

    for on in (False, True):
        if on:
            adapters.install(_NullListener())
        run(_SHORT)
        run(_LONG)
        os.getppid()  # dump: warm-up
        run(_SHORT)
        os.getppid()  # dump: short streams
        run(_LONG)
        os.getppid()  # dump: long streams
    if loop is not None:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def adapter(cells: list[str], variant: str) -> None:
    for surface in ADAPTER_CELLS:
        for mode in ("sync", "async"):
            if cells and f"{surface}/{mode}" not in cells and surface not in cells:
                continue
            tot = dump_totals([__file__, "--adapter-child", surface, mode, variant])
            events = (canned.expected_events(surface, _LONG) - canned.expected_events(surface, _SHORT)) * _STREAMS
            off = tot[3] - tot[2]
            on = tot[6] - tot[5]
            print(f"{surface} {mode}{'' if variant == 'as-is' else ' ' + variant}: "
                  f"{(on - off) / events:,.0f} Ir per event added (SDK alone {off / events:,.0f})")


def opcodes() -> None:
    for what in (w for w in WHAT[:-2] if not w.startswith("http/")):
        body, _ = loops(what, 1000)
        body()
        cnt: collections.Counter = collections.Counter()

        def tr(frame, event, arg):
            frame.f_trace_opcodes = True

            def loc(frame, event, arg):
                if event == "opcode":
                    cnt[frame.f_code.co_name] += 1
                return loc

            return loc

        sys.settrace(tr)
        body()
        sys.settrace(None)
        per = {k: v / 1000 for k, v in cnt.items() if k not in ("body", "body2")}
        print(f"{what}: {sum(per.values()):.0f} bytecodes per event: {per}")


def nanos() -> None:
    """Median wall ns per ``tracker.event`` call, with the machine's cost of an empty method call beside it (timing
    depends on the machine; the instruction counts above do not)."""

    class _Empty:
        def event(self, ev: object, name: object = None) -> None:
            pass

    def empty_loop():
        e, x = _Empty().event, object()
        for _ in range(N):
            e(x, None)

    rows = {"empty method call": (empty_loop, loops("clock")[1])}
    for what in (w for w in WHAT[:-2] if count(w) == N):
        rows[what] = loops(what)
    for what, (body, ref) in rows.items():
        samples = []
        for _ in range(15):
            t0 = time.perf_counter_ns()
            body()
            t1 = time.perf_counter_ns()
            ref()
            t2 = time.perf_counter_ns()
            samples.append(((t1 - t0) - (t2 - t1)) / N)
        samples.sort()
        print(f"{what}: {samples[len(samples) // 2]:,.0f} ns per event (median of 15 x {N:,})")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    if len(sys.argv) > 3 and sys.argv[1] == "--adapter-child":
        adapter_child(*sys.argv[2:5])
        return
    if "--adapter" in sys.argv:
        args = sys.argv[1:]
        variant = args[args.index("--variant") + 1] if "--variant" in args else "as-is"
        if variant not in VARIANTS:
            raise SystemExit(f"--variant: one of {', '.join(VARIANTS)}")
        adapter([a for a in args if not a.startswith("-") and a != variant], variant)
        return
    if "--opcodes" in sys.argv:
        opcodes()
        return
    if "--ns" in sys.argv:
        nanos()
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind not installed")
    only = [a for a in sys.argv[1:] if not a.startswith("-")]  # e.g. `hotpath.py http/`: the cases starting so
    for what in (w for w in WHAT if not only or any(w.startswith(o) for o in only)):
        tot = dump_totals([__file__, "--child", what])
        print(f"{what}: {(tot[3] - tot[2]) / count(what):,.0f} Ir per {'stream' if count(what) != N else 'event'}")

if __name__ == "__main__":
    main()
