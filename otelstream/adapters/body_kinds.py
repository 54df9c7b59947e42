"""Our wrappers of a response's body (``response.stream``), made real subclasses of the client library's byte-stream
kinds: its ``Response`` reads and closes a body only of the right kind (httpx2/_models.py:952-1080, httpx's the
same), and anthropic's tracing wrapper checks it too (anthropic/_tracing.py:628-636)."""

from __future__ import annotations

import sys
from collections.abc import Callable

Wrap = Callable[[object, object], object]  # our wrapper's subclass: (the body, its owner) -> the body wrapped
Kinds = tuple[type, type, Wrap, Wrap, Wrap]

# per (client library, our sync wrapper, our async wrapper): the library's sync and async byte-stream kinds and our
# wrappers' subclasses of them (sync, async, both), or None when the library has no such kinds
_KINDS: dict[tuple[str, type, type], Kinds | None] = {}


def wrap_body(lib: str, body: object, sync_wrapper: type, async_wrapper: type, owner: object) -> object | None:
    """``body`` wrapped as ``wrapper(body, owner)`` in the subclass of its kind, sync, async or both (a body of both
    kinds gets both wrappers); None when it is of neither, or ``lib`` (the response's top-level package) has no
    byte-stream kinds. The subclasses are made once per library and pair of wrappers."""
    key = (lib, sync_wrapper, async_wrapper)
    try:
        kinds = _KINDS[key]
    except KeyError:
        kinds = _KINDS[key] = _subclasses(lib, sync_wrapper, async_wrapper)  # a race makes them twice, harmlessly
    if kinds is None:
        return None
    sync_kind, async_kind, sync_cls, async_cls, both_cls = kinds
    is_sync = isinstance(body, sync_kind)
    is_async = isinstance(body, async_kind)
    if is_sync and is_async:
        return both_cls(body, owner)
    if is_sync:
        return sync_cls(body, owner)
    if is_async:
        return async_cls(body, owner)
    return None


def _subclasses(lib: str, sync_wrapper: type, async_wrapper: type) -> Kinds | None:
    module = sys.modules.get(lib)
    sync_kind = getattr(module, "SyncByteStream", None)
    async_kind = getattr(module, "AsyncByteStream", None)
    if not (isinstance(sync_kind, type) and isinstance(async_kind, type)):
        return None
    namespace = {"__module__": sync_wrapper.__module__}
    return (
        sync_kind,
        async_kind,
        type(f"{lib}SyncBody", (sync_wrapper, sync_kind), namespace),
        type(f"{lib}AsyncBody", (async_wrapper, async_kind), namespace),
        type(f"{lib}BothBody", (sync_wrapper, async_wrapper, sync_kind, async_kind), namespace),
    )
