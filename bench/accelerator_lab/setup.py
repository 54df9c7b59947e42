"""Builds the lab's compiled variants in place: ``bench/accelerator_lab/build.sh`` (it generates mypure.py first)."""

from Cython.Build import cythonize
from mypyc.build import mypycify
from setuptools import Extension, setup

setup(
    name="otelstream-lab",
    ext_modules=[
        Extension("bench.accelerator_lab._cext", ["_cext.c"], extra_compile_args=["-O2"], optional=True),
        *mypycify(["mypure.py"]),
        *cythonize([Extension("bench.accelerator_lab._cy", ["_cy.pyx"], extra_compile_args=["-O2"])], quiet=True),
    ],
)
