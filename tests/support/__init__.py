"""What more than one test folder uses, and every stand-in for the world outside otelstream: fake and scripted
servers, canned bodies, SDK client builders, the recording listener, instrumented pipelines, SDK feature flags.
A folder's own helpers live beside its tests in ``harness.py``; fixtures live in conftest.py files."""
