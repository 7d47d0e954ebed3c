"""Time travel: forking from an earlier checkpoint, update_state, and a graph that changed."""

from __future__ import annotations

from collections.abc import Generator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    GraphState,
    InterruptRequest,
    ResumeError,
    append,
)
from tests.durable._support import Calls, pending, stored, triggers


class Doc(BaseModel):
    topic: str = ""
    notes: Annotated[list[str], append] = []
    draft: str = ""
    final: str = ""


def _pipeline(calls: Calls) -> AgentGraph:
    """plan -> write -> edit, over a schema with an append reducer."""

    def plan(state: GraphState) -> dict[str, Any]:
        calls.hit("plan")
        return {"topic": "otters", "notes": ["planned"]}

    def write(state: GraphState) -> dict[str, Any]:
        calls.hit("write")
        return {"draft": f"about {state.data['topic']}", "notes": ["written"]}

    def edit(state: GraphState) -> dict[str, Any]:
        calls.hit("edit")
        return {"final": state.data["draft"].upper(), "notes": ["edited"]}

    graph = AgentGraph("doc", state_schema=Doc)
    graph.add_node("plan", plan)
    graph.add_node("write", write)
    graph.add_node("edit", edit)
    graph.add_edge("plan", "write")
    graph.add_edge("write", "edit")
    graph.add_edge("edit", END)
    return graph


def _after(history: list[Any], node: str) -> Any:
    return next(s for s in history if s.metadata["trigger"] == "node_complete" and s.after == node)


def test_forking_from_an_earlier_checkpoint_makes_a_new_run(store: CheckpointStore) -> None:
    calls = Calls()
    graph = _pipeline(calls)
    graph.run({}, checkpoint_store=store, run_id="orig")
    original = stored(store, "orig")
    history = graph.get_history("orig", checkpoint_store=store)
    after_plan = _after(history, "plan")

    fork = graph.run(None, checkpoint_store=store, checkpoint_id=after_plan.checkpoint_id)
    assert fork.run_id != "orig"
    assert fork.stop_reason == "end"
    assert calls.order == ["plan", "write", "edit", "write", "edit"]  # plan is not redone
    assert fork.state.data["final"] == "ABOUT OTTERS"
    assert fork.state.data["notes"] == ["planned", "written", "edited"]
    assert stored(store, "orig") == original  # the original history is untouched
    forked = store.list(fork.run_id)
    assert forked[0].metadata["trigger"] == "fork"
    assert forked[0].metadata["forked_from"] == after_plan.checkpoint_id
    assert graph.get_state(fork.run_id, checkpoint_store=store).values == dict(fork.state.data)


def test_a_listing_names_each_checkpoint_after_the_node_it_was_saved_after(
    store: CheckpointStore,
) -> None:
    calls = Calls()
    graph = _pipeline(calls)
    graph.run({}, checkpoint_store=store, run_id="listed")

    listing = store.list("listed")  # oldest first
    names = [(c.metadata["trigger"], c.node_name) for c in listing]
    # The input checkpoint comes before any node: it names none (it named "plan",
    # so two checkpoints in a row claimed to be after plan).
    assert names[0] == ("input", None)
    assert [n for t, n in names if t == "node_complete"] == ["plan", "write", "edit"]

    # The seed's way to pick a checkpoint: by node name. Forking after plan skips plan.
    after_plan = next(c for c in listing if c.node_name == "plan")
    fork = graph.run(None, checkpoint_store=store, checkpoint_id=after_plan.checkpoint_id)
    assert fork.stop_reason == "end"
    assert calls.order == ["plan", "write", "edit", "write", "edit"]

    # A fork of the input checkpoint starts before plan: its first checkpoint names
    # no node either, so "the checkpoint after plan" in it is the one after plan.
    refork = graph.run(None, checkpoint_store=store, checkpoint_id=listing[0].checkpoint_id)
    forked = store.list(refork.run_id)
    assert (forked[0].metadata["trigger"], forked[0].node_name) == ("fork", None)
    assert [c.node_name for c in forked].count("plan") == 1


