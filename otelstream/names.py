"""Every name otelstream exposes: surfaces, outcomes, anomaly kinds, span and metric names, buckets.

Dashboards, alert rules, users and acceptance checks query these exact strings;
change one only together with the contract. Pure module: no imports beyond the standard library.
"""

from __future__ import annotations

import enum
from typing import Final

# --- surfaces -------------------------------------------------------------------------
RESPONSES: Final = "responses"
RESPONSES_WEBSOCKET: Final = "responses_websocket"
CHAT_COMPLETIONS: Final = "chat_completions"
COMPLETIONS: Final = "completions"
MESSAGES: Final = "messages"
GENERATE_CONTENT: Final = "generate_content"  # Google Gemini (Gemini API, Vertex AI): SSE of GenerateContentResponse
CONVERSE: Final = "converse"  # AWS Bedrock ConverseStream: binary event-stream messages
SURFACES: Final = (RESPONSES, RESPONSES_WEBSOCKET, CHAT_COMPLETIONS, COMPLETIONS, MESSAGES, GENERATE_CONTENT, CONVERSE)
# the surfaces of the openai and anthropic SDKs: what `probe` and `demo` drive until they gain Gemini and Bedrock
OPENAI_ANTHROPIC_SURFACES: Final = (RESPONSES, RESPONSES_WEBSOCKET, CHAT_COMPLETIONS, COMPLETIONS, MESSAGES)

# the HTTP-level observer (adapters/http/streams.py): request path endings per surface, after any prefix a gateway
# adds ('/v1/chat/completions', '/openai/deployments/x/chat/completions'); first match wins
HTTP_STREAM_PATHS: Final = (
    ("/chat/completions", CHAT_COMPLETIONS),
    ("/completions", COMPLETIONS),
    ("/responses", RESPONSES),
    ("/messages", MESSAGES),
    (":streamGenerateContent", GENERATE_CONTENT),  # {model}:streamGenerateContent (the query, ?alt=sse, aside)
)
SSE_CONTENT_TYPE: Final = "text/event-stream"
ANTHROPIC_VERSION_HEADER: Final = "anthropic-version"  # a request carrying it speaks to Anthropic
# sent by the openai and anthropic SDKs on every request: their adapter owns the stream (or has warned it cannot)
SDK_REQUEST_HEADER: Final = "x-stainless-lang"
# google-genai names itself in this header on every request ("google-genai-sdk/3.6.1 gl-python/3.11.7"): its adapter
# owns the stream (or has warned it cannot)
GOOGLE_SDK_HEADER: Final = "x-goog-api-client"
GOOGLE_SDK_MARK: Final = "google-genai-sdk/"

# gen_ai.operation.name per surface
OPERATION_BY_SURFACE: Final = {
    RESPONSES: "chat",
    RESPONSES_WEBSOCKET: "chat",
    CHAT_COMPLETIONS: "chat",
    COMPLETIONS: "text_completion",
    MESSAGES: "chat",
    GENERATE_CONTENT: "generate_content",
    CONVERSE: "chat",
}

# gen_ai.provider.name values
PROVIDER_OPENAI: Final = "openai"
PROVIDER_ANTHROPIC: Final = "anthropic"
PROVIDER_AZURE: Final = "azure.ai.openai"
PROVIDER_BEDROCK: Final = "aws.bedrock"
PROVIDER_VERTEX: Final = "gcp.vertex_ai"
PROVIDER_GEMINI: Final = "gcp.gemini"

# --- AWS event-stream framing (Bedrock's application/vnd.amazon.eventstream bodies) ------------------
EVENTSTREAM_CONTENT_TYPE: Final = "application/vnd.amazon.eventstream"
EVENTSTREAM_MESSAGE_TYPE: Final = ":message-type"  # "event" or "exception" ("error" too, in the framing's spec)
EVENTSTREAM_EVENT_TYPE: Final = ":event-type"  # e.g. "contentBlockDelta", "chunk"
EVENTSTREAM_EXCEPTION_TYPE: Final = ":exception-type"  # e.g. "throttlingException"
EVENTSTREAM_ERROR_CODE: Final = ":error-code"  # the framing's own error messages (":message-type" "error")
# Bedrock invoke streams: the metrics Bedrock appends to the last chunk of a model's own events
BEDROCK_INVOCATION_METRICS: Final = "amazon-bedrock-invocationMetrics"
# what the Gemini and Bedrock streaming requests look like on the wire (for the HTTP-level observer)
GEMINI_STREAM_METHOD: Final = ":streamGenerateContent"  # {model}:streamGenerateContent?alt=sse
BEDROCK_CONVERSE_STREAM_PATH: Final = "/converse-stream"  # /model/{modelId}/converse-stream
BEDROCK_INVOKE_STREAM_PATH: Final = "/invoke-with-response-stream"  # /model/{modelId}/invoke-with-response-stream
BEDROCK_REQUEST_ID_HEADER: Final = "x-amzn-requestid"  # Bedrock's request id (the stream names no response)
BEDROCK_ERROR_TYPE_HEADER: Final = "x-amzn-errortype"  # an HTTP error's type, then a colon and a namespace

