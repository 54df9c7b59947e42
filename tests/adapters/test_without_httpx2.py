"""A service with Bedrock alone (``otelstream[bedrock]``: boto3 brings neither httpx2 nor the other SDKs) or an older
google-genai (httpx only) has no httpx2: ``instrument()`` must still patch what is there, not raise ImportError.
Run in a fresh interpreter where httpx2 and the SDKs that need it cannot be imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_PROGRAM = textwrap.dedent(
    """
    import importlib.abc, sys

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in ("httpx2", "openai", "anthropic"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Absent())
    import botocore.eventstream, wrapt
    from prometheus_client import CollectorRegistry
    import otelstream
    from otelstream.adapters import exceptions

    otelstream.instrument(registry=CollectorRegistry(), self_check=False)
    assert isinstance(botocore.eventstream.EventStream.__dict__["__iter__"], wrapt.FunctionWrapper)
    assert "httpx2" not in sys.modules and "httpx2" not in exceptions.ADOPTED
    assert exceptions.classify_common(TimeoutError()) is None  # no httpx library known: undecided, no error
    otelstream.uninstrument()
    print("ok")
    """
)


def test_instrument_without_httpx2() -> None:
    done = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
