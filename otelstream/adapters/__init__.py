"""SDK adapters: wrapt patches that turn SDK stream events into tracker observations.

They know nothing about sinks: everything goes to the ``StreamListener`` given to ``install()``. Modules: ``calls``
(the per-call state, its begin and its one end, the watch on the caller's object), ``request`` (the wrappers of the
SDKs' request entry, the stamp at the client's send, what requests and answers say), ``observing`` (the generators
around the SDK's own, and the SSE tap), ``close_ownership`` (whose close it was, from the order of the facts our
wrappers see), ``body_readers`` (our wrapper of the response body: its reads, its closes, the comment lines),
``exceptions`` (what an exception that ended a stream means), ``body_kinds`` (our body wrappers' subclasses of the
client library's byte-stream kinds); then one package per library adapted: ``openai``
(``sse``; Responses WebSocket mode: ``websocket``, ``ws_connection``, ``ws_sends``, ``ws_receives``), ``anthropic``
(``sse``) and ``http`` (the streams no SDK adapter sees, at the ``httpx`` / ``httpx2`` client: ``streams``, ``body``,
``decoding``); ``_patch`` (apply/undo in any import order; the patch scopes and the
measures they feed) and ``inventory`` (everything taken from other libraries' internals, in one place).
"""

from __future__ import annotations

from otelstream.adapters import inventory
from otelstream.adapters._patch import PATCHER
from otelstream.core.listener import StreamListener


def install(
    listener: StreamListener,
    *,
    stall_threshold_s: float = 30.0,
    baggage_attributes: tuple[str, ...] = (),
    http_streams: bool = True,
) -> None:
    """Route every observed stream to ``listener`` and apply the patches (now, or when each SDK is imported).
    ``baggage_attributes``: the OTel baggage keys each stream copies as application attributes. ``http_streams``:
    also observe the streams no SDK adapter sees, at the HTTP client."""
    from otelstream.adapters.calls import RUNTIME
    from otelstream.adapters.http import streams as http
    from otelstream.attribution import valid_keys

    http.STATE.enabled = http_streams
    RUNTIME.listener = listener
    RUNTIME.stall_threshold_ns = int(stall_threshold_s * 1e9)
    RUNTIME.baggage_keys = valid_keys(baggage_attributes, "baggage_attributes")
    PATCHER.install(inventory.patches(), inventory.FACTS)


def uninstall() -> None:
    """Remove every patch this process applied; streams already open finish with the listener they started with."""
    from otelstream.adapters.calls import RUNTIME

    PATCHER.remove()
    RUNTIME.switch_off()


__all__ = ["PATCHER", "install", "uninstall"]