# --- outcomes (a closed set; the `outcome` label) ----------------------------------------------------
COMPLETED: Final = "completed"
INCOMPLETE: Final = "incomplete"
FAILED: Final = "failed"
ERROR: Final = "error"
CUT: Final = "cut"
ABANDONED: Final = "abandoned"
TRANSPORT_ERROR: Final = "transport_error"
HTTP_ERROR: Final = "http_error"
OUTCOMES: Final = (COMPLETED, INCOMPLETE, FAILED, ERROR, CUT, ABANDONED, TRANSPORT_ERROR, HTTP_ERROR)
# Outcomes that mean the caller did not get a whole answer because something broke: span status ERROR, and the
# only ones with an error class.
BAD_OUTCOMES: Final = (FAILED, ERROR, CUT, TRANSPORT_ERROR, HTTP_ERROR)
# chat / legacy-completions finish reasons that end a generation in error (vLLM sends "abort" for an aborted request,
# other servers "error"): outcome error, error_type the reason, class server_error
ERROR_FINISH_REASONS: Final = ("abort", "error")

# --- failure phases (a bad outcome's; span attribute otelstream.failure_phase, label `phase`) ---------
# before_output: no delta reached the caller before the failure, so a retry is invisible to the end user;
# during_output: the user saw part of an answer. http_error is always before_output; good outcomes have none.
PHASE_BEFORE_OUTPUT: Final = "before_output"
PHASE_DURING_OUTPUT: Final = "during_output"
FAILURE_PHASES: Final = (PHASE_BEFORE_OUTPUT, PHASE_DURING_OUTPUT)

# --- error classes (a closed set; the `error_type` metric label and otelstream.error_class) ----------
# One per stream with a bad outcome, so a dashboard can tell rate limiting from an outage. Good outcomes have none.
EC_RATE_LIMITED: Final = "rate_limited"
EC_QUOTA_EXCEEDED: Final = "quota_exceeded"
EC_OVERLOADED: Final = "overloaded"
EC_TIMEOUT: Final = "timeout"
EC_AUTH: Final = "auth"
EC_BAD_REQUEST: Final = "bad_request"
EC_SERVER_ERROR: Final = "server_error"
EC_CONNECTION: Final = "connection"
EC_PROTOCOL: Final = "protocol"
EC_CUT: Final = "cut"
EC_OTHER: Final = "_OTHER"
# The one table: (class, HTTP statuses, provider codes or types as sent, exception type names as they appear in the
# exception's MRO), most specific first: of the provider's code and the HTTP status, the first row either matches
# wins (an OpenAI 429 with code insufficient_quota is out of quota, not rate limited; a 503 whose type is the generic
# server_error is an overload), and a status belongs to the first row listing it (so the catch-all 4xx / 5xx rows
# come last). Without either, the exception decides, by the most specific class in its MRO (APITimeoutError before
# its base APIConnectionError); then the outcome.
ERROR_CLASS_TABLE: Final[tuple[tuple[str, tuple[int, ...], tuple[str, ...], tuple[str, ...]], ...]] = (
    (EC_QUOTA_EXCEEDED, (), ("insufficient_quota", "billing_hard_limit_reached", "quota_exceeded"), ()),
    (EC_RATE_LIMITED, (429,),
     ("rate_limit_exceeded", "rate_limit_error", "too_many_requests", "RESOURCE_EXHAUSTED", "throttlingException",
      "ThrottlingException"), ()),
    (EC_OVERLOADED, (503, 529),
     ("overloaded_error", "overloaded", "engine_overloaded", "service_unavailable", "UNAVAILABLE",
      "serviceUnavailableException", "ServiceUnavailableException"), ()),
    (EC_TIMEOUT, (408, 504), ("timeout", "timeout_error", "DEADLINE_EXCEEDED", "modelTimeoutException"),
     # openai/anthropic, httpx/httpx2, builtin/asyncio; aiohttp's read and connect timeouts, which subclass its
     # ClientConnectionError (the connection row) before TimeoutError: named here so the first match is the timeout
     ("APITimeoutError", "TimeoutException", "TimeoutError", "ServerTimeoutError")),
    (EC_AUTH, (401, 403),
     ("authentication_error", "permission_error", "invalid_api_key", "UNAUTHENTICATED", "PERMISSION_DENIED",
      "AccessDeniedException"), ()),
    (EC_BAD_REQUEST, tuple(range(400, 500)),
     ("invalid_request_error", "context_length_exceeded", "not_found_error", "request_too_large", "invalid_prompt",
      "INVALID_ARGUMENT", "FAILED_PRECONDITION", "NOT_FOUND", "validationException", "ValidationException"),
     ()),
    (EC_SERVER_ERROR, tuple(range(500, 600)),
     ("server_error", "api_error", "internal_error", "internal_server_error", "INTERNAL", "internalServerException",
      "modelStreamErrorException",
      # failed generations (Gemini finish reasons, Bedrock stop reasons)
      "MALFORMED_FUNCTION_CALL", "MALFORMED_RESPONSE", "malformed_model_output", "malformed_tool_use"),
     ()),
    (EC_CONNECTION, (), (),
     # the SDKs' connection error; httpx/httpx2 transport errors (reset, refused, peer closed mid-body); builtins;
     # aiohttp's (google-genai's async transport): a connection refused or dropped, a body cut short
     ("APIConnectionError", "TransportError", "NetworkError", "ProtocolError", "StreamError", "ConnectionError",
      "ConnectionClosed", "ClientConnectionError",
      # aiohttp's body cut or peer gone (aiobotocore, google-genai); botocore's own connection-closed error
      "ClientPayloadError", "ServerDisconnectedError", "ConnectionClosedError")),
    (EC_PROTOCOL, (), (),
     # EventStreamDecodeError: a Bedrock event-stream message whose CRC or length is wrong (core/eventstream.py)
     ("JSONDecodeError", "UnicodeDecodeError", "DecodingError", "EventStreamDecodeError", "ValueError",
      "ParserError")),  # botocore's event-stream framing errors (ChecksumMismatch & co.)
    (EC_CUT, (), (), ()),  # outcome cut
    (EC_OTHER, (), (), ()),  # any other bad outcome (an in-band error or response.failed with an unlisted code)
)
ERROR_CLASSES: Final = (
    EC_RATE_LIMITED, EC_QUOTA_EXCEEDED, EC_OVERLOADED, EC_TIMEOUT, EC_AUTH, EC_BAD_REQUEST, EC_SERVER_ERROR,
    EC_CONNECTION, EC_PROTOCOL, EC_CUT, EC_OTHER,
)  # fmt: skip

