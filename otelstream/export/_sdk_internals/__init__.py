"""Every place otelstream reads or writes another library's private state, and nothing else.

They exist because the public APIs have no weighted histogram add and cost tens of thousands of instructions per
record on the export thread; each one is used only after a run-once self-check (``check_once.SelfCheck``) has shown,
on the installed release, that it gives exactly what the public API gives, and falls back to the public API for good
when the check fails or a later call raises. ``tests/export/test_sdk_internals.py`` holds a canary per entry: it
fails loudly when a release renames, retypes or changes the meaning of any name below.

Inventory (private names touched; ``w`` = written, ``r`` = read, ``c`` = called):

``otel_aggregations`` — opentelemetry-sdk, verified on 1.45.2
  - ``opentelemetry.sdk.metrics._internal.aggregation._ExplicitBucketHistogramAggregation`` (r: the type)
  - its instances' ``_lock`` (r, held), ``_value`` (r/w: bucket counts; created with ``_get_empty_bucket_counts()``,
    c), ``_sum`` (w), ``_min`` / ``_max`` (w), ``_record_min_max`` (r), ``_boundaries`` (r), ``aggregate()`` (c)
  - ``opentelemetry.sdk.metrics._internal.measurement.Measurement`` (built without its ``__init__``: its instance
    dict is written once with ``value``, ``time_unix_nano``, ``instrument``, ``context``, ``attributes``)
  - ``opentelemetry.sdk.metrics._internal._view_instrument_match._hash_attributes`` (c)
  - an SDK instrument's ``_measurement_consumer`` (r), ``_is_enabled()`` (c, where present); the consumer's
    ``_reader_storages`` (r) and ``_sdk_config.exemplar_filter`` (r, ``should_sample()`` c); a reader storage's
    ``_instrument_view_instrument_matches`` (r); a view match's ``_reset_on_collect``, ``_view._attribute_keys``,
    ``_attributes_aggregation`` (r)
  - the API proxy instrument's ``_real_instrument`` (r: whether a global provider has been set)

``otel_readers`` — opentelemetry-sdk, verified on 1.45.2 (read only: no self-check needed, absent means "none")
  - a ``MeterProvider``'s ``_metric_readers`` (r; older releases: ``_sdk_config.metric_readers``), a
    ``PrometheusMetricReader``'s ``_registry`` (r)

``prometheus_histogram`` — prometheus_client, verified on 0.26.0
  - a labelled ``Histogram`` child's ``_upper_bounds`` (r), ``_buckets`` (values: ``inc()`` and ``set_exemplar()``
    c, i.e. written) and ``_sum`` (``inc()`` c, written)
  - ``MetricWrapperBase._child_samples()`` (overridden by ``NoCreated`` to leave out the ``_created`` sample; if a
    release stops calling it the sample simply reappears)

Nothing outside this package touches another library's private names (a test walks the source to keep it so).
"""
