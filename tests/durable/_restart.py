"""A graph that logs its side effects to a file, and a command line to run it in a new process.

``python -m tests.durable._restart start DB LOG RUN_ID`` runs the graph until it
pauses; ``python -m tests.durable._restart resume DB LOG INTERRUPT_ID ANSWER``
answers an interrupt from a fresh process, as after a restart. Each prints the
result as one JSON line. Both open the SQLite store at DB.

Side effects are appended to LOG, one name a line, so a test counts how often
each step really ran, across every process.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from selectgraph import (
    END,
    AgentGraph,
    CheckpointConflict,
    GraphResult,
    GraphState,
    InterruptRequest,
    NodeContext,
    SQLiteCheckpointStore,
)
from selectgraph.persistence import Checkpoint


def log(path: Path, name: str) -> None:
    """Append one side effect to the log (opened per write: several processes share it)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(name + "\n")


def counts(path: Path) -> dict[str, int]:
    """How many times each side effect happened so far."""
    found: dict[str, int] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").split():
            found[line] = found.get(line, 0) + 1
    return found


def build(log_path: Path) -> AgentGraph:
    """prepare -> review (generator: once() step, two questions) -> publish."""

    def prepare(state: GraphState) -> dict[str, Any]:
        log(log_path, "prepare")
        return {"topic": "checkpoints"}

    def write_draft(topic: str) -> str:
        log(log_path, "once")
        return f"draft on {topic}"

    def review(state: GraphState, context: NodeContext) -> Iterator[Any]:
        log(log_path, "review_pre")
        draft = context.once("draft", write_draft, state.data["topic"])
        first = yield InterruptRequest("approve?", {"draft": draft})
        log(log_path, "review_mid")
        second = yield InterruptRequest("sure?")
        log(log_path, "review_post")
        state.data["draft"] = draft
        state.data["answers"] = [first, second]

    def publish(state: GraphState) -> dict[str, Any]:
        log(log_path, "publish")
        return {"published": f"{state.data['draft']} ({'/'.join(state.data['answers'])})"}

    graph = AgentGraph("restartable")
    graph.add_node("prepare", prepare)
    graph.add_node("review", review)
    graph.add_node("publish", publish)
    graph.add_edge("prepare", "review")
    graph.add_edge("review", "publish")
    graph.add_edge("publish", END)
    return graph


class BarrierStore(SQLiteCheckpointStore):
    """A SQLite store whose "answer" saves wait until ``parties`` processes reached theirs.

    Both resumers of a race have then loaded the same head before either
    writes, so the race is decided by the store's version check alone.
    """

    def __init__(self, path: Path, barrier: Path, parties: int = 2) -> None:
        super().__init__(path)
        self.barrier = barrier
        self.parties = parties

    def save(self, checkpoint: Checkpoint, *, expected_version: int) -> None:
        """Wait at the barrier before an answer checkpoint, then save."""
        if checkpoint.metadata.get("trigger") == "answer":
            (self.barrier / f"ready-{os.getpid()}").touch()
            deadline = time.monotonic() + 30
            while len(list(self.barrier.glob("ready-*"))) < self.parties:
                if time.monotonic() > deadline:
                    raise TimeoutError("the other resumer never reached the barrier")
                time.sleep(0.005)
        super().save(checkpoint, expected_version=expected_version)


def report(result: GraphResult) -> dict[str, Any]:
    """What a test needs to know of a result, as JSON."""
    return {
        "outcome": "ok",
        "stop_reason": result.stop_reason,
        "interrupts": [i.id for i in result.interrupts],
        "data": dict(result.state.data),
        "steps": result.steps,
    }


def main(argv: list[str]) -> None:
    """Run one command (see the module doc) and print its JSON report."""
    command, db, log_file = argv[0], Path(argv[1]), Path(argv[2])
    graph = build(log_file)
    race_dir = os.environ.get("SELECTGRAPH_TEST_RACE_DIR")
    opened = SQLiteCheckpointStore(db) if not race_dir else BarrierStore(db, Path(race_dir))
    with opened as store:
        if command == "start":
            out = report(graph.run({}, checkpoint_store=store, run_id=argv[3]))
        elif command == "resume":
            try:
                out = report(graph.resume(argv[3], argv[4], checkpoint_store=store))
            except CheckpointConflict as conflict:
                out = {"outcome": "conflict", "error": str(conflict)}
        else:
            raise SystemExit(f"unknown command {command!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