# abandoned sub-reasons (span attribute otelstream.abandoned_reason)
ABANDON_CLOSE: Final = "close"
ABANDON_GC: Final = "gc"
ABANDON_CANCEL: Final = "cancel"
ABANDON_IDLE: Final = "idle"
ABANDON_REASONS: Final = (ABANDON_CLOSE, ABANDON_GC, ABANDON_CANCEL, ABANDON_IDLE)


class EndReason(str, enum.Enum):
    """How a stream's body ended, as the code that saw it end says (``StreamTracker.conclude``'s ``how``); the
    outcome follows from it only when no terminal event decided one. Each member is its string, so a caller still
    passing the plain string is understood alike."""

    EOF = "eof"  # the body ended before a terminal event: cut
    CLOSE = ABANDON_CLOSE  # the caller closed the stream: abandoned
    GC = ABANDON_GC  # the stream was collected unclosed: abandoned
    CANCEL = ABANDON_CANCEL  # the caller's task was cancelled mid-read: abandoned
    IDLE = ABANDON_IDLE  # no pull for abandon_after_s, the body still open: abandoned
    ERROR = "error"  # an in-band error reached the caller as the SDK's exception
    TRANSPORT_ERROR = "transport_error"  # the connection or the body's decoding failed
    HTTP_ERROR = "http_error"  # the server answered with an error status

    def __str__(self) -> str:  # the value, as the plain string (before 3.11 a mixed-in Enum prints its name)
        return str.__str__(self)


class CallState(enum.Enum):
    """The caller's side of one SDK stream, as the observing generator sees it (adapters/close_ownership.py)."""

    UNPULLED = "unpulled"  # handed to the caller, never pulled
    PULLING = "pulling"  # a pull is running: a close of the body now is the pull's business
    BETWEEN = "between"  # an item reached the caller; the next pull has not begun
    FINISHED = "finished"  # the SDK's generator ended (its end, an exception, or it was closed)


class BodyState(enum.Enum):
    """The response body, as otelstream's body wrapper sees it (adapters/close_ownership.py)."""

    OPEN = "open"
    ENDED = "ended"  # a read reached its end before any close
    FAILED = "failed"  # a read raised before any close
    CLOSED = "closed"  # closed before its end (no read raised yet)
    CLOSED_THEN_FAILED = "closed_then_failed"  # a read raised after the body was closed under it


END_REASONS: Final = tuple(EndReason)
MAX_REASON_LEN: Final = 64  # characters kept of an error type or a finish reason (strings the server chose)

# --- sequence anomaly kinds (label `kind` of otelstream_stream_sequence_anomalies_total) -------------
SEQ_GAP: Final = "gap"
SEQ_DUPLICATE: Final = "duplicate"
SEQ_OUT_OF_ORDER: Final = "out_of_order"
SEQ_BAD_START: Final = "bad_start"
SEQ_MISSING: Final = "missing"
SEQUENCE_KINDS: Final = (SEQ_GAP, SEQ_DUPLICATE, SEQ_OUT_OF_ORDER, SEQ_BAD_START, SEQ_MISSING)

