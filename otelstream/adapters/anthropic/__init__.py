"""What otelstream adapts of the ``anthropic`` SDK: its Messages SSE streams (``sse``), Bedrock and Vertex included."""
