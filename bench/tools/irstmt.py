"""Instructions (callgrind Ir) per execution of a Python statement, against an empty loop: the price of one operation
before building a hot path on it.

    python bench/tools/irstmt.py [--n 20000] [--event chat|messages] SETUP STMT [STMT ...]

``SETUP`` runs once (``d`` is bound first to one canned SSE event's bytes, ``--event``, as the bench's bodies hold
them); each ``STMT`` runs ``--n`` times in a loop, in its own process under ``valgrind --tool=callgrind``, e.g.

    python bench/tools/irstmt.py "import json" 'd.count(b"\\n:")' "13 in d" "json.loads(d[6:])"
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/tools/ -> the repo
if ROOT not in sys.path:
    sys.path.append(ROOT)

from bench.tools.callgrind_dumps import dump_totals  # noqa: E402


def _event(kind: str) -> bytes:
    from bench import canned

    return canned.frames("http-messages" if kind == "messages" else "http-chat", 3)[3]  # a plain text delta


def child(n: int, kind: str, setup: str, stmt: str) -> None:
    g: dict[str, object] = {"d": _event(kind)}
    exec(setup, g)
    exec(f"def body(n):\n    for _ in range(n):\n        {stmt}\n\ndef ref(n):\n    for _ in range(n):\n        pass\n", g)
    body, ref = g["body"], g["ref"]
    body(n)  # type: ignore[operator]
    ref(n)  # type: ignore[operator]
    os.getppid()
    ref(n)  # type: ignore[operator]
    os.getppid()
    body(n)  # type: ignore[operator]
    os.getppid()


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--event", choices=("chat", "messages"), default="chat")
    p.add_argument("setup")
    p.add_argument("stmts", nargs="+")
    a = p.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind not installed")
    print(f"d = {_event(a.event)!r} ({len(_event(a.event))} bytes)")
    for stmt in a.stmts:
        tot = dump_totals([__file__, "--child", str(a.n), a.event, a.setup, stmt])
        print(f"{stmt}: {(tot[3] - tot[2]) / a.n:,.0f} Ir")


if __name__ == "__main__":
    main()