# --- protocol anomaly kinds: a closed enum (label `kind` of otelstream_stream_anomalies_total) -------
ANOM_MISSING_DONE: Final = "missing_done"  # chat/completions answer complete but no `data: [DONE]`
ANOM_TRAILING_DONE: Final = "trailing_done"  # `[DONE]` on a surface that has none (Responses via gateways)
ANOM_UNTYPED_EVENT: Final = "untyped_event"  # event without a `type` field, classified by its SSE name
ANOM_USAGE_MISSING: Final = "usage_missing"  # chat/completions stream ended without a usage chunk
ANOM_MISSING_FINISH_REASON: Final = "missing_finish_reason"  # `[DONE]` ended the answer, a choice had no finish
ANOM_NO_DELTA: Final = "no_delta"  # the stream ended normally without a single delta
ANOM_UNKNOWN_EVENT: Final = "unknown_event"  # an event type this version does not know
ANOM_EVENT_AFTER_TERMINAL: Final = "event_after_terminal"  # events after the terminal event
ANOM_UNDECODABLE: Final = "undecodable_event"  # offline: an SSE data payload that is not JSON
ANOM_BAD_FIELD: Final = "bad_field"  # a field with the wrong type or value (e.g. NaN usage)
ANOM_UNTERMINATED_EVENT: Final = "unterminated_event"  # body ended inside an event (no blank line): the SDKs drop it
# a Bedrock invoke stream of a model family whose payload otelstream does not read: events and outcome only
ANOM_UNSUPPORTED_PAYLOAD: Final = "unsupported_payload"
# sequence anomalies are also listed in a report's `anomalies` with these kinds
ANOM_SEQUENCE_GAP: Final = "sequence_gap"
ANOM_SEQUENCE_DUPLICATE: Final = "sequence_duplicate"
ANOM_SEQUENCE_OUT_OF_ORDER: Final = "sequence_out_of_order"
ANOM_SEQUENCE_BAD_START: Final = "sequence_bad_start"
ANOM_SEQUENCE_MISSING: Final = "sequence_missing"
PROTOCOL_ANOMALY_KINDS: Final = (
    ANOM_MISSING_DONE,
    ANOM_TRAILING_DONE,
    ANOM_UNTYPED_EVENT,
    ANOM_USAGE_MISSING,
    ANOM_MISSING_FINISH_REASON,
    ANOM_NO_DELTA,
    ANOM_UNKNOWN_EVENT,
    ANOM_EVENT_AFTER_TERMINAL,
    ANOM_UNDECODABLE,
    ANOM_BAD_FIELD,
    ANOM_UNTERMINATED_EVENT,
    ANOM_UNSUPPORTED_PAYLOAD,
)
SEQUENCE_ANOMALY_BY_KIND: Final = {
    SEQ_GAP: ANOM_SEQUENCE_GAP,
    SEQ_DUPLICATE: ANOM_SEQUENCE_DUPLICATE,
    SEQ_OUT_OF_ORDER: ANOM_SEQUENCE_OUT_OF_ORDER,
    SEQ_BAD_START: ANOM_SEQUENCE_BAD_START,
    SEQ_MISSING: ANOM_SEQUENCE_MISSING,
}
MAX_REPORTED_ANOMALIES: Final = 32  # a report lists at most this many; counts stay exact
MAX_SPAN_EVENTS: Final = 16
MAX_RECORDED_STALLS: Final = 8
MAX_COUNT: Final = 2**63 - 1  # a token count beyond cannot be exported (OTLP and Prometheus: int64 / float64)

# --- text on telemetry (otelstream/core/sanitize.py) ---------------------------------------------------
# Every string from the caller or the server (models, ids, finish reasons, error codes, anomaly details) is cut to
# these many characters, its non-printable characters (controls, bidi and other format characters, surrogates)
# replaced, before it becomes a label, a span name, a span attribute or a span event attribute.
MAX_TEXT_LENGTH: Final = 256
MAX_SPAN_NAME_LENGTH: Final = 128  # "{operation} {model}": a span name is a grouping key, not a record
TEXT_REPLACEMENT: Final = "\ufffd"

# --- measures an SDK patch point feeds -----------------------------------------------------
# When the installed SDK lacks a patch point (a release renamed it), otelstream logs one WARNING naming it and
# these measures, and every stream it concerns reports them as unknown (``StreamReport.unobserved``, span attribute
# ``otelstream.unobserved``): the value is absent (None), its metric is not recorded, its anomalies are not raised.
MEASURE_STREAM: Final = "stream"  # the whole stream: those streams are not observed at all (no span, no report)
MEASURE_TIME_TO_FIRST_EVENT: Final = "time_to_first_event"  # needs t_request stamped at the send
MEASURE_TIME_TO_FIRST_DELTA: Final = "time_to_first_delta"  # needs t_request stamped at the send
MEASURE_DURATION: Final = "duration"  # the operation-duration histogram (from t_request)
MEASURE_RETRIES: Final = "retries"
MEASURE_HTTP_ERRORS: Final = "http_errors"  # requests that fail before a stream exists (outcome http_error)
MEASURE_DONE_SENTINEL: Final = "done_sentinel"  # `data: [DONE]`, and the missing_done / trailing_done anomalies
MEASURE_EVENT_NAMES: Final = "event_names"  # SSE `event:` names (classify untyped events)
MEASURE_KEEPALIVES: Final = "keepalives"
MEASURE_CALLER_CLOSE: Final = "caller_close"  # the caller's close of the body (abandoned, close)
MEASURE_ERROR_CLASS: Final = "error_class"  # the HTTP client's transport errors told apart (connection, timeout)
# What a runtime self-check cell compares besides the above (a differing cell makes them unknown for its SDK and
# mode). The outcome keeps a value of the closed set on the metric label (alerts still see the stream); the report
# and the span list it as unobserved.
MEASURE_OUTCOME: Final = "outcome"  # the outcome and the abandonment reason
MEASURE_COUNTS: Final = "counts"  # events, deltas, sequence gaps
MEASURE_USAGE: Final = "usage"  # the token counts the server sent
MEASURE_ANOMALIES: Final = "anomalies"  # the protocol anomalies raised
MEASURES: Final = (
    MEASURE_STREAM,
    MEASURE_TIME_TO_FIRST_EVENT,
    MEASURE_TIME_TO_FIRST_DELTA,
    MEASURE_DURATION,
    MEASURE_RETRIES,
    MEASURE_HTTP_ERRORS,
    MEASURE_DONE_SENTINEL,
    MEASURE_EVENT_NAMES,
    MEASURE_KEEPALIVES,
    MEASURE_CALLER_CLOSE,
    MEASURE_ERROR_CLASS,
    MEASURE_OUTCOME,
    MEASURE_COUNTS,
    MEASURE_USAGE,
    MEASURE_ANOMALIES,
)

