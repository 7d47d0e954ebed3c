"""Fail-fast fan-outs start nothing after a failure, with a concurrency limit too (issue 27).

``max_concurrency`` queues branches behind a limit; under ``fail_all`` a queued
branch must not take the slot a failed branch frees. Async nodes (asyncio tasks)
and blocking ones (worker threads) alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    AgentGraph,
    BranchError,
    BranchRef,
    InMemoryCheckpointStore,
    InterruptRequest,
    ResumeError,
    Scatter,
    append,
)
from selectgraph.observe import InterruptRaised
from selectgraph.runtime import _book


class Items(BaseModel):
    out: Annotated[list[str], append] = []


def _items_fan_out(
    items: list[str],
    *,
    fails: str | None = None,
    mode: str = "fail_all",
    calls: list[str] | None = None,
) -> AgentGraph:
    """``plan`` fans out one ``work`` per item; item ``b`` asks a question, ``fails`` raises."""

    def work(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
        if calls is not None:
            calls.append(state["item"])
        if state["item"] == fails:
            raise RuntimeError(f"{fails} failed")
        if state["item"] == "b":
            yield InterruptRequest("Keep b?", {"item": "b"})
        return {"out": [state["item"]]}

    graph = AgentGraph("g", state_schema=Items)
    graph.add_node("plan", lambda state: {})
    graph.add_node("work", work)
    graph.add_node("done", lambda state: {}, next_node=END)
    graph.add_edge("work", "done")
    graph.add_conditional_edge(
        "plan",
        lambda state: [Scatter("work", {"item": i}) for i in items],  # read at each routing
        failure_mode=mode,  # type: ignore[arg-type]
    )
    return graph


def _fan_out(node: Any, limit: int, count: int = 5) -> AgentGraph:
    graph = AgentGraph("g", max_concurrency=limit)
    graph.add_node("plan", lambda state: {})
    graph.add_node("work", node)
    graph.add_node("done", lambda state: {}, next_node=END)
    graph.add_edge("work", "done")
    graph.add_conditional_edge(
        "plan", lambda state: [Scatter("work", {"i": i}) for i in range(count)]
    )
    return graph


@pytest.mark.parametrize("blocking", [False, True], ids=["async", "threads"])
def test_with_one_slot_nothing_starts_after_the_failed_branch(blocking: bool) -> None:
    started: list[int] = []

    def sync_work(state: Any) -> dict[str, Any]:
        started.append(state["i"])
        if state["i"] == 1:
            raise RuntimeError("boom")
        return {}

    async def async_work(state: Any) -> dict[str, Any]:
        return sync_work(state)

    graph = _fan_out(sync_work if blocking else async_work, limit=1)

    with pytest.raises(BranchError, match="boom"):
        graph.run({})
    assert started == [0, 1]


def test_with_two_slots_the_running_sibling_is_cancelled_and_no_other_starts() -> None:
    started: list[int] = []
    never = asyncio.Event()

    async def work(state: Any) -> dict[str, Any]:
        started.append(state["i"])
        if state["i"] == 1:
            raise RuntimeError("boom")
        await never.wait()  # branch 0 is still running when branch 1 fails
        return {}

    with pytest.raises(BranchError, match="boom"):
        _fan_out(work, limit=2).run({})
    assert started == [0, 1]


def test_continue_others_still_runs_every_branch() -> None:
    started: list[str] = []

    def member(name: str, fails: bool = False) -> Any:
        async def work(state: Any) -> dict[str, Any]:
            started.append(name)
            if fails:
                raise RuntimeError("boom")
            return {name: True}

        return work

    graph = AgentGraph("g", max_concurrency=1)
    graph.add_node("start", lambda state: {})
    graph.add_node("a", member("a"))
    graph.add_node("b", member("b", fails=True))
    graph.add_node("c", member("c"))
    graph.add_parallel_nodes("all", ["a", "b", "c"], failure_mode="continue_others")
    graph.add_edge("start", "all")
    graph.add_edge("all", END)

    result = graph.run({})

    assert result.quality == "degraded"
    assert started == ["a", "b", "c"]
    assert (result.state.data["a"], result.state.data["c"]) == (True, True)


def test_a_paused_fan_out_resumes_over_the_items_it_paused_with() -> None:
    # The fan-out's plan is stored with the pause: a list that changed since cannot
    # silently change which instances run (OpenArmature's changed-item-count case).
    items = ["a", "b", "c"]
    graph = _items_fan_out(items)
    store = InMemoryCheckpointStore()
    paused = graph.run({}, checkpoint_store=store)
    assert paused.interrupt_id is not None
    items[:] = ["a", "b", "c", "d", "e"]

    done = graph.resume(paused.interrupt_id, "yes", checkpoint_store=store)

    assert done.state.data["out"] == ["a", "b", "c"]


def test_an_interrupt_in_a_fan_out_says_which_instance_asked() -> None:
    graph = _items_fan_out(["a", "b", "c"])
    store = InMemoryCheckpointStore()

    paused = graph.run({}, checkpoint_store=store)

    [question] = paused.interrupts
    assert question.branch == BranchRef(source="plan", index=1)
    assert (question.branch.label, question.payload) == ("plan[1]", {"item": "b"})
    raised = [e for e in paused.trace if isinstance(e, InterruptRaised)]
    assert [(e.branch_label, e.fan_out_index) for e in raised] == [("plan[1]", 1)]
    # Stored with the question: another process reading the checkpoint sees it too.
    stored = graph.get_state(run_id=paused.run_id, checkpoint_store=store)
    assert [i.branch for i in stored.interrupts] == [question.branch]


def test_a_question_outside_a_fan_out_has_no_branch() -> None:
    def ask(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
        yield InterruptRequest("ok?")
        return {}

    graph = AgentGraph("g")
    graph.add_node("ask", ask, next_node=END)
    paused = graph.run({}, checkpoint_store=InMemoryCheckpointStore())

    assert paused.interrupts[0].branch is None


def test_a_fan_out_rebuilt_after_a_restart_over_other_items_is_refused_naming_the_counts() -> None:
    items = ["a", "b", "c"]
    graph = _items_fan_out(items)
    store = InMemoryCheckpointStore()
    paused = graph.run({}, checkpoint_store=store)
    assert paused.interrupt_id is not None
    _book._paused.clear()  # as after a restart: the fan-out is routed again
    items[:] = ["a", "b", "c", "d", "e"]

    with pytest.raises(ResumeError, match="over 3 branches, but resumed it routes to 5"):
        graph.resume(paused.interrupt_id, "yes", checkpoint_store=store)
    with pytest.raises(ResumeError, match="over 3 branches"):  # the answer was kept
        graph.run(None, run_id=paused.run_id, checkpoint_store=store)
    items[:] = ["a", "b", "c"]
    done = graph.run(None, run_id=paused.run_id, checkpoint_store=store)
    assert done.state.data["out"] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("failure", "category"),
    [("raise", "node_exception"), ("timeout", "node_timeout")],
)
def test_a_fail_fast_branch_error_has_the_category_of_its_cause(
    failure: str, category: str
) -> None:
    never = asyncio.Event()

    async def work(state: Any) -> dict[str, Any]:
        if state["i"] == 1:
            if failure == "raise":
                raise RuntimeError("boom")
            await never.wait()  # past the node's timeout
        return {}

    graph = AgentGraph("g")
    graph.add_node("plan", lambda state: {})
    graph.add_node("work", work, timeout=0.05)
    graph.add_node("done", lambda state: {}, next_node=END)
    graph.add_edge("work", "done")
    graph.add_conditional_edge("plan", lambda state: [Scatter("work", {"i": i}) for i in range(3)])

    with pytest.raises(BranchError) as caught:
        graph.run({})

    assert caught.value.category == category
    assert caught.value.branch == "plan[1]"


@pytest.mark.parametrize("restart", [False, True], ids=["in-process", "after-a-restart"])
@pytest.mark.parametrize("mode", ["continue_others", "wait_all"])
def test_a_question_in_a_fan_out_that_survives_failures_is_asked_and_the_failure_kept(
    mode: str, restart: bool
) -> None:
    calls: list[str] = []
    graph = _items_fan_out(["a", "b", "c"], fails="a", mode=mode, calls=calls)
    store = InMemoryCheckpointStore()

    paused = graph.run({}, checkpoint_store=store)

    assert paused.interrupted  # a sibling's failure does not make the question moot
    assert paused.interrupt_id is not None
    if restart:
        _book._paused.clear()
    done = graph.resume(paused.interrupt_id, "yes", checkpoint_store=store)
    assert done.state.data["out"] == ["b", "c"]
    assert [(e["branch"], e["error"]) for e in done.state.errors] == [("plan[0]", "a failed")]
    assert done.quality == "degraded"
    assert calls.count("a") == 1  # the failed branch is not run again


def _asking_group(mode: str, calls: list[str]) -> AgentGraph:
    """A parallel group: ``bad`` fails, ``ask`` asks and then fails when told "no"."""

    def bad(state: Any) -> dict[str, Any]:
        calls.append("bad")
        raise RuntimeError("bad failed")

    def ask(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
        calls.append("ask")
        answer = yield InterruptRequest("Go on?")
        if answer == "no":
            raise RuntimeError("ask refused")
        return {"out": ["ask"]}

    graph = AgentGraph("g", state_schema=Items)
    graph.add_node("bad", bad)
    graph.add_node("ask", ask)
    graph.add_parallel_nodes("team", ["bad", "ask"], failure_mode=mode)  # type: ignore[arg-type]
    graph.add_node("after", lambda state: {"out": ["after"]})
    graph.add_edge("team", "after")
    graph.add_edge("after", END)
    if mode == "wait_all":
        graph.add_node("recover", lambda state: {"out": ["recover"]})
        graph.add_edge("team", "recover", on="failure")
        graph.add_edge("recover", END)
    graph.set_entry("team")
    return graph


@pytest.mark.parametrize("restart", [False, True], ids=["in-process", "after-a-restart"])
def test_a_branch_that_failed_before_the_pause_still_counts_as_failed_at_the_join(
    restart: bool,
) -> None:
    calls: list[str] = []
    graph = _asking_group("continue_others", calls)
    store = InMemoryCheckpointStore()
    paused = graph.run({}, checkpoint_store=store)
    assert paused.interrupt_id is not None
    if restart:
        _book._paused.clear()

    # Every branch has now failed: continue_others fails the fan-out, as without a pause.
    with pytest.raises(BranchError) as caught:
        graph.resume(paused.interrupt_id, "no", checkpoint_store=store)

    assert caught.value.branch in {"bad", "ask"}
    assert calls.count("bad") == 1


@pytest.mark.parametrize("restart", [False, True], ids=["in-process", "after-a-restart"])
def test_a_wait_all_group_resumed_after_a_kept_failure_takes_its_on_failure_edge(
    restart: bool,
) -> None:
    calls: list[str] = []
    graph = _asking_group("wait_all", calls)
    store = InMemoryCheckpointStore()
    paused = graph.run({}, checkpoint_store=store)
    assert paused.interrupt_id is not None
    if restart:
        _book._paused.clear()

    done = graph.resume(paused.interrupt_id, "yes", checkpoint_store=store)

    assert done.state.data["out"] == ["ask", "recover"]
    assert [e["branch"] for e in done.state.errors] == ["bad"]
    assert calls.count("bad") == 1
