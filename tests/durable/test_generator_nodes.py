"""Generator nodes: sync and async, several yields, return values, state writes, goto()."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    ErrorPolicy,
    GraphRunError,
    GraphState,
    InterruptRequest,
    NodeContext,
    NodeContractError,
    goto,
)
from tests.durable._support import Calls, pending, triggers


def _three_question_graph(calls: Calls, *, is_async: bool) -> AgentGraph:
    """draft -> ask (three yields, writes before and after each) -> publish."""

    def before(state: GraphState) -> None:
        calls.hit("pre")
        state.data["seen_draft"] = state.data["draft"]

    def after(state: GraphState, answers: list[Any]) -> None:
        calls.hit("post")
        state.data["answers"] = answers

    if is_async:

        async def ask(state: GraphState) -> AsyncIterator[Any]:
            before(state)
            first = yield InterruptRequest("title?", {"n": 1})
            calls.hit("between")
            second = yield InterruptRequest("tone?", {"n": 2})
            third = yield InterruptRequest("length?", {"n": 3})
            after(state, [first, second, third])

        node: Any = ask
    else:

        def ask_sync(state: GraphState) -> Generator[Any, Any, Any]:
            before(state)
            first = yield InterruptRequest("title?", {"n": 1})
            calls.hit("between")
            second = yield InterruptRequest("tone?", {"n": 2})
            third = yield InterruptRequest("length?", {"n": 3})
            after(state, [first, second, third])

        node = ask_sync

    def publish(state: GraphState) -> dict[str, Any]:
        calls.hit("publish")
        return {"published": " / ".join(state.data["answers"])}

    graph = AgentGraph("questions")
    graph.add_node("draft", lambda s: {"draft": "v1"})
    graph.add_node("ask", node)
    graph.add_node("publish", publish)
    graph.add_edge("draft", "ask")
    graph.add_edge("ask", "publish")
    graph.add_edge("publish", END)
    return graph


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_each_yield_is_answered_in_turn_and_code_before_it_runs_once(
    store: CheckpointStore, is_async: bool
) -> None:
    calls = Calls()
    graph = _three_question_graph(calls, is_async=is_async)

    first = graph.run({}, checkpoint_store=store, run_id="q")
    assert first.interrupted
    assert [i.prompt for i in first.interrupts] == ["title?"]
    assert first.interrupts[0].index == 0
    assert first.interrupts[0].payload == {"n": 1}
    assert first.interrupt_id == "q|2:ask|0"

    second = graph.resume(pending(first), "T", checkpoint_store=store)
    assert second.interrupted
    assert second.stop_reason == "interrupted"
    assert [(i.prompt, i.index) for i in second.interrupts] == [("tone?", 1)]
    assert second.interrupt_id == "q|2:ask|1"
    assert calls["publish"] == 0

    third = graph.resume(pending(second), "dry", checkpoint_store=store)
    assert third.interrupted
    assert third.interrupt_id == "q|2:ask|2"

    final = graph.resume(pending(third), "short", checkpoint_store=store)
    assert final.stop_reason == "end"
    assert final.state.data["answers"] == ["T", "dry", "short"]
    assert final.state.data["seen_draft"] == "v1"  # written before the first yield: kept
    assert final.state.data["published"] == "T / dry / short"
    # In process every resume continued the live generator at its yield.
    assert calls.counts == {"pre": 1, "between": 1, "post": 1, "publish": 1}
    assert final.steps == 3  # draft, ask, publish: the paused visits are not counted twice
    assert [r.visit for r in final.node_results["ask"]] == [1]
    assert triggers(store, "q").count("interrupt") == 3
    assert triggers(store, "q").count("answer") == 3


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_without_a_store_an_interrupt_resumes_in_memory(is_async: bool) -> None:
    calls = Calls()
    graph = _three_question_graph(calls, is_async=is_async)
    result = graph.run({})
    assert result.interrupted
    assert result.checkpoint_id is None
    for answer in ("a", "b"):
        result = graph.resume(pending(result), answer)
        assert result.interrupted
    final = graph.resume(pending(result), "c")
    assert final.state.data["published"] == "a / b / c"
    assert calls["pre"] == 1


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_aresume_continues_an_arun(store: CheckpointStore, is_async: bool) -> None:
    calls = Calls()
    graph = _three_question_graph(calls, is_async=is_async)
    result = await graph.arun({}, checkpoint_store=store)
    while result.interrupted:
        result = await graph.aresume(pending(result), "x", checkpoint_store=store)
    assert result.state.data["published"] == "x / x / x"
    assert calls["pre"] == 1


def test_a_sync_generator_may_return_an_update(store: CheckpointStore) -> None:
    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        state.data["before"] = 1
        answer = yield InterruptRequest("name?")
        state.data["after"] = 2
        return {"name": answer, "shout": answer.upper()}

    graph = AgentGraph("returns")
    graph.add_node("ask", ask, next_node=END)
    result = graph.run({}, checkpoint_store=store)
    final = graph.resume(pending(result), "ada", checkpoint_store=store)
    assert final.state.data == {"before": 1, "after": 2, "name": "ada", "shout": "ADA"}
    # The saved end state holds the returned update too.
    assert graph.get_state(final.run_id, checkpoint_store=store).values == final.state.data


def test_state_written_before_the_yield_is_not_committed_while_paused(
    store: CheckpointStore,
) -> None:
    """A paused node did not complete: its writes are not in the checkpoint's state yet."""

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        state.data["draft_note"] = "pending"
        yield InterruptRequest("ok?")
        state.data["done"] = True

    graph = AgentGraph("uncommitted")
    graph.add_node("start", lambda s: {"n": 1})
    graph.add_node("ask", ask)
    graph.add_edge("start", "ask")
    graph.add_edge("ask", END)
    result = graph.run({}, checkpoint_store=store, run_id="u")
    snapshot = graph.get_state("u", checkpoint_store=store)
    assert snapshot.values == {"n": 1}
    assert snapshot.next == ("ask",)
    assert snapshot.step == 1
    assert [i.id for i in snapshot.interrupts] == [result.interrupt_id]
    final = graph.resume(pending(result), None, checkpoint_store=store)  # None is an answer
    assert final.state.data == {"n": 1, "draft_note": "pending", "done": True}


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_generator_returning_goto_routes_there(store: CheckpointStore, is_async: bool) -> None:
    calls = Calls()
    if is_async:

        async def gate(state: GraphState, context: NodeContext) -> AsyncIterator[Any]:
            answer = yield InterruptRequest("approve?")
            state.data["answer"] = answer
            calls.hit("gate")

        node: Any = gate

    def gate_sync(state: GraphState) -> Generator[Any, Any, Any]:
        answer = yield InterruptRequest("approve?")
        calls.hit("gate")
        return goto("reject" if answer == "no" else "accept", {"answer": answer})

    graph = AgentGraph("goto")
    if is_async:
        # An async generator cannot return a value: it routes with a conditional edge.
        graph.add_node("gate", node)
        graph.add_conditional_edge(
            "gate", lambda s: "reject" if s.data["answer"] == "no" else "accept"
        )
    else:
        graph.add_node("gate", gate_sync, destinations=["accept", "reject"])
        graph.add_edge("gate", "accept")  # the static edge goto() overrides
    graph.add_node("accept", lambda s: {"outcome": "accepted"}, next_node=END)
    graph.add_node("reject", lambda s: {"outcome": "rejected"}, next_node=END)
    graph.set_entry("gate")

    result = graph.run({}, checkpoint_store=store)
    final = graph.resume(pending(result), "no", checkpoint_store=store)
    assert final.state.data == {"answer": "no", "outcome": "rejected"}
    assert list(final.node_results) == ["gate", "reject"]
    assert calls["gate"] == 1


def test_yielding_something_else_is_a_contract_error(store: CheckpointStore) -> None:
    def bad(state: GraphState) -> Generator[Any, Any, Any]:
        yield "approve?"

    graph = AgentGraph("bad")
    graph.add_node("bad", bad, next_node=END)
    with pytest.raises(GraphRunError) as caught:
        graph.run({}, checkpoint_store=store)
    error = caught.value
    assert isinstance(error, NodeContractError) or isinstance(error.__cause__, NodeContractError)
    assert "InterruptRequest" in str(error)
    assert "'bad'" in str(error)


def test_a_generator_node_is_not_retried(store: CheckpointStore) -> None:
    """A retry would ask the human again: generator nodes never get executor retries."""
    calls = Calls()

    def flaky(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("flaky")
        answer = yield InterruptRequest("go?")
        raise RuntimeError(f"broken after {answer}")

    graph = AgentGraph("noretry")
    graph.add_node("flaky", flaky, next_node=END, error_policy=ErrorPolicy.RETRY)
    result = graph.run({}, checkpoint_store=store)
    with pytest.raises(GraphRunError, match="broken after go"):
        graph.resume(pending(result), "go", checkpoint_store=store)
    assert calls["flaky"] == 1
