"""Builds the optional accelerator for hatchling: setuptools' build_ext compiles it (any failure: one warning, the
wheel stays pure Python); a built module goes into the wheel, which is then tagged for this interpreter and
platform. For an editable install the module is built next to its source, where the editable path finds it."""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class AcceleratorHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if os.environ.get("TINYACC_PURE_PYTHON") == "1":
            return
        try:
            from setuptools import Distribution, Extension
            from setuptools.command.build_ext import build_ext

            ext = Extension("tinyacc._speed", [os.path.join(self.root, "tinyacc", "_speed.c")])
            dist = Distribution({"name": "tinyacc", "ext_modules": [ext]})
            cmd = build_ext(dist)
            cmd.inplace = True  # next to the source: the editable install finds it; the wheel gets it below
            cmd.ensure_finalized()
            old = os.getcwd()
            os.chdir(self.root)
            try:
                cmd.run()
            finally:
                os.chdir(old)
        except Exception as exc:  # no compiler, no headers: the pure path
            print(f"WARNING: tinyacc: the optional accelerator was not built ({exc}); pure Python", file=sys.stderr)
            return
        so = "tinyacc/_speed" + sysconfig.get_config_var("EXT_SUFFIX")
        if version != "editable":
            build_data["force_include"][os.path.join(self.root, so)] = so
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
