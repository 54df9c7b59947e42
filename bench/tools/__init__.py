"""Diagnostics beside the suite: where the instructions go (``hotpath``, ``opcodes``, ``ablate``)."""
