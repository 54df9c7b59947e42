"""What otelstream adapts of the ``openai`` SDK: its SSE streams (``sse``: Responses, Chat Completions, Completions)
and Responses WebSocket mode (``websocket``, with ``ws_connection``, ``ws_sends`` and ``ws_receives``)."""
