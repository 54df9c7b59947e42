"""The four variants behind one interface: ``VARIANTS[name]`` gives ``Acct(clock)``, ``observe(it, acct, on_end)``,
``observe_async(ait, acct, on_end, whoami)``, ``reader(body, acct)`` and ``keepalives(acct, chunk)``. A compiled
variant that is not built is absent (``bench/accelerator_lab/build.sh`` builds them)."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

from bench.accelerator_lab import pure

# fmt: off
VARIANTS: dict[str, SimpleNamespace] = {
    "pure": SimpleNamespace(Acct=pure.Acct, observe=pure.observe, observe_async=pure.observe_async,
                            reader=pure.reader, keepalives=pure.keepalives)
}

try:
    _c = importlib.import_module("bench.accelerator_lab._cext")
    VARIANTS["cext"] = SimpleNamespace(Acct=_c.Acct, observe=_c.Observe, observe_async=_c.ObserveAsync,
                                       reader=_c.Reader, keepalives=_c.keepalives)  # fmt: skip
except ImportError:
    pass
try:
    _y = importlib.import_module("bench.accelerator_lab._cy")
    VARIANTS["cython"] = SimpleNamespace(Acct=_y.Acct, observe=_y.Observe, observe_async=_y.observe_async,
                                         reader=_y.Reader, keepalives=_y.keepalives)  # fmt: skip
except ImportError:
    pass
try:
    _m = importlib.import_module("bench.accelerator_lab.mypure")
    if _m.__file__ and not _m.__file__.endswith(".py"):  # only the compiled module counts
        VARIANTS["mypyc"] = SimpleNamespace(Acct=_m.Acct, observe=_m.observe, observe_async=_m.observe_async,
                                            reader=_m.reader, keepalives=_m.keepalives)  # fmt: skip
except ImportError:
    pass