# --- spans -------------------------------------------------------------------------------------------
SPAN_STREAM_INTERNAL: Final = "otelstream.stream"  # INTERNAL child when an SDK/peer CLIENT span is current
SPAN_WEBSOCKET: Final = "otelstream.websocket"  # WebSocket connection span
SPAN_EVENT_FIRST_DELTA: Final = "otelstream.first_delta"
SPAN_EVENT_STALL: Final = "otelstream.stall"
SPAN_EVENT_RECONNECT: Final = "otelstream.reconnect"
SPAN_EVENT_ANOMALY: Final = "otelstream.anomaly"  # one per reported anomaly (within MAX_SPAN_EVENTS)
# span-event attributes
ATTR_ANOMALY_KIND: Final = "otelstream.anomaly.kind"
ATTR_ANOMALY_EVENT_INDEX: Final = "otelstream.anomaly.event_index"
ATTR_ANOMALY_DETAIL: Final = "otelstream.anomaly.detail"
ATTR_STALL_OFFSET: Final = "otelstream.stall.offset"  # s from t_request to the start of the stalled wait
ATTR_STALL_WAIT: Final = "otelstream.stall.wait"  # s waited (so far, when ongoing)
ATTR_STALL_ONGOING: Final = "otelstream.stall.ongoing"  # True when added live by the watchdog
# tracer scopes whose current CLIENT span already is the GenAI call span (otelstream then nests an INTERNAL child)
GENAI_PEER_SCOPES: Final = (
    "com.anthropic.sdk.python",
    "opentelemetry.instrumentation.genai",
    "opentelemetry.instrumentation.openai_v2",
    "opentelemetry.util.genai",
)
# Of those, the ones that record no gen_ai.client.* metrics of their own (the Anthropic SDK's tracing has no meter):
# under their span otelstream still records those metrics, or the call would have none. Under any other GenAI peer's
# CLIENT span it leaves them to the peer in the MeterProvider the two share (its otelstream.* instruments stay); its
# own Prometheus registry, which no peer writes, keeps every series.
GENAI_SCOPES_WITHOUT_METRICS: Final = ("com.anthropic.sdk.python",)
TRACER_NAME: Final = "otelstream"

# semantic-convention attributes
ATTR_OPERATION_NAME: Final = "gen_ai.operation.name"
ATTR_PROVIDER_NAME: Final = "gen_ai.provider.name"
ATTR_REQUEST_MODEL: Final = "gen_ai.request.model"
ATTR_REQUEST_STREAM: Final = "gen_ai.request.stream"
ATTR_RESPONSE_MODEL: Final = "gen_ai.response.model"
ATTR_RESPONSE_ID: Final = "gen_ai.response.id"
ATTR_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
ATTR_RESPONSE_TTFC: Final = "gen_ai.response.time_to_first_chunk"
ATTR_USAGE_INPUT: Final = "gen_ai.usage.input_tokens"
ATTR_USAGE_OUTPUT: Final = "gen_ai.usage.output_tokens"
ATTR_USAGE_CACHE_READ: Final = "gen_ai.usage.cache_read.input_tokens"
ATTR_USAGE_CACHE_WRITE: Final = "gen_ai.usage.cache_write.input_tokens"
ATTR_USAGE_REASONING: Final = "gen_ai.usage.reasoning.output_tokens"
ATTR_OPENAI_API_TYPE: Final = "openai.api.type"
ATTR_SERVER_ADDRESS: Final = "server.address"
ATTR_SERVER_PORT: Final = "server.port"
ATTR_ERROR_TYPE: Final = "error.type"
# the request parameters as the call passed them (choice.count only when it is not 1)
ATTR_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
ATTR_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
ATTR_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
ATTR_REQUEST_CHOICE_COUNT: Final = "gen_ai.request.choice.count"
# what an OpenAI server sent about the response, when it sent it
ATTR_OPENAI_SERVICE_TIER: Final = "openai.response.service_tier"
ATTR_OPENAI_SYSTEM_FINGERPRINT: Final = "openai.response.system_fingerprint"
ATTR_BEDROCK_LATENCY_MS: Final = "aws.bedrock.response.latency_ms"  # converse metadata.metrics.latencyMs
# otelstream attributes
ATTR_SURFACE: Final = "otelstream.surface"
ATTR_ERROR_CLASS: Final = "otelstream.error_class"
ATTR_OUTCOME: Final = "otelstream.outcome"
ATTR_ABANDONED_REASON: Final = "otelstream.abandoned_reason"
ATTR_RESUMED: Final = "otelstream.resumed"
ATTR_RETRIES: Final = "otelstream.retries"
ATTR_REQUEST_ID: Final = "otelstream.request_id"
ATTR_STREAM_ID: Final = "otelstream.stream_id"
ATTR_TIME_TO_FIRST_EVENT: Final = "otelstream.time_to_first_event"
# TTFD on every stream span, the INTERNAL child included (where gen_ai.response.time_to_first_chunk is the SDK's)
ATTR_TIME_TO_FIRST_DELTA: Final = "otelstream.time_to_first_delta"
# TTFO: to the first delta that is not reasoning (the answer the user waits for)
ATTR_TIME_TO_FIRST_OUTPUT: Final = "otelstream.time_to_first_output"
ATTR_FAILURE_PHASE: Final = "otelstream.failure_phase"  # a bad outcome's: before_output / during_output
ATTR_MAX_WAIT: Final = "otelstream.max_wait"
ATTR_CONSUMER_TIME: Final = "otelstream.consumer_time"
ATTR_EVENTS: Final = "otelstream.events"
ATTR_DELTAS: Final = "otelstream.deltas"
ATTR_KEEPALIVES: Final = "otelstream.keepalives"
ATTR_KEEPALIVE_MAX_GAP: Final = "otelstream.keepalives.max_gap"  # seconds between two keepalives, at most
ATTR_SEQ_GAPS: Final = "otelstream.sequence.gaps"
ATTR_SEQ_SKIPPED: Final = "otelstream.sequence.skipped"
ATTR_SEQ_DUPLICATES: Final = "otelstream.sequence.duplicates"
ATTR_SEQ_OUT_OF_ORDER: Final = "otelstream.sequence.out_of_order"
ATTR_OUTPUT_TOKENS_PER_SECOND: Final = "otelstream.output_tokens_per_second"
ATTR_UNOBSERVED: Final = "otelstream.unobserved"  # the MEASURE_* names this stream could not observe

