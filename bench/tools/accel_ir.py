"""The accelerator's share, per event: the sync observer around an SDK generator and the tracker's flat path, pure
against compiled, under callgrind, without the SDK's own parsing (so it runs in a minute on a loaded machine).

    PYTHONPATH=$PWD python bench/tools/accel_ir.py [chat messages responses]

Per surface, one process per path (``OTELSTREAM_PURE_PYTHON=1`` for the pure one): the SDK's own models of a plain
delta (built once with the SDK's ``construct_type``, as the SDK builds them), yielded by a generator that stamps each
one's frame as the adapter's tap does (``tracker.t_frame = clock()``), observed by ``observing.observe_sync`` with a
real ``Call`` and ``StreamTracker`` (clock ``time.monotonic_ns``, a listener that exports nothing). Marginal Ir per
event = (Ir of 2 streams of LONG events − Ir of the same with SHORT) / (2 × (LONG − SHORT)), minus the same slope of
the bare generator consumed alone. The clock's vDSO read is not counted by callgrind (in either path).
"""

from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SHORT, LONG, STREAMS = 20, 420, 2


def _models(name: str, n: int) -> list[object]:
    """The SDK's own models of a stream's start and ``n`` plain deltas (only this surface's SDK types imported)."""
    from otelstream import names

    if name == names.MESSAGES:
        from anthropic._models import construct_type as make_a
        from anthropic.types import RawMessageStreamEvent

        start: list[dict[str, object]] = [
            {"type": "message_start", "message": {"id": "msg", "type": "message", "role": "assistant", "model": "m",
                                                  "content": [], "usage": {"input_tokens": 3, "output_tokens": 0}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ]  # fmt: skip
        body = [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "tok"}}] * n
        return [make_a(type_=RawMessageStreamEvent, value=d) for d in [*start, *body]]
    from openai._models import construct_type as make_o

    if name == names.RESPONSES:
        from openai.types.responses import ResponseStreamEvent

        start = [{"type": "response.created", "sequence_number": 0,
                  "response": {"id": "r", "object": "response", "created_at": 0, "model": "m", "output": [],
                               "status": "in_progress", "parallel_tool_calls": True, "tool_choice": "auto",
                               "tools": []}}]  # fmt: skip
        body = [{"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0,
                 "delta": "tok", "logprobs": [], "sequence_number": 1 + i} for i in range(n)]  # fmt: skip
        return [make_o(type_=ResponseStreamEvent, value=d) for d in [*start, *body]]
    from openai.types.chat import ChatCompletionChunk

    def chunk(text: str) -> dict[str, object]:
        return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": None, "logprobs": None, "delta": {"content": text}}]}  # fmt: skip

    return [make_o(type_=ChatCompletionChunk, value=d) for d in [chunk(""), *[chunk("tok")] * n]]


def child(surface: str) -> None:
    from otelstream import accelerator, names
    from otelstream.adapters import observing
    from otelstream.adapters.calls import Call
    from otelstream.core.report import StreamStart
    from otelstream.core.tracker import StreamTracker

    name = {"chat": names.CHAT_COMPLETIONS, "messages": names.MESSAGES, "responses": names.RESPONSES}[surface]

    def models(n: int) -> list[object]:
        return _models(name, n)

    built = {n: models(n) for n in (SHORT, LONG)}

    class Null:
        def stream_finished(self, ended: object, handle: object) -> None:
            pass

    def stream(n: int, observed: bool) -> None:
        clock = time.monotonic_ns
        tracker = StreamTracker(StreamStart(surface=name, t_request_ns=clock()), clock=clock)
        call = Call(tracker, Null())  # type: ignore[arg-type]

        def sdk() -> object:
            for m in built[n]:
                tracker.t_frame = clock()  # the tap's stamp
                yield m

        it = observing.observe_sync(sdk(), call, lambda e: ("transport_error", None)) if observed else sdk()
        for _ in it:
            pass
        assert not observed or tracker.deltas == n, tracker.deltas

    assert (accelerator.native is None) == bool(os.environ.get("OTELSTREAM_PURE_PYTHON"))
    for observed in (False, True):
        for n in (SHORT, LONG):
            stream(n, observed)  # warm-up
        for n in (SHORT, LONG):
            os.getppid()
            for _ in range(STREAMS):
                stream(n, observed)
        os.getppid()


def main(surfaces: list[str]) -> None:
    from bench.tools.callgrind_dumps import dump_totals

    per = STREAMS * (LONG - SHORT)
    for surface in surfaces or ["chat", "messages", "responses"]:
        for pure in (True, False):
            os.environ["PYTHONPATH"] = ROOT
            os.environ.pop("OTELSTREAM_PURE_PYTHON", None)
            if pure:
                os.environ["OTELSTREAM_PURE_PYTHON"] = "1"
            # dump k closes before the child's k-th getppid: 2 bare short, 3 bare long, 5 observed short, 6 long
            tot = dump_totals([__file__, "--child", surface])
            bare = tot[3] - tot[2]
            added = ((tot[6] - tot[5]) - bare) / per
            print(f"{surface} sync {'pure' if pure else 'compiled'}: {added:,.0f} Ir per event added "
                  f"(the bare generator alone: {bare / per:,.0f})", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
    else:
        main(sys.argv[1:])
