"""Whether a configuration's span covers the stream, or only the call that opened it: one stream, outside every
measured phase, whose body pauses after its first frame. A span that ends after the pause (measured from the caller's
receipt of its first event) saw the stream go on; one that ended before did not observe the stream, whatever it costs,
and the report says so instead of counting it as cheap. (The pause is not before the last frame: a span may end, by
design, at the terminal event, and Bedrock's ``metadata`` follows ``messageStop``.)"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench import canned, configs
from bench.workers.clients import make_client, open_stream

PAUSE_S = 0.2


def stream_observed(setup: configs.Setup, surface: str, mode: str) -> dict[str, Any]:
    """``{"spans": n, "covering": k}``: spans started for the probe stream, and how many ended after its pause."""
    frames = canned.frames(surface, 3)

    def body(_request: Any) -> Any:
        def gen() -> Any:
            for i, f in enumerate(frames):
                if i == 1:
                    time.sleep(PAUSE_S)
                yield f

        return gen()

    client = make_client(surface, mode, setup, body)
    setup.flush()
    before = {id(s) for s in setup.finished_spans()}
    first: list[int] = []
    if mode == "sync":
        for _ in open_stream(client, surface):
            first = first or [time.time_ns()]
    else:

        async def read() -> None:
            stream = await open_stream(client, surface)
            async for _ in stream:
                if not first:
                    first.append(time.time_ns())

        asyncio.run(read())
    setup.flush()
    new = [s for s in setup.finished_spans() if id(s) not in before]
    # the pause starts after the first event reached the caller: a span ending 80 % of it later saw the rest
    limit = first[0] + int(0.8 * PAUSE_S * 1e9) if first else 0
    return {"spans": len(new), "covering": sum(1 for s in new if (s.end_time or 0) >= limit)}