# --- metrics: OTel instrument names and the Prometheus series they become ----------------
OTEL_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
OTEL_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
OTEL_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
OTEL_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai.client.operation.time_per_output_chunk"
OTEL_STREAMS: Final = "otelstream.streams"
OTEL_TIME_TO_FIRST_EVENT: Final = "otelstream.stream.time_to_first_event"
OTEL_TIME_TO_FIRST_OUTPUT: Final = "otelstream.stream.time_to_first_output"
OTEL_MAX_WAIT: Final = "otelstream.stream.max_wait"
OTEL_SEQUENCE_ANOMALIES: Final = "otelstream.stream.sequence_anomalies"
OTEL_ANOMALIES: Final = "otelstream.stream.anomalies"
OTEL_STREAMS_ACTIVE: Final = "otelstream.streams.active"
OTEL_STREAMS_STALLED: Final = "otelstream.streams.stalled"
OTEL_REPORTS_DROPPED: Final = "otelstream.reports.dropped"
OTEL_RATELIMIT_REMAINING: Final = "otelstream.ratelimit.remaining"
OTEL_RATELIMIT_LIMIT: Final = "otelstream.ratelimit.limit"
# cells of the runtime self-check that differed in this process; absent until the check ran
OTEL_SELF_CHECK_FAILURES: Final = "otelstream.self_check.failures"

# Prometheus family names as prometheus_client takes them (it appends _total/_bucket/_sum/_count).
PROM_OPERATION_DURATION: Final = "gen_ai_client_operation_duration_seconds"
PROM_TOKEN_USAGE: Final = "gen_ai_client_token_usage"
PROM_TIME_TO_FIRST_CHUNK: Final = "gen_ai_client_operation_time_to_first_chunk_seconds"
PROM_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai_client_operation_time_per_output_chunk_seconds"
PROM_STREAMS: Final = "otelstream_streams"  # exposed as otelstream_streams_total
PROM_TIME_TO_FIRST_EVENT: Final = "otelstream_stream_time_to_first_event_seconds"
PROM_TIME_TO_FIRST_OUTPUT: Final = "otelstream_stream_time_to_first_output_seconds"
PROM_MAX_WAIT: Final = "otelstream_stream_max_wait_seconds"
PROM_SEQUENCE_ANOMALIES: Final = "otelstream_stream_sequence_anomalies"  # ..._total
PROM_ANOMALIES: Final = "otelstream_stream_anomalies"  # ..._total
PROM_STREAMS_ACTIVE: Final = "otelstream_streams_active"
PROM_STREAMS_STALLED: Final = "otelstream_streams_stalled"
PROM_REPORTS_DROPPED: Final = "otelstream_reports_dropped"  # ..._total
PROM_RATELIMIT_REMAINING: Final = "otelstream_ratelimit_remaining"
PROM_RATELIMIT_LIMIT: Final = "otelstream_ratelimit_limit"
PROM_SELF_CHECK_FAILURES: Final = "otelstream_self_check_failures"

