"""``otelstream probe``: small streamed requests through the real SDKs, observed by otelstream exactly as in a service,
reported as a row per request and a conformance verdict per target; ``--every`` makes it a synthetic monitor.

Modules by job: ``config`` (targets from flags or TOML), ``requests`` (the fixed built-in requests per surface),
``cloud_clients`` (google-genai's and boto3's clients and requests), ``runner`` (one round of a target: bounded, each
stream's report collected), ``verdict`` (the rules applied to what the server sent), ``rendering`` (text and JSON),
``monitor`` (the ``--every`` loop and ``/metrics``), ``command`` (the CLI).
"""
