"""Diagnostics beside the suite: where the instructions go (``hotpath`` and its ``--adapter`` mode,
``hotpath_adapter``; ``opcodes``, ``ablate``, ``irstmt``; ``callgrind_dumps`` runs their children under callgrind)."""