def test_forking_into_a_named_run_and_not_twice(store: CheckpointStore) -> None:
    calls = Calls()
    graph = _pipeline(calls)
    graph.run({}, checkpoint_store=store, run_id="orig")
    after_write = _after(graph.get_history("orig", checkpoint_store=store), "write")
    fork = graph.run(
        None, checkpoint_store=store, checkpoint_id=after_write.checkpoint_id, run_id="alt"
    )
    assert fork.run_id == "alt"
    assert calls.order == ["plan", "write", "edit", "edit"]
    before = stored(store, "alt")
    with pytest.raises(ResumeError, match="'alt' already exists"):
        graph.run(
            None, checkpoint_store=store, checkpoint_id=after_write.checkpoint_id, run_id="alt"
        )
    assert stored(store, "alt") == before


def test_update_state_then_fork_uses_the_corrected_values(store: CheckpointStore) -> None:
    calls = Calls()
    graph = _pipeline(calls)
    paused = graph.run({}, checkpoint_store=store, run_id="u", pause_before=["write"])
    assert paused.stop_reason == "paused"
    new_id = graph.update_state(
        "u", {"topic": "beavers", "notes": ["fixed"]}, checkpoint_store=store
    )
    head = store.head("u")
    assert head is not None
    assert head.checkpoint_id == new_id
    assert head.metadata["trigger"] == "update"
    assert head.next == ["write"]  # without as_node the run continues where it was
    snapshot = graph.get_state("u", checkpoint_store=store)
    assert snapshot.values["topic"] == "beavers"
    assert snapshot.values["notes"] == ["planned", "fixed"]  # merged through the reducer
    final = graph.run(None, checkpoint_store=store, run_id="u")
    assert final.state.data["final"] == "ABOUT BEAVERS"
    assert final.state.data["notes"] == ["planned", "fixed", "written", "edited"]
    assert calls.order == ["plan", "write", "edit"]


def test_update_state_as_a_node_continues_by_routing_from_it(store: CheckpointStore) -> None:
    calls = Calls()
    graph = _pipeline(calls)
    graph.run({}, checkpoint_store=store, run_id="n", pause_before=["write"])
    graph.update_state(
        "n", {"draft": "handmade", "notes": ["by hand"]}, checkpoint_store=store, as_node="write"
    )
    head = store.head("n")
    assert head is not None
    assert head.next == [{"after": "write"}]
    assert head.metadata["as_node"] == "write"
    final = graph.run(None, checkpoint_store=store, run_id="n")
    assert final.state.data["final"] == "HANDMADE"
    assert calls.order == ["plan", "edit"]  # write itself never ran
    assert final.state.data["notes"] == ["planned", "by hand", "edited"]


def test_update_state_of_a_paused_interrupt_keeps_it_answerable(store: CheckpointStore) -> None:
    calls = Calls()

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask")
        answer = yield InterruptRequest(f"publish {state.data['topic']}?")
        return {"final": f"{state.data['topic']}:{answer}"}

    graph = AgentGraph("ask", state_schema=Doc)
    graph.add_node("plan", lambda s: {"topic": "otters"})
    graph.add_node("ask", ask)
    graph.add_edge("plan", "ask")
    graph.add_edge("ask", END)
    result = graph.run({}, checkpoint_store=store, run_id="ui")
    graph.update_state("ui", {"topic": "beavers"}, checkpoint_store=store)
    snapshot = graph.get_state("ui", checkpoint_store=store)
    assert [i.id for i in snapshot.interrupts] == [result.interrupt_id]
    # The head moved: the live generator is stale, so the run replays from the store.
    final = graph.resume(pending(result), "yes", checkpoint_store=store)
    assert final.state.data["final"] == "beavers:yes"
    assert calls["ask"] == 2


def test_update_state_refuses_an_unknown_node_and_run(store: CheckpointStore) -> None:
    graph = _pipeline(Calls())
    graph.run({}, checkpoint_store=store, run_id="x", pause_before=["write"])
    before = stored(store, "x")
    with pytest.raises(ValueError, match="'nope'"):
        graph.update_state("x", {"topic": "t"}, checkpoint_store=store, as_node="nope")
    with pytest.raises(ResumeError, match="'ghost'"):
        graph.update_state("ghost", {"topic": "t"}, checkpoint_store=store)
    assert stored(store, "x") == before


