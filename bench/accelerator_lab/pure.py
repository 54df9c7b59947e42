"""The pure-Python reference of the per-event work (the lab's variant (d)), written so mypyc can compile it as-is.

Per stream: an ``Acct`` (the hot state: counts, the clock, the pull's start, the gap buckets with count and sum), an
observing generator around the caller's pulls, and the body reader's keepalive count per chunk. An item that is a
non-empty ``str`` stands for a plain delta; anything else for another event."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

# the time-per-output-chunk bounds (otelstream.names.TIME_PER_CHUNK_BUCKETS) in integer ns; le is inclusive
BOUNDS: tuple[int, ...] = tuple(
    int(b * 1e9)
    for b in (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96,
              81.92)
)
N_BUCKETS = len(BOUNDS) + 1


class Acct:
    """One stream's hot state."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.events = 0
        self.deltas = 0
        self.t_pull = 0
        self.wait_ns = 0
        self.t_first_delta = 0
        self.t_prev_delta = 0
        self.keepalives = 0
        self.line_start = True
        self.pulling: object = None
        self.counts = [0] * N_BUCKETS
        self.sums = [0] * N_BUCKETS

    def snapshot(self) -> tuple[Any, ...]:
        return (self.events, self.deltas, self.t_pull, self.wait_ns, self.t_first_delta, self.t_prev_delta,
                self.keepalives, self.line_start, tuple(self.counts), tuple(self.sums))  # fmt: skip


def account(a: Acct, item: object, now: int) -> None:
    """One event reached the caller at ``now``: the pull's wait ends, a plain delta lands in its gap bucket."""
    tp = a.t_pull
    if tp:
        a.t_pull = 0
        a.wait_ns += now - tp
    a.events += 1
    if type(item) is str and item:
        a.deltas += 1
        prev = a.t_prev_delta
        a.t_prev_delta = now
        if prev:
            gap = now - prev
            i = bisect_left(BOUNDS, gap)  # the first bound >= gap
            a.counts[i] += 1
            a.sums[i] += gap
        else:
            a.t_first_delta = now


def keepalives(a: Acct, chunk: bytes) -> None:
    """SSE comment lines in one body chunk: after LF, after a bare CR, or at the chunk's start after a line's end."""
    if not chunk:
        return
    found = chunk.count(b"\n:")
    if 13 in chunk:
        found += chunk.count(b"\r:")
    if a.line_start and chunk[0] == 0x3A:
        found += 1
    if found:
        a.keepalives += found
    a.line_start = chunk[-1] in (0x0A, 0x0D)


OnEnd = Callable[[Acct, "BaseException | None"], None]


def observe(gen: Iterator[Any], a: Acct, on_end: OnEnd) -> Iterator[Any]:
    clock = a.clock
    try:
        a.t_pull = clock()
        for item in gen:
            account(a, item, clock())
            yield item
            a.t_pull = clock()
    except BaseException as exc:
        on_end(a, exc)
        raise
    on_end(a, None)


async def observe_async(
    agen: AsyncIterator[Any], a: Acct, on_end: OnEnd, whoami: Callable[[], object]
) -> AsyncIterator[Any]:
    clock = a.clock
    try:
        a.pulling = whoami()
        a.t_pull = clock()
        async for item in agen:
            a.pulling = None
            account(a, item, clock())
            yield item
            a.pulling = whoami()
            a.t_pull = clock()
    except BaseException as exc:
        on_end(a, exc)
        raise
    on_end(a, None)


def reader(body: Iterator[bytes], a: Acct) -> Iterator[bytes]:
    for chunk in body:
        keepalives(a, chunk)
        yield chunk
