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
from bench.tools import hotpath_adapter  # noqa: E402
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

    class _Quiet:  # a listener told of each measured stream's end, doing nothing with it
        def stream_finished(self, ended, handle):
            pass

    def observed(chunks: list[bytes]) -> None:  # one stream of these chunks, read through the observer's wrapper
        start = StreamStart(surface=surface, provider="x", request_model="m", t_request_ns=time.monotonic_ns())
        obs = Observed(Call(StreamTracker(start, clock=time.monotonic_ns), _Quiet()))
        for _ in http_body._iter_sync(iter(chunks), obs):
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
                observed(events)

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
        observed(chunks)

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
    if "--adapter" in sys.argv:
        hotpath_adapter.main(sys.argv[1:])
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
