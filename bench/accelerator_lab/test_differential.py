"""Differential test of the lab's variants: the same generated inputs (items, clock steps, an inner iterator that may
fail or be closed early, body chunks) give the same accounting, the same items, the same end and the same error in
every built variant as in the pure-Python reference.

    PYTHONPATH=. /work/main/.venv/bin/python -m pytest -q bench/accelerator_lab/test_differential.py -p no:cacheprovider
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.accelerator_lab.pure import BOUNDS
from bench.accelerator_lab.variants import VARIANTS

ITEM = st.one_of(st.text(max_size=3), st.none(), st.integers(0, 3))
# clock steps: small, on and beside the bucket bounds, and beyond the last one
STEP = st.one_of(st.integers(0, 3_000_000), st.sampled_from([b + d for b in BOUNDS for d in (-1, 0, 1)]),
                 st.integers(0, 200_000_000_000))  # fmt: skip
CHUNK = st.binary(max_size=12).map(lambda b: bytes(b"\n\r:a"[x % 4] for x in b))


class Clock:
    def __init__(self, steps: list[int]) -> None:
        self.steps = steps
        self.i = 0
        self.t = 1_000_000_000

    def __call__(self) -> int:
        self.t += self.steps[self.i % len(self.steps)] if self.steps else 1
        self.i += 1
        return self.t


class Boom(Exception):
    pass


def inner(items: list[Any], fail_at: int | None):
    for i, x in enumerate(items):
        if i == fail_at:
            raise Boom(i)
        yield x


async def ainner(items: list[Any], fail_at: int | None, suspend: bool):
    for i, x in enumerate(items):
        if suspend:
            await asyncio.sleep(0)
        if i == fail_at:
            raise Boom(i)
        yield x


def run_sync(v: Any, items: list[Any], steps: list[int], fail_at: int | None, close_after: int | None) -> tuple:
    ends: list[str] = []
    a = v.Acct(Clock(steps))
    it = v.observe(inner(items, fail_at), a, lambda acct, exc: ends.append(type(exc).__name__))
    got, err = [], None
    try:
        for x in it:
            got.append(x)
            if close_after is not None and len(got) == close_after:
                it.close()
    except Boom as e:
        err = e.args
    return got, err, ends, a.snapshot()


def run_async(v: Any, items: list[Any], steps: list[int], fail_at: int | None, suspend: bool) -> tuple:
    ends: list[str] = []
    a = v.Acct(Clock(steps))
    tokens = iter(range(10_000))

    async def main() -> tuple:
        got, err = [], None
        try:
            obs = v.observe_async(ainner(items, fail_at, suspend), a, lambda acct, exc: ends.append(type(exc).__name__),
                                  lambda: next(tokens))
            async for x in obs:
                got.append(x)
        except Boom as e:
            err = e.args
        return got, err

    got, err = asyncio.run(main())
    return got, err, ends, a.snapshot(), a.pulling


@settings(max_examples=300, deadline=None)
@given(st.lists(ITEM, max_size=30), st.lists(STEP, max_size=8), st.none() | st.integers(0, 30),
       st.none() | st.integers(1, 30))  # fmt: skip
def test_sync_same_everywhere(items: list[Any], steps: list[int], fail_at: int | None, close_after: int | None) -> None:
    want = run_sync(VARIANTS["pure"], items, steps, fail_at, close_after)
    for name, v in VARIANTS.items():
        assert run_sync(v, items, steps, fail_at, close_after) == want, name


@settings(max_examples=100, deadline=None)
@given(st.lists(ITEM, max_size=20), st.lists(STEP, max_size=8), st.none() | st.integers(0, 20), st.booleans())
def test_async_same_everywhere(items: list[Any], steps: list[int], fail_at: int | None, suspend: bool) -> None:
    want = run_async(VARIANTS["pure"], items, steps, fail_at, suspend)
    for name, v in VARIANTS.items():
        assert run_async(v, items, steps, fail_at, suspend) == want, name


@settings(max_examples=300, deadline=None)
@given(st.lists(CHUNK, max_size=10))
def test_keepalives_same_everywhere(chunks: list[bytes]) -> None:
    def run(v: Any) -> tuple:
        a, b = v.Acct(lambda: 1), v.Acct(lambda: 1)
        passed = list(v.reader(iter(chunks), a))
        for c in chunks:
            v.keepalives(b, c)
        return passed, a.keepalives, a.line_start, b.keepalives, b.line_start

    want = run(VARIANTS["pure"])
    for name, v in VARIANTS.items():
        assert run(v) == want, name


def test_all_variants_built() -> None:
    assert set(VARIANTS) == {"pure", "cext", "cython", "mypyc"}


def test_cancel_inside_a_pull_same_everywhere() -> None:
    """A pull cancelled while the inner generator waits: the cancellation goes through the observer's ``throw`` and
    ends the stream once with it, in every variant."""

    def run(v: Any) -> tuple:
        ends: list[str] = []
        a = v.Acct(Clock([5]))

        async def slow():
            yield "a"
            await asyncio.Event().wait()
            yield "b"

        async def consume(obs: Any, got: list[Any]) -> None:
            async for x in obs:
                got.append(x)

        async def main() -> list[Any]:
            got: list[Any] = []
            obs = v.observe_async(slow(), a, lambda acct, exc: ends.append(type(exc).__name__), lambda: "task")
            task = asyncio.ensure_future(consume(obs, got))
            for _ in range(3):
                await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                got.append("cancelled")
            return got

        return asyncio.run(main()), ends, a.snapshot(), a.pulling

    want = run(VARIANTS["pure"])
    assert want[1] == ["CancelledError"]
    for name, v in VARIANTS.items():
        assert run(v) == want, name


def test_native_awaitable_reused_only_when_free() -> None:
    """The C observer reuses one awaitable per stream: never one still held elsewhere, and a finished one cannot be
    awaited again."""
    c = VARIANTS["cext"]

    async def items():
        for x in ("a", "b", "c"):
            yield x

    async def main() -> None:
        obs = c.observe_async(items(), c.Acct(Clock([1])), lambda acct, exc: None, lambda: None)
        first = obs.__anext__()
        assert await first == "a"
        second = obs.__anext__()  # `first` is still held here: a new awaitable
        assert second is not first
        assert await second == "b"
        try:
            await first
        except RuntimeError:
            pass
        else:
            raise AssertionError("a finished __anext__() was awaited again")
        del first, second
        assert await obs.__anext__() == "c"

    asyncio.run(main())
