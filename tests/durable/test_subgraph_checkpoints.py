"""Checkpoints inside subgraphs: after a crash, a subgraph goes on after its last completed node."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
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


def _gated_inner(calls: list[str], gate: threading.Event, entered: threading.Event) -> AgentGraph:
    """a -> b (waits for ``gate``) -> c, each noted in ``calls``."""

    def a(state: GraphState) -> dict[str, Any]:
        calls.append("a")
        return {}

    def b(state: GraphState) -> dict[str, Any]:
        calls.append("b")
        entered.set()
        gate.wait(30)
        return {}

    def c(state: GraphState) -> dict[str, Any]:
        calls.append("c")
        return {}

    inner = AgentGraph("inner")
    inner.add_node("a", a)
    inner.add_node("b", b)
    inner.add_node("c", c)
    inner.add_edge("a", "b")
    inner.add_edge("b", "c")
    inner.add_edge("c", END)
    return inner


async def test_a_cancel_inside_a_subgraph_keeps_where_the_subgraph_was() -> None:
    calls: list[str] = []
    gate, entered = threading.Event(), threading.Event()
    outer = AgentGraph("outer")
    outer.add_node("sub", _gated_inner(calls, gate, entered))
    outer.add_node("after", lambda state: calls.append("after") or {})  # type: ignore[func-returns-value]
    outer.add_edge("sub", "after")
    outer.add_edge("after", END)
    store = InMemoryCheckpointStore()
    task = asyncio.ensure_future(outer.arun({}, checkpoint_store=store, run_id="r"))
    assert await asyncio.to_thread(entered.wait, 30)

    task.cancel()
    await asyncio.sleep(0)  # the task takes the cancellation (halting the run) first
    gate.set()  # b finishes; the run stops before c
    with pytest.raises(asyncio.CancelledError):
        await task
    head = store.head("r")
    assert head is not None
    assert head.metadata["trigger"] == "cancel"
    assert head.metadata["children"]["1:sub"]["next"] == [{"after": "b"}]

    await outer.arun(None, checkpoint_store=store, run_id="r")
    assert calls == ["a", "b", "c", "after"]  # nothing before the cancel ran again


async def test_a_subgraph_node_given_up_at_its_timeout_writes_no_more_checkpoints() -> None:
    calls: list[str] = []
    gate, entered = threading.Event(), threading.Event()
    outer = AgentGraph("outer")
    outer.add_node("sub", _gated_inner(calls, gate, entered), timeout=0.2)
    outer.add_node("recover", lambda state: {"recovered": True})
    outer.add_edge("sub", END)
    outer.add_edge("sub", "recover", on="failure")
    outer.add_edge("recover", END)
    store = InMemoryCheckpointStore()

    result = await outer.arun({}, checkpoint_store=store, run_id="r")
    assert result.state["recovered"] is True
    written = len(store.list("r"))

    gate.set()  # the abandoned subgraph's thread goes on: b returns
    for _ in range(100):  # c would follow at once if the thread were not stopped
        if "c" in calls:
            break
        await asyncio.sleep(0.02)
    assert "c" not in calls
    assert len(store.list("r")) == written
