"""The compiled body reader (``otelstream._speedups.Reader``) against its pure-Python reference
(``body_readers.read_sync_py``): generated chunks over ``\\n \\r : a`` (bytes, and bytearray for the other-type
path), a plain or a content-encoded body, a body that may raise at a generated chunk, and a caller that drains,
closes, throws into it or drops it: the same chunks out, the same exception, the same keepalive count and longest
keepalive gap, the same body state (``close_ownership``). Skipped outside CI where the module was not built."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelstream import names
from otelstream.adapters import body_readers
from otelstream.adapters.calls import Call
from otelstream.core import tracker as tr
from otelstream.core.report import StreamStart
from tests.support.native import speedups
from tests.support.recording import RecordingListener

_speedups = speedups()

body_readers.configure_native(_speedups)

SETTINGS = settings(
    max_examples=int(os.environ.get("OTELSTREAM_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
chunks = st.lists(st.binary(max_size=12).map(lambda b: bytes(b"\n\r:a"[x % 4] for x in b)), max_size=12)


class ReadFailed(Exception):
    pass


def _run(reader: Any, parts: list[bytes], as_bytearray: bool, plain: bool, raise_at: int | None, caller: str,
         stop_at: int) -> tuple[Any, ...]:  # fmt: skip
    now = [10**9]

    def clock() -> int:
        now[0] += 1_000_003
        return now[0]

    tracker = tr.StreamTracker(StreamStart(surface=names.CHAT_COMPLETIONS, t_request_ns=1), clock=clock)
    call = Call(tracker, RecordingListener())
    sent = [bytearray(p) if as_bytearray else p for p in parts]

    def body() -> Iterator[Any]:
        for i, p in enumerate(sent):
            if i == raise_at:
                raise ReadFailed("reset")
            yield p

    got: list[int] = []
    raised: BaseException | None = None
    it = reader(body(), call, plain)
    try:
        for n, chunk in enumerate(it):
            got.append(id(chunk))
            if n == stop_at:
                if caller == "close":
                    it.close()
                elif caller == "throw":
                    it.throw(ReadFailed("thrown"))
                break
    except BaseException as exc:
        raised = exc
    if caller == "drop":
        del it
    r = tracker._rare
    return (
        got == [id(p) for p in sent[: len(got)]],
        len(got),
        type(raised).__name__ if raised is not None else None,
        str(raised) if raised is not None else None,
        tracker.keepalives,
        r.max_keepalive_gap_ns if r is not None else None,
        call.body,
    )


@SETTINGS
@given(
    chunks,
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 12)),
    st.sampled_from(["drain", "close", "throw", "drop"]),
    st.integers(0, 12),
)
def test_compiled_reader_equals_the_reference(
    parts: list[bytes], as_bytearray: bool, plain: bool, raise_at: int | None, caller: str, stop_at: int
) -> None:
    args = (parts, as_bytearray, plain, raise_at, caller, stop_at)
    reference = _run(body_readers.read_sync_py, *args)
    assert _run(_speedups.Reader, *args) == reference
    assert reference[0]


def test_counts_where_the_comment_lines_are() -> None:
    """Known answers, so a reader that agrees with a broken reference still fails: LF and bare-CR comment lines, one
    at a chunk's start after a line's end, none after a chunk that ended mid-line."""
    for reader in (body_readers.read_sync_py, _speedups.Reader):
        result = _run(reader, [b": ping\n\n", b"data: x\r: k\r\r", b": a\n:b", b":c"], False, True, None, "drain", 99)
        assert result[4] == 4, reader
