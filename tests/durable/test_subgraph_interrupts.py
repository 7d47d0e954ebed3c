"""A generator node inside a subgraph (add_subgraph, or a graph used as a node) pauses the run."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from selectgraph import END, AgentGraph, CheckpointStore, GraphState, InterruptRequest
from tests.durable._support import Calls, pending


def _child(calls: Calls) -> AgentGraph:
    def prep(state: GraphState) -> dict[str, Any]:
        calls.hit("child_prep")
        return {"prepared": True}

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("child_ask")
        answer = yield InterruptRequest("inner?", {"q": state.data.get("q")})
        calls.hit("child_answered")
        return {"inner_answer": answer}

    child = AgentGraph("child")
    child.add_node("prep", prep)
    child.add_node("ask", ask)
    child.add_edge("prep", "ask")
    child.add_edge("ask", END)
    return child


def _parent(calls: Calls, how: str) -> AgentGraph:
    def before(state: GraphState) -> dict[str, Any]:
        calls.hit("before")
        return {"q": "why", "inner_answer": ""}

    def after(state: GraphState) -> dict[str, Any]:
        calls.hit("after")
        return {"done": f"got {state.data['inner_answer']}"}

    parent = AgentGraph("parent")
    parent.add_node("before", before)
    child = _child(calls)
    if how == "add_subgraph":
        parent.add_subgraph(
            "inner", child, input_map={"q": "q"}, output_map={"inner_answer": "inner_answer"}
        )
    elif how == "compiled":
        parent.add_node("inner", child.compile())
    else:
        parent.add_node("inner", child)
    parent.add_node("after", after)
    parent.add_edge("before", "inner")
    parent.add_edge("inner", "after")
    parent.add_edge("after", END)
    return parent


@pytest.mark.parametrize("how", ["add_subgraph", "graph", "compiled"])
@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_an_interrupt_inside_a_subgraph_pauses_and_resumes(
    store: CheckpointStore, how: str, live: bool
) -> None:
    calls = Calls()
    graph = _parent(calls, how)
    result = graph.run({}, checkpoint_store=store, run_id="nest")
    assert result.interrupted
    (interrupt,) = result.interrupts
    assert interrupt.node == "ask"
    assert interrupt.payload == {"q": "why"}
    # The id carries the subgraph's namespace (the parent's node name).
    assert interrupt.id.startswith("nest|inner/")
    assert interrupt.id.endswith(":ask|0")
    head = store.head("nest")
    assert head is not None
    assert head.next == ["inner"]  # the parent's node did not complete
    if not live:
        graph = _parent(calls, how)
    final = graph.resume(interrupt.id, "because", checkpoint_store=store)
    assert final.stop_reason == "end"
    assert final.state.data["done"] == "got because"
    assert calls["before"] == 1  # the parent's completed node is not re-run
    assert calls["after"] == 1
    assert calls["child_answered"] == 1
    # The paused child run is kept (in memory, and in the checkpoint's metadata),
    # so the child's completed nodes do not run again either.
    assert calls["child_prep"] == 1
    # The generator continues at its yield in process, and replays after a restart.
    assert calls["child_ask"] == (1 if live else 2)


def test_a_subgraph_interrupt_resumes_in_a_new_process_without_rerunning_the_child_prefix(
    tmp_path: Any,
) -> None:
    """The paused child's progress is in the store, not only in this process's memory."""
    from selectgraph import SQLiteCheckpointStore

    calls = Calls()
    with SQLiteCheckpointStore(tmp_path / "x.db") as store:
        result = _parent(calls, "add_subgraph").run({}, checkpoint_store=store, run_id="p")
    assert result.interrupt_id is not None
    with SQLiteCheckpointStore(tmp_path / "x.db") as reopened:
        final = _parent(calls, "add_subgraph").resume(
            pending(result), "later", checkpoint_store=reopened
        )
    assert final.state.data["done"] == "got later"
    assert calls.counts == {
        "before": 1,
        "child_prep": 1,
        "child_ask": 2,
        "child_answered": 1,
        "after": 1,
    }
