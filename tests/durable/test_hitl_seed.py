"""Seed 004's human-in-the-loop example, run as written with agent writer and publisher."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from selectgraph import (
    STATE_KEY_LAST_OUTPUT,
    Agent,
    AgentConfig,
    AgentGraph,
    FileCheckpointStore,
    GraphState,
    InterruptRequest,
)
from selectgraph.testing import ScriptedProvider
from tests.durable._support import Calls, pending, triggers


def _seed_graph(calls: Calls, publisher: ScriptedProvider) -> AgentGraph:
    async def review_node(state: GraphState) -> AsyncIterator[Any]:
        """Async generator node that pauses for human approval."""
        calls.hit("analysis")  # the expensive part before the yield
        draft = state.data.get("__last_output__", "")
        state.data["analysis"] = f"Analysis of: {draft[:100]}..."
        approval = yield InterruptRequest(
            prompt="Do you approve this draft?",
            payload={"analysis": state.data["analysis"], "draft": draft},
        )
        calls.hit("after")
        state.data["approved"] = approval == "yes"
        state.data[STATE_KEY_LAST_OUTPUT] = f"Review complete. Approved: {approval}"

    writer_agent = Agent(
        AgentConfig(name="writer"), provider=ScriptedProvider(["A post about AI agents"])
    )
    publisher_agent = Agent(AgentConfig(name="publisher"), provider=publisher)
    graph = AgentGraph()
    graph.add_node("writer", writer_agent)
    graph.add_node("review", review_node)
    graph.add_node("publisher", publisher_agent)
    graph.add_edge("writer", "review")
    graph.add_edge("review", "publisher")
    graph.add_edge("publisher", AgentGraph.END)
    graph.set_entry("writer")
    return graph


def test_seed_004_review_pauses_and_resume_yes_publishes(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "checkpoints")
    calls = Calls()
    publisher = ScriptedProvider(["Published."])
    graph = _seed_graph(calls, publisher)

    result = graph.run("Write a blog post", checkpoint_store=store)
    assert result.interrupted
    assert result.stop_reason == "interrupted"
    assert result.paused
    (interrupt,) = result.interrupts
    assert result.interrupt_id == interrupt.id
    assert interrupt.node == "review"
    assert interrupt.prompt == "Do you approve this draft?"
    assert interrupt.payload == {
        "analysis": "Analysis of: A post about AI agents...",
        "draft": "A post about AI agents",
    }
    assert interrupt.run_id == result.run_id
    assert calls["analysis"] == 1
    assert calls["after"] == 0
    assert publisher.prompts == []  # the publisher has not run
    # The pause is in the store: a checkpoint waiting on that interrupt, at the review node.
    head = store.head(result.run_id)
    assert head is not None
    assert head.checkpoint_id == result.checkpoint_id
    assert head.metadata["trigger"] == "interrupt"
    assert head.next == ["review"]
    assert set(head.interrupts) == {interrupt.id}

    final = graph.resume(pending(result), "yes", checkpoint_store=store)
    assert final.stop_reason == "end"
    assert not final.interrupted
    assert final.run_id == result.run_id
    assert final.state.data["approved"] is True
    assert final.state.data["analysis"] == "Analysis of: A post about AI agents..."
    assert final.content == "Published."  # the publisher ran after the review, once
    assert len(publisher.prompts) == 1
    # The code before the yield ran once: the generator continued at its yield.
    assert calls["analysis"] == 1
    assert calls["after"] == 1
    assert [r.node for r in final.node_results["review"]] == ["review"]
    assert triggers(store, result.run_id) == [
        "input",
        "node_complete",  # writer
        "interrupt",
        "answer",
        "node_complete",  # review
        "node_complete",  # publisher
        "end",
    ]


def test_seed_004_answer_no_is_recorded_as_not_approved(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "checkpoints")
    calls = Calls()
    graph = _seed_graph(calls, ScriptedProvider(["Held back."]))
    result = graph.run("Write a blog post", checkpoint_store=store)
    final = graph.resume(pending(result), "no", checkpoint_store=store)
    assert final.state.data["approved"] is False
    snapshot = graph.get_state(result.run_id, checkpoint_store=store)
    assert snapshot.next == ()
    assert snapshot.values["approved"] is False
    assert snapshot.interrupts == ()
