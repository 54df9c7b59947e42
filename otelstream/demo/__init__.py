"""``otelstream demo`` and the fake provider it (and the test suite, and the benchmarks) streams from.

``otelstream.demo.provider.serve()`` runs the fake provider; ``otelstream.demo.run`` is the CLI subcommand. This
package's ``__init__`` imports nothing so that ``otelstream --help`` stays fast.
"""
