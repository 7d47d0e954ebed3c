"""Instructions per run, counted by valgrind's callgrind: a timing that load cannot move.

``python -m benchmarks.instructions [--against PATH] [workload ...]`` runs each workload
under ``valgrind --tool=callgrind`` twice, once making N more runs than the other, and
prints the difference divided by N. With ``--against``, the same is counted for the
selectgraph checkout at PATH (a git worktree of another commit), for a before/after
of a change to the step loop. Needs valgrind (Debian: ``apt-get install valgrind``);
not part of ``python -m benchmarks``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

RUNS = {"linear3": 300, "loop": 3, "memcp": 10, "subgraph": 10, "fanout": 10}
"""Workloads, and how many more runs the counting process makes."""


def _workload(name: str) -> Callable[[], Any]:
    from benchmarks import workloads as w
    from selectgraph import END, AgentGraph, InMemoryCheckpointStore

    if name == "linear3":
        return w.selectgraph_linear3()
    if name == "loop":
        return w.selectgraph_loop()
    if name == "fanout":
        return w.selectgraph_fanout()
    if name == "memcp":
        graph = AgentGraph("checkpointed")
        graph.add_node("n", lambda state: {"x": state.get("x", 0) + 1})
        graph.add_edge("n", "n", condition="x < 100")
        graph.add_edge("n", END)
        compiled, store = graph.compile(), InMemoryCheckpointStore()
        return lambda: compiled.run({"x": 0}, checkpoint_store=store)
    if name == "subgraph":
        inner = AgentGraph("inner")
        inner.add_node("a", lambda state: {"y": state.get("y", 0) + 1}, next_node=END)
        outer = AgentGraph("outer")
        outer.add_node("sub", inner.compile())
        outer.add_node("b", lambda state: {"x": state.get("x", 0) + 1})
        outer.add_edge("sub", "b")
        outer.add_edge("b", "sub", condition="x < 50")
        outer.add_edge("b", END)
        compiled = outer.compile()
        return lambda: compiled.run({"x": 0})
    raise SystemExit(f"unknown workload {name!r}; known: {', '.join(RUNS)}")


def _child(name: str, runs: int) -> None:
    """The counted process: build the workload, warm it up, make ``runs`` runs."""
    run = _workload(name)

    def once() -> None:
        result = run()
        if asyncio.iscoroutine(result):
            asyncio.run(result)

    for _ in range(2):
        once()
    # Objects made before the runs (modules, classes, the workload) are left out of
    # garbage collections from here, so a collection costs what the runs made, not
    # the size of the program around them, which differs from checkout to checkout.
    gc.collect()
    gc.freeze()
    for _ in range(runs):
        once()


def _count(checkout: Path, name: str, runs: int) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-m",
                "benchmarks.instructions",
                "--child",
                name,
                str(runs),
            ],
            cwd=checkout,
            env={**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"},
            capture_output=True,
            text=True,
            check=True,
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_run(checkout: Path, name: str) -> int:
    """Instructions one more run of ``name`` costs, in the checkout at ``checkout``."""
    runs = RUNS[name]
    return (_count(checkout, name, runs) - _count(checkout, name, 0)) // runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", type=Path, help="another selectgraph checkout to compare")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "RUNS"), help=argparse.SUPPRESS)
    parser.add_argument("workloads", nargs="*", default=list(RUNS))
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return 0
    for name in args.workloads:
        after = per_run(ROOT, name)
        if args.against is None:
            print(f"{name:10s} {after:>14,} instructions/run")
            continue
        before = per_run(args.against.resolve(), name)
        print(f"{name:10s} {before:>14,} -> {after:>14,}   x{after / before:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
