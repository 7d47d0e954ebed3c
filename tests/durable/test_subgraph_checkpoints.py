"""Checkpoints inside subgraphs: after a crash, a subgraph goes on after its last completed node."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from selectgraph import END, AgentGraph, GraphState, InMemoryCheckpointStore, SQLiteCheckpointStore
from tests.durable._restart import counts
from tests.durable._subgraph_crash import HOWS, build, run

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("how", HOWS)
def test_a_subgraph_killed_mid_way_continues_after_its_last_completed_node(
    tmp_path: Path, how: str
) -> None:
    db, log_path = tmp_path / "runs.db", tmp_path / "log"
    killed = subprocess.run(
        [sys.executable, "-m", "tests.durable._subgraph_crash", how, str(db), str(log_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == 17, killed.stderr
    assert counts(log_path)["crash"] == 1

    result = run(how, db, log_path)

    assert result.state.data["steps"] == ["before", "first", "second", "crash", "last", "after"]
    ran = counts(log_path)
    # Only the node that was running when the process died ran again.
    assert ran.pop("crash") == 2
    assert set(ran.values()) == {1}, ran
    with SQLiteCheckpointStore(db) as store:
        triggers = [c.metadata["trigger"] for c in reversed(store.list("r"))]
    assert triggers.count("subgraph_node") >= 2


def test_each_inner_node_saves_the_parents_state_and_where_the_subgraph_is(
    tmp_path: Path,
) -> None:
    graph = build("graph", tmp_path / "log")
    (tmp_path / "log").write_text("crash\n")  # the crash node does not kill this process
    store = InMemoryCheckpointStore()
    graph.run({}, checkpoint_store=store, run_id="r")

    inside = [c for c in store.list("r") if c.metadata["trigger"] == "subgraph_node"]
    assert [c.metadata["children"]["2:sub"]["next"] for c in inside] == [
        [{"after": "first"}],
        [{"after": "second"}],
        [{"after": "crash"}],
        [{"after": "last"}],
    ]
    # The parent's state is as the subgraph node found it; its step is the one before.
    assert all(c.next == ["sub"] and c.step == 1 for c in inside)
    child_steps = [c.metadata["children"]["2:sub"]["steps"] for c in inside]
    assert child_steps == [1, 2, 3, 4]


def test_forking_from_inside_a_subgraph_goes_on_from_that_inner_node(tmp_path: Path) -> None:
    calls: list[str] = []

    def step(name: str) -> Any:
        def node(state: GraphState) -> dict[str, Any]:
            calls.append(name)
            return {"trail": [*state.data.get("trail", []), name]}

        return node

    inner = AgentGraph("inner")
    for name in ("a", "b", "c"):
        inner.add_node(name, step(name))
    inner.add_edge("a", "b")
    inner.add_edge("b", "c")
    inner.add_edge("c", END)
    outer = AgentGraph("outer")
    outer.add_node("sub", inner)
    outer.add_node("end", step("end"))
    outer.add_edge("sub", "end")
    outer.add_edge("end", END)
    store = InMemoryCheckpointStore()
    outer.run({}, checkpoint_store=store, run_id="r")
    after_a = next(
        c
        for c in store.list("r")
        if c.metadata["trigger"] == "subgraph_node"
        and c.metadata["children"]["1:sub"]["next"] == [{"after": "a"}]
    )
    calls.clear()

    fork = outer.run(None, checkpoint_store=store, run_id="r", checkpoint_id=after_a.checkpoint_id)

    assert calls == ["b", "c", "end"]
    assert fork.state.data["trail"] == ["a", "b", "c", "end"]


def test_a_subgraph_in_a_fan_out_branch_writes_no_inner_checkpoints() -> None:
    inner = AgentGraph("inner")
    inner.add_node("a", lambda state: {"hits": 1})
    inner.add_edge("a", END)
    outer = AgentGraph("outer")
    outer.add_node("x", inner)
    outer.add_node("y", inner)
    outer.add_parallel_nodes("both", ["x", "y"])
    outer.add_edge("both", END)
    store = InMemoryCheckpointStore()
    outer.run({}, checkpoint_store=store, run_id="r")
    assert all(c.metadata["trigger"] != "subgraph_node" for c in store.list("r"))


def test_exit_durability_writes_nothing_inside_a_subgraph(tmp_path: Path) -> None:
    graph = build("graph", tmp_path / "log")
    (tmp_path / "log").write_text("crash\n")
    store = InMemoryCheckpointStore()
    graph.run({}, checkpoint_store=store, run_id="r", durability="exit")
    assert all(c.metadata["trigger"] != "subgraph_node" for c in store.list("r"))
