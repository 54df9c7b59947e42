"""``otelstream dashboards [DIR]``: the shipped Grafana dashboards and Prometheus rules, written to a folder.

In a wheel the files live in the package as ``otelstream/_dashboards/`` (hatch force-includes the repository's
``dashboards/`` folder there); in a source or editable checkout they are read from the repository's
``dashboards/`` next to the package.

One module per job: ``command_line`` (the subcommand), ``shipped`` (finding, rendering and writing the files),
``attribute_variables`` (a dashboard variable per metric attribute), ``rule_settings`` (the objective and the stall
wait in the rules), ``semconv_queries`` (the PromQL for the other GenAI convention versions) and ``k8s_manifests``
(the PrometheusRule, ServiceMonitor and dashboard ConfigMap).
"""
