"""Which process a stream belongs to: a generation number, bumped in the child after every ``os.fork()``.

A forked child inherits the parent's open streams (their trackers, spans and watch references) as copies. They are
the parent's: the parent reports them. Each stream is stamped with the generation it started in, and a child drops
those of an earlier generation silently whatever ends them there (collection, a close, the idle fallback). A counter
rather than ``os.getpid()``: one global read per stream, no system call.
"""

from __future__ import annotations

import os

generation = 0  # read as ``_process.generation`` (a module attribute: the hook rebinds it)


def _forked() -> None:
    global generation
    generation += 1


os.register_at_fork(after_in_child=_forked)
