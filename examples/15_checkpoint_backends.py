"""Checkpointing with every backend: pause for a human, continue from the store.

Seed 004's example 59, with its three stores (memory, files, SQLite); the same
code runs on PostgresCheckpointStore. Each store keeps the paused run; a new
graph object (as another process would have) answers the question and finishes
the run from what the store holds.

Run: python examples/15_checkpoint_backends.py
"""

from __future__ import annotations

import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    FileCheckpointStore,
    GraphState,
    InMemoryCheckpointStore,
    InterruptRequest,
    SQLiteCheckpointStore,
)


def draft(state: GraphState) -> dict[str, Any]:
    return {"draft": f"Release notes for {state['version']}"}


def approve(state: GraphState) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    answer = yield InterruptRequest("Publish?", {"draft": state["draft"]})
    return {"approved": answer == "yes"}


def build() -> AgentGraph:
    graph = AgentGraph("release", input_field="version")
    graph.add_node("draft", draft, next_node="approve")
    graph.add_node("approve", approve, next_node="publish")
    graph.add_node("publish", lambda state: {"published": state["approved"]}, next_node=END)
    return graph


graph = build()  # what selectgraph run/studio load


def round_trip(name: str, store: CheckpointStore) -> None:
    paused = build().run({"version": "2.1"}, checkpoint_store=store)
    saved = store.list(paused.run_id)
    question = paused.interrupts[0].prompt
    print(f"{name}: paused on {question!r} after {len(saved)} checkpoints")
    assert paused.interrupt_id is not None
    done = build().resume(paused.interrupt_id, "yes", checkpoint_store=store)
    print(f"{name}: published={done.state['published']} ({done.stop_reason})")


if __name__ == "__main__":
    folder = Path(tempfile.mkdtemp(prefix="selectgraph-checkpoints-"))
    round_trip("memory", InMemoryCheckpointStore())
    round_trip("files", FileCheckpointStore(folder / "checkpoints"))
    with SQLiteCheckpointStore(folder / "checkpoints.db") as sqlite:
        round_trip("sqlite", sqlite)
