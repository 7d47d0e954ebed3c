"""Regression tests for two bugs the crash harness's races found (fixed in 72f346d).

Both need two writers on one run, which is what two workers picking up a
crashed run are: here the second writer is simulated in-process, by saving a
competing checkpoint at the moment the run's own save would go in.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from selectgraph import END, AgentGraph, CheckpointConflict, CompiledGraph, SQLiteCheckpointStore
from selectgraph.persistence import Checkpoint


def _compete(store: SQLiteCheckpointStore, run_id: str) -> None:
    """Another worker's save: the run's head moves on by one version behind our back."""
    head = store.head(run_id)
    assert head is not None
    rival = Checkpoint(
        run_id=run_id,
        checkpoint_id=f"rival-{head.version + 1}",
        parent_id=head.checkpoint_id,
        version=head.version + 1,
        step=head.step,
        values=store.load_state(head.checkpoint_id),
        next=head.next,
        metadata=dict(head.metadata),
    )
    store.save(rival, expected_version=head.version)


def _writer(name: str) -> Callable[[Any], dict[str, Any]]:
    def node(state: Any) -> dict[str, Any]:
        return {name: True}

    return node


def _chain(nodes: dict[str, Callable[[Any], dict[str, Any]] | None]) -> CompiledGraph:
    """Nodes in a line; a node given as None just writes ``{name: True}``."""
    graph = AgentGraph("chain")
    names = list(nodes)
    for name, body in nodes.items():
        graph.add_node(name, body or _writer(name))
    for here, there in itertools.pairwise(names):
        graph.add_edge(here, there)
    graph.add_edge(names[-1], END)
    graph.set_entry(names[0])
    return graph.compile()


def test_async_durability_never_stores_a_checkpoint_whose_parent_lost(tmp_path: Path) -> None:
    """Durability "async": a queued save that lost to another writer must stop the saves
    queued after it (the next one would pass the version check, the rival having moved the
    head to the same version, and store a checkpoint whose parent was never stored)."""
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    c_queued = threading.Event()

    def d_node(state: Any) -> dict[str, Any]:
        c_queued.set()  # "d" starts once the checkpoint after "c" is queued
        return {"d": True}

    graph = _chain({"a": None, "b": None, "c": None, "d": d_node})
    graph.run({}, checkpoint_store=store, run_id="r", pause_before=["b"])  # head: "pause"
    real_save = store.save
    calls = 0

    def save(checkpoint: Checkpoint, *, expected_version: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:  # the writer's first save (after "b") waits for the one after "c"
            assert c_queued.wait(5)
            _compete(store, "r")
        real_save(checkpoint, expected_version=expected_version)

    store.save = save  # type: ignore[method-assign]
    with pytest.raises(CheckpointConflict):
        graph.run(None, checkpoint_store=store, run_id="r", durability="async")
    store.save = real_save  # type: ignore[method-assign]
    # Expected: only checkpoints whose parent is stored; the head still loads.
    stored = store.list("r")
    ids = {c.checkpoint_id for c in stored}
    assert [c.checkpoint_id for c in stored if c.parent_id not in (None, *ids)] == []
    head = store.head("r")
    assert head is not None
    store.load_state(head.checkpoint_id)


def test_a_branch_writes_conflict_surfaces_as_checkpoint_conflict(tmp_path: Path) -> None:
    """Another writer moved the head while a fan-out ran: the finished branch's refused
    pending writes mean the run was lost, CheckpointConflict (it was a BranchError)."""
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    graph = AgentGraph("fan")
    graph.add_node("start", lambda state: {"x": 1})
    graph.add_node("left", lambda state: {"left": 1})
    graph.add_node("right", lambda state: {"right": 1})
    graph.add_node("join", lambda state: {"done": True})
    graph.add_edge("start", ["left", "right"])
    graph.add_edge("left", "join")
    graph.add_edge("right", "join")
    graph.add_edge("join", END)
    graph.set_entry("start")
    compiled = graph.compile()
    real_put = store.put_writes
    moved = False

    def put_writes(run_id: str, checkpoint_id: str, task_id: str, writes: Any) -> None:
        nonlocal moved
        if not moved:
            moved = True
            _compete(store, run_id)  # another worker saved while our branches ran
        real_put(run_id, checkpoint_id, task_id, writes)

    store.put_writes = put_writes  # type: ignore[method-assign]
    with pytest.raises(CheckpointConflict):
        compiled.run({}, checkpoint_store=store, run_id="r", durability="sync")