# --- semantic-convention versions of the gen_ai.client.* metrics ------------------------------------------------
# The tagged GenAI conventions (semantic-conventions-genai v0.1.0) renamed the client metrics and replaced the token
# histogram. The names above stay the default (what OTel's own Python instrumentations emit today); OTel's standard
# opt-in variable (a comma-separated list) selects the new ones, or both during a migration.
SEMCONV_ENV: Final = "OTEL_SEMCONV_STABILITY_OPT_IN"
SEMCONV_OPT_IN_LATEST: Final = "gen_ai_latest_experimental"
SEMCONV_OPT_IN_DUP: Final = "gen_ai_latest_experimental/dup"  # wins over the plain value, as OTel's own parsing
SEMCONV_DEFAULT: Final = "default"  # the names above
SEMCONV_LATEST: Final = "latest"  # v0.1.0's names only
SEMCONV_DUP: Final = "dup"  # both
SEMCONV_MODES: Final = (SEMCONV_DEFAULT, SEMCONV_LATEST, SEMCONV_DUP)
OTEL_INFERENCE_DURATION: Final = "gen_ai.client.inference.duration"
OTEL_INFERENCE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.inference.time_to_first_chunk"
OTEL_INFERENCE_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai.client.inference.time_per_output_chunk"
# counters: every stream, failed ones too (0 when the server reported none), by gen_ai.token.modality
OTEL_USAGE_INPUT_TOKENS: Final = "gen_ai.client.inference.usage.input_tokens"
OTEL_USAGE_OUTPUT_TOKENS: Final = "gen_ai.client.inference.usage.output_tokens"
OTEL_USAGE_CACHE_READ_TOKENS: Final = "gen_ai.client.inference.usage.cache_read.input_tokens"
OTEL_USAGE_CACHE_WRITE_TOKENS: Final = "gen_ai.client.inference.usage.cache_write.input_tokens"
OTEL_USAGE_REASONING_TOKENS: Final = "gen_ai.client.inference.usage.reasoning.output_tokens"
# per-call histograms: successful streams whose usage is known only
OTEL_OPERATION_INPUT_TOKENS: Final = "gen_ai.client.inference.operation.input_tokens"
OTEL_OPERATION_OUTPUT_TOKENS: Final = "gen_ai.client.inference.operation.output_tokens"
PROM_INFERENCE_DURATION: Final = "gen_ai_client_inference_duration_seconds"
PROM_INFERENCE_TIME_TO_FIRST_CHUNK: Final = "gen_ai_client_inference_time_to_first_chunk_seconds"
PROM_INFERENCE_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai_client_inference_time_per_output_chunk_seconds"
PROM_USAGE_INPUT_TOKENS: Final = "gen_ai_client_inference_usage_input_tokens"  # ..._total
PROM_USAGE_OUTPUT_TOKENS: Final = "gen_ai_client_inference_usage_output_tokens"  # ..._total
PROM_USAGE_CACHE_READ_TOKENS: Final = "gen_ai_client_inference_usage_cache_read_input_tokens"  # ..._total
PROM_USAGE_CACHE_WRITE_TOKENS: Final = "gen_ai_client_inference_usage_cache_write_input_tokens"  # ..._total
PROM_USAGE_REASONING_TOKENS: Final = "gen_ai_client_inference_usage_reasoning_output_tokens"  # ..._total
PROM_OPERATION_INPUT_TOKENS: Final = "gen_ai_client_inference_operation_input_tokens"
PROM_OPERATION_OUTPUT_TOKENS: Final = "gen_ai_client_inference_operation_output_tokens"
# each default family -> what replaces it in v0.1.0 (the token histogram: a counter per token type, below)
SEMCONV_RENAMED: Final = {
    PROM_OPERATION_DURATION: PROM_INFERENCE_DURATION,
    PROM_TIME_TO_FIRST_CHUNK: PROM_INFERENCE_TIME_TO_FIRST_CHUNK,
    PROM_TIME_PER_OUTPUT_CHUNK: PROM_INFERENCE_TIME_PER_OUTPUT_CHUNK,
}
# the finish reason the latest conventions put where one was expected and none came, and the outcomes where that is
# so (the stream ended before its final event, or in error); http_error never started a generation
FINISH_REASON_ERROR: Final = "error"
FINISH_REASON_PADDED_OUTCOMES: Final = (CUT, ERROR, FAILED, TRANSPORT_ERROR, ABANDONED)

# labels
LABEL_PROVIDER: Final = "gen_ai_provider_name"
LABEL_OPERATION: Final = "gen_ai_operation_name"
LABEL_MODEL: Final = "gen_ai_request_model"
LABEL_SERVER_ADDRESS: Final = "server_address"
LABEL_SERVER_PORT: Final = "server_port"
LABEL_RESPONSE_MODEL: Final = "gen_ai_response_model"  # known at the end: empty on the live gauges and on drops
LABEL_TOKEN_TYPE: Final = "gen_ai_token_type"
LABEL_SURFACE: Final = "surface"
LABEL_OUTCOME: Final = "outcome"
LABEL_KIND: Final = "kind"
LABEL_ERROR_TYPE: Final = "error_type"
LABEL_PHASE: Final = "phase"  # the failure phase: bad outcomes only, empty (absent) for good ones
LABEL_TOKEN_MODALITY: Final = "gen_ai_token_modality"  # the latest conventions' usage counters
# Every series carries these, then one label per application attribute named in ``metric_attributes``.
COMMON_LABELS: Final = (
    LABEL_PROVIDER, LABEL_OPERATION, LABEL_MODEL, LABEL_SERVER_ADDRESS, LABEL_SERVER_PORT, LABEL_RESPONSE_MODEL,
)  # fmt: skip
# OTel attribute keys for the same labels
OTEL_ATTR_BY_LABEL: Final = {
    LABEL_PROVIDER: ATTR_PROVIDER_NAME,
    LABEL_OPERATION: ATTR_OPERATION_NAME,
    LABEL_MODEL: ATTR_REQUEST_MODEL,
    LABEL_SERVER_ADDRESS: ATTR_SERVER_ADDRESS,
    LABEL_SERVER_PORT: ATTR_SERVER_PORT,
    LABEL_RESPONSE_MODEL: ATTR_RESPONSE_MODEL,
    LABEL_TOKEN_TYPE: "gen_ai.token.type",
    LABEL_TOKEN_MODALITY: "gen_ai.token.modality",
    LABEL_SURFACE: LABEL_SURFACE,
    LABEL_OUTCOME: LABEL_OUTCOME,
    LABEL_KIND: LABEL_KIND,
    LABEL_ERROR_TYPE: ATTR_ERROR_TYPE,
    LABEL_PHASE: LABEL_PHASE,
}
TOKEN_TYPE_INPUT: Final = "input"
TOKEN_TYPE_OUTPUT: Final = "output"
# No provider otelstream reads breaks usage down by modality, so every count is the conventions' `unknown`.
TOKEN_MODALITY_UNKNOWN: Final = "unknown"
MODEL_OTHER: Final = "_OTHER"  # a capped label's value once its cap is reached (models, servers, app attributes)
MODEL_UNKNOWN: Final = "unknown"  # model label value when the request named none