def test_a_checkpoint_whose_next_node_was_removed_is_refused(store: CheckpointStore) -> None:
    calls = Calls()
    graph = _pipeline(calls)
    graph.run({}, checkpoint_store=store, run_id="c", pause_before=["write"])
    before = stored(store, "c")

    changed = AgentGraph("doc", state_schema=Doc)
    changed.add_node("plan", lambda s: {"topic": "t"})
    changed.add_node("rewrite", lambda s: {"draft": "d"})
    changed.add_edge("plan", "rewrite")
    changed.add_edge("rewrite", END)
    with pytest.raises(ResumeError) as caught:
        changed.run(None, checkpoint_store=store, run_id="c")
    message = str(caught.value)
    assert "'write'" in message
    assert "does not have" in message
    assert stored(store, "c") == before
    # The same for a fork from a checkpoint taken after a node the graph lost.
    graph.run(None, checkpoint_store=store, run_id="c")
    after_edit = graph.get_history("c", checkpoint_store=store)[1]
    assert after_edit.after == "edit"
    with pytest.raises(ResumeError, match="'edit'"):
        changed.run(None, checkpoint_store=store, checkpoint_id=after_edit.checkpoint_id)
    assert triggers(store, "c")[-1] == "end"


def test_an_interrupted_node_removed_from_the_graph_is_refused_on_resume(
    store: CheckpointStore,
) -> None:
    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        yield InterruptRequest("ok?")

    graph = AgentGraph("g")
    graph.add_node("ask", ask, next_node=END)
    result = graph.run({}, checkpoint_store=store, run_id="gone")
    before = stored(store, "gone")
    changed = AgentGraph("g")
    changed.add_node("other", lambda s: {}, next_node=END)
    assert result.interrupt_id is not None
    with pytest.raises(ResumeError, match="'ask'"):
        changed.resume(pending(result), "yes", checkpoint_store=store)
    assert stored(store, "gone") == before


def test_forking_from_a_question_asks_it_again_in_the_fork(store: CheckpointStore) -> None:
    """Time travel to re-answer: the fork asks under its own ids; the original is untouched."""
    calls = Calls()

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask")
        state.data["answer"] = yield InterruptRequest("q")

    graph = AgentGraph("reask")
    graph.add_node("s", lambda s: {"s": 1})
    graph.add_node("ask", ask, next_node=END)
    graph.add_edge("s", "ask")
    result = graph.run({}, checkpoint_store=store, run_id="ra")
    graph.resume(pending(result), "first", checkpoint_store=store)
    original = stored(store, "ra")
    history = graph.get_history("ra", checkpoint_store=store)
    asked = next(s for s in history if s.metadata["trigger"] == "interrupt")
    answered = next(s for s in history if s.metadata["trigger"] == "answer")

    fork = graph.run(None, checkpoint_store=store, checkpoint_id=asked.checkpoint_id, run_id="ra2")
    assert [i.id for i in fork.interrupts] == ["ra2|2:ask|0"]
    final = graph.resume(pending(fork), "second", checkpoint_store=store)
    assert final.state.data == {"s": 1, "answer": "second"}
    # From the checkpoint holding the answer, the fork replays it instead of asking.
    replayed = graph.run(
        None, checkpoint_store=store, checkpoint_id=answered.checkpoint_id, run_id="ra3"
    )
    assert replayed.stop_reason == "end"
    assert replayed.state.data == {"s": 1, "answer": "first"}
    assert stored(store, "ra") == original
    with pytest.raises(ResumeError):  # the original's question stays answered
        graph.resume(pending(result), "third", checkpoint_store=store)


def test_a_run_stopped_at_max_steps_continues_under_a_larger_limit(
    store: CheckpointStore,
) -> None:
    calls = Calls()

    def build(limit: int) -> AgentGraph:
        def tick(state: GraphState) -> dict[str, Any]:
            calls.hit("tick")
            return {"n": state.data.get("n", 0) + 1}

        graph = AgentGraph("limited", max_steps=limit)
        graph.add_node("tick", tick)
        graph.add_conditional_edge("tick", lambda s: "tick" if s.data["n"] < 5 else END)
        return graph

    stopped = build(3).run({}, checkpoint_store=store, run_id="ms")
    assert stopped.stop_reason == "max_steps"
    head = store.head("ms")
    assert head is not None
    assert head.metadata["trigger"] == "max_steps"
    assert head.next == ["tick"]
    final = build(10).run(None, checkpoint_store=store, run_id="ms")
    assert final.stop_reason == "end"
    assert final.state.data["n"] == 5
    assert calls["tick"] == 5
