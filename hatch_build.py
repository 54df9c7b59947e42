"""The build hook of otelstream's optional compiled accelerator (``otelstream/_speedups.c``).

setuptools' ``build_ext`` compiles it (setuptools only drives the compiler: the package is built by hatchling). Any
failure (no compiler, no Python headers) prints one note and the wheel stays pure Python, which runs everywhere:
the install never fails for want of a compiler. A built module goes into the wheel, which is then tagged for this
interpreter and platform; an editable install gets it next to its source. ``OTELSTREAM_PURE_PYTHON=1`` at build time
skips the compile (CI's pure leg; the same variable forces the pure path at run time)."""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script (python hatch_build.py) where hatchling is not installed
    BuildHookInterface = object  # type: ignore[assignment,misc]

MODULE = "otelstream._speedups"
SOURCE = os.path.join("otelstream", "_speedups.c")


def build_in_place(root: str) -> str:
    """Compile the module next to its source; returns its path relative to ``root`` (raises on any failure)."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    ext = Extension(MODULE, [SOURCE], extra_compile_args=["-O2"] if os.name != "nt" else [])
    cmd = build_ext(Distribution({"name": "otelstream", "ext_modules": [ext]}))
    cmd.inplace = True
    cmd.force = True  # never a module left over from an earlier build
    cmd.ensure_finalized()
    old = os.getcwd()
    os.chdir(root)
    try:
        cmd.run()
    finally:
        os.chdir(old)
    return os.path.join("otelstream", "_speedups" + str(sysconfig.get_config_var("EXT_SUFFIX")))


class AcceleratorHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if os.environ.get("OTELSTREAM_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on"):
            print("otelstream: OTELSTREAM_PURE_PYTHON=1: the compiled accelerator is not built", file=sys.stderr)
            return
        try:
            built = build_in_place(self.root)
        except BaseException as exc:  # no compiler, no headers, a compiler error: the pure path, still installed
            if isinstance(exc, KeyboardInterrupt):
                raise
            print(f"otelstream: the optional compiled accelerator was not built ({exc}); pure Python", file=sys.stderr)
            return
        if version != "editable":
            build_data["force_include"][os.path.join(self.root, built)] = built
        build_data["pure_python"] = False
        build_data["infer_tag"] = True


if __name__ == "__main__":  # a checkout's in-place build: python hatch_build.py
    print(build_in_place(os.path.dirname(os.path.abspath(__file__))))