# --- histogram buckets (semantic-convention advisories) ----------------------------------------------
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
TIME_PER_CHUNK_BUCKETS: Final = (0.001, 0.0025, 0.005, *DURATION_BUCKETS)
# Time to first delta: the advisory bounds plus the round seconds between 0.25 and 4 s, where first-token SLOs sit.
# Factor-2 buckets alone put a p95 of 1.5 s at up to 2.5 s (histogram_quantile interpolates inside 1.28-2.56 s); with
# these the demo mix's p50/p95/p99 read within a few percent (tests/dashboards/test_ttfd_buckets.py), and an SLO
# boundary may be 1 s or 2 s as well as 2.56 s.
TTFD_BUCKETS: Final = tuple(sorted({*DURATION_BUCKETS, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0}))
TOKEN_BUCKETS: Final = tuple(float(4**i) for i in range(14))  # 1, 4, 16, … 4**13

# the response headers whose value we keep: the request id, and the rate-limit numbers below (nothing else is read)
REQUEST_ID_HEADERS: Final = ("x-request-id", "request-id", "x-amzn-requestid")  # (the last: AWS Bedrock)

# --- rate-limit headroom: the `kind` label of otelstream_ratelimit_remaining / _limit -------------------------------
RL_REQUESTS: Final = "requests"
RL_TOKENS: Final = "tokens"
RL_INPUT_TOKENS: Final = "input_tokens"
RL_OUTPUT_TOKENS: Final = "output_tokens"
RATELIMIT_KINDS: Final = (RL_REQUESTS, RL_TOKENS, RL_INPUT_TOKENS, RL_OUTPUT_TOKENS)
# response header (lower case) -> (kind, True for the remaining count / False for the limit); read as numbers only.
# OpenAI and most compatible servers send x-ratelimit-*, Anthropic anthropic-ratelimit-* (input/output where sent).
RATELIMIT_HEADERS: Final = {
    "x-ratelimit-remaining-requests": (RL_REQUESTS, True),
    "x-ratelimit-limit-requests": (RL_REQUESTS, False),
    "x-ratelimit-remaining-tokens": (RL_TOKENS, True),
    "x-ratelimit-limit-tokens": (RL_TOKENS, False),
    "anthropic-ratelimit-requests-remaining": (RL_REQUESTS, True),
    "anthropic-ratelimit-requests-limit": (RL_REQUESTS, False),
    "anthropic-ratelimit-tokens-remaining": (RL_TOKENS, True),
    "anthropic-ratelimit-tokens-limit": (RL_TOKENS, False),
    "anthropic-ratelimit-input-tokens-remaining": (RL_INPUT_TOKENS, True),
    "anthropic-ratelimit-input-tokens-limit": (RL_INPUT_TOKENS, False),
    "anthropic-ratelimit-output-tokens-remaining": (RL_OUTPUT_TOKENS, True),
    "anthropic-ratelimit-output-tokens-limit": (RL_OUTPUT_TOKENS, False),
}

# --- synthetic probing: `otelstream probe` --------------------------------------------------------------------------
# Every probe stream carries its target's name as this application attribute, and the probe names the key in
# metric_attributes: each series gets the label of the same name (the dashboard's probe row and the alert
# OtelstreamProbeFailing filter by it).
PROBE_NAME_ATTRIBUTE: Final = "probe_name"
LABEL_PROBE_NAME: Final = "probe_name"
# on the span only (never a label): which request of the run a stream was, so each row finds its own report
PROBE_REQUEST_ATTRIBUTE: Final = "probe.request"
# A verdict's findings: the protocol and sequence anomaly kinds above under their own names, and these.
VERDICT_NOT_COMPLETED: Final = "not_completed"  # outcome other than completed (in-band errors below)
VERDICT_INBAND_ERROR: Final = "inband_error"  # an error after HTTP 200, shaped (a code) or not
VERDICT_NO_USAGE: Final = ANOM_USAGE_MISSING  # chat: the anomaly; elsewhere a terminal event without usage
VERDICT_KEEPALIVE_GAP: Final = "keepalive_gap"  # two keepalives further apart than a proxy's read timeout
VERDICT_SILENT_WAIT: Final = "silent_wait"  # a wait without any keepalive longer than that timeout
VERDICT_SLOW_FIRST_DELTA: Final = "slow_first_delta"  # first delta later than the TTFD budget (a note)
VERDICT_NO_REPORT: Final = "no_report"  # otelstream made no report of a stream in time (not expected)
VERDICT_UNREACHABLE: Final = "unreachable"  # every request failed to connect
VERDICT_UNOBSERVED: Final = "unobserved"  # measures the installed SDK release hides from otelstream (a note)
# fail: counts for --strict; note: said, not failed
VERDICT_FAIL: Final = "fail"
VERDICT_NOTE: Final = "note"
