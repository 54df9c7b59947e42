"""Another GenAI instrumentation's CLIENT span as the current one at the send (the Anthropic SDK's own tracing, a
named peer, or any CLIENT span that names a GenAI operation): otelstream then nests an INTERNAL child instead of a
second CLIENT span, and leaves the gen_ai.client.* OTel instruments to a peer that records them.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from otelstream import names


def current_peer() -> str | None:
    """The instrumentation scope of the current span when it is already the GenAI call's CLIENT span (Anthropic SDK
    or a named peer; "" for an unnamed one), else None.

    Then otelstream nests an INTERNAL child instead of a second CLIENT span, so a trace has exactly one CLIENT
    span per call and token usage is counted once.
    """
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    scope = getattr(span, "instrumentation_scope", None)
    scope_name: str = getattr(scope, "name", None) or ""
    if scope_name.startswith(names.GENAI_PEER_SCOPES):
        return scope_name
    if scope_name == names.TRACER_NAME:
        return None  # our own span (e.g. a WebSocket connection span) is a parent, not a peer
    # An unnamed peer: a CLIENT span that already says it is a GenAI operation.
    if getattr(span, "kind", None) is SpanKind.CLIENT:
        attrs = getattr(span, "attributes", None) or {}
        if names.ATTR_OPERATION_NAME in attrs:
            return scope_name
    return None


def peer_records_metrics(scope_name: str | None) -> bool:
    """Whether the GenAI peer whose CLIENT span a stream nests under records the gen_ai.client.* metrics of the call
    itself (every one but those known to have no meter), so otelstream must not record them a second time."""
    return scope_name is not None and not scope_name.startswith(names.GENAI_SCOPES_WITHOUT_METRICS)
