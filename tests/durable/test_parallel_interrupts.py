"""Interrupts in parallel branches (list fan-out, parallel groups, Scatter) and in loops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    GraphState,
    InterruptRequest,
    NodeContext,
    ResumeError,
    Scatter,
    append,
)
from tests.durable._support import Calls, pending, stored


class Team(BaseModel):
    topic: str = ""
    topics: list[str] = []
    answers: Annotated[list[str], append] = []
    joined: list[str] = []
    rounds: int = 0


def _ask(calls: Calls) -> Any:
    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        topic = state.data.get("topic") or "ask"
        calls.hit(f"ask:{topic}")
        answer = yield InterruptRequest(f"{topic}?", {"topic": topic})
        calls.hit(f"answered:{topic}")
        return {"answers": [f"{topic}={answer}"]}

    return ask


def _second_ask(calls: Calls) -> Any:
    def ask_too(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask_too")
        answer = yield InterruptRequest("too?")
        return {"answers": [f"too={answer}"]}

    return ask_too


def _plain(calls: Calls, name: str) -> Any:
    def plain(state: GraphState) -> dict[str, Any]:
        calls.hit(name)
        return {"answers": [name]}

    return plain


def _join(calls: Calls) -> Any:
    def join(state: GraphState) -> dict[str, Any]:
        calls.hit("join")
        return {"joined": sorted(state.data["answers"])}

    return join


def _list_fan_out(calls: Calls, *, both_ask: bool = False) -> AgentGraph:
    """start -> [ask, other] -> join; ``other`` asks too, or is a plain node."""
    graph = AgentGraph("fan", state_schema=Team)
    graph.add_node("start", lambda s: {"topic": ""})
    graph.add_node("ask", _ask(calls))
    graph.add_node("other", _second_ask(calls) if both_ask else _plain(calls, "other"))
    graph.add_node("join", _join(calls))
    graph.add_edge("start", ["ask", "other"])
    graph.add_edge("ask", "join")
    graph.add_edge("other", "join")
    graph.add_edge("join", END)
    return graph


def _group(calls: Calls) -> AgentGraph:
    graph = AgentGraph("group", state_schema=Team)
    graph.add_node("start", lambda s: {"topic": ""})
    graph.add_node("ask", _ask(calls))
    graph.add_node("p1", _plain(calls, "p1"))
    graph.add_node("p2", _plain(calls, "p2"))
    graph.add_parallel_nodes("team", ["p1", "ask", "p2"])
    graph.add_node("join", _join(calls))
    graph.add_edge("start", "team")
    graph.add_edge("team", "join")
    graph.add_edge("join", END)
    return graph


def _scatter(calls: Calls) -> AgentGraph:
    graph = AgentGraph("scatter", state_schema=Team)
    graph.add_node("plan", lambda s: {"topics": ["x", "y", "z"]})
    graph.add_node("ask", _ask(calls))
    graph.add_node("join", _join(calls))
    graph.add_conditional_edge(
        "plan", lambda s: [Scatter("ask", {"topic": t}) for t in s.data["topics"]]
    )
    graph.add_edge("ask", "join")
    graph.add_edge("join", END)
    return graph


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_a_list_fan_out_keeps_the_finished_sibling(store: CheckpointStore, live: bool) -> None:
    calls = Calls()
    graph = _list_fan_out(calls)
    result = graph.run({}, checkpoint_store=store, run_id="f")
    assert result.interrupted
    (interrupt,) = result.interrupts
    assert interrupt.node == "ask"
    assert calls.counts == {"ask:ask": 1, "other": 1}
    head = store.head("f")
    assert head is not None
    assert head.metadata["trigger"] == "interrupt"
    if not live:
        graph = _list_fan_out(calls)
    final = graph.resume(interrupt.id, "yes", checkpoint_store=store)
    assert final.stop_reason == "end"
    assert final.state.data["joined"] == ["ask=yes", "other"]
    assert final.state.data["answers"] == ["ask=yes", "other"]  # declaration order
    assert calls["other"] == 1  # the finished sibling was not run again
    assert calls["join"] == 1
    assert calls["ask:ask"] == (1 if live else 2)
    assert calls["answered:ask"] == 1


def test_two_asking_branches_get_distinct_ids_and_one_mapping_answers_both(
    store: CheckpointStore,
) -> None:
    calls = Calls()
    graph = _list_fan_out(calls, both_ask=True)
    result = graph.run({}, checkpoint_store=store, run_id="two")
    ids = [i.id for i in result.interrupts]
    assert len(ids) == 2
    assert len(set(ids)) == 2
    assert {i.node for i in result.interrupts} == {"ask", "other"}
    assert all(i.startswith("two|") for i in ids)
    final = graph.resume(dict(zip(ids, ["A", "B"], strict=True)), checkpoint_store=store)
    assert final.stop_reason == "end"
    by_node = {i.node: a for i, a in zip(result.interrupts, ["A", "B"], strict=True)}
    assert sorted(final.state.data["answers"]) == sorted(
        [f"ask={by_node['ask']}", f"too={by_node['other']}"]
    )
    assert calls["join"] == 1
    assert calls["ask:ask"] == 1
    assert calls["ask_too"] == 1


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_answering_one_of_two_branch_questions_pauses_again_on_the_other(
    store: CheckpointStore, live: bool
) -> None:
    calls = Calls()
    graph = _list_fan_out(calls, both_ask=True)
    result = graph.run({}, checkpoint_store=store, run_id="one")
    by_node = {i.node: i.id for i in result.interrupts}
    if not live:
        graph = _list_fan_out(calls, both_ask=True)
    middle = graph.resume(by_node["ask"], "A", checkpoint_store=store)
    assert middle.interrupted
    assert [i.id for i in middle.interrupts] == [by_node["other"]]
    assert calls["answered:ask"] == 1
    assert calls["join"] == 0
    final = graph.resume(by_node["other"], "B", checkpoint_store=store)
    assert final.state.data["joined"] == ["ask=A", "too=B"]
    assert calls["answered:ask"] == 1  # the answered branch finished once
    assert calls["join"] == 1


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_a_parallel_group_member_asks_and_the_others_do_not_rerun(
    store: CheckpointStore, live: bool
) -> None:
    calls = Calls()
    graph = _group(calls)
    result = graph.run({}, checkpoint_store=store, run_id="g")
    (interrupt,) = result.interrupts
    assert interrupt.node == "ask"
    assert calls["p1"] == 1
    assert calls["p2"] == 1
    if not live:
        graph = _group(calls)
    final = graph.resume(interrupt.id, "ok", checkpoint_store=store)
    assert final.stop_reason == "end"
    assert final.state.data["answers"] == ["p1", "ask=ok", "p2"]  # member order
    assert calls["p1"] == 1
    assert calls["p2"] == 1
    assert calls["join"] == 1


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_scatter_of_one_node_gives_each_branch_its_own_id(
    store: CheckpointStore, live: bool
) -> None:
    calls = Calls()
    graph = _scatter(calls)
    result = graph.run({}, checkpoint_store=store, run_id="s")
    assert len(result.interrupts) == 3
    ids = [i.id for i in result.interrupts]
    assert len(set(ids)) == 3  # the same node, three branches, three ids
    assert {i.payload["topic"] for i in result.interrupts} == {"x", "y", "z"}
    topic_of = {i.id: i.payload["topic"] for i in result.interrupts}
    if not live:
        graph = _scatter(calls)
    # Answer y alone first: x and z stay pending under their own ids.
    y_id = next(i for i, t in topic_of.items() if t == "y")
    middle = graph.resume(y_id, "Y", checkpoint_store=store)
    assert middle.interrupted
    assert sorted(i.id for i in middle.interrupts) == sorted(i for i in ids if i != y_id)
    rest = {i: topic_of[i].upper() for i in ids if i != y_id}
    final = graph.resume(rest, checkpoint_store=store)
    assert final.stop_reason == "end"
    assert final.state.data["answers"] == ["x=X", "y=Y", "z=Z"]  # branch order
    assert calls["answered:y"] == 1
    assert calls["join"] == 1
    with pytest.raises(ResumeError):
        graph.resume(y_id, "again", checkpoint_store=store)


def _loop(calls: Calls) -> AgentGraph:
    """ask -> count -> ask again until two rounds are done."""

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask")
        answer = yield InterruptRequest(f"round {state.data['rounds']}?")
        return {"answers": [str(answer)]}

    graph = AgentGraph("loop", state_schema=Team)
    graph.add_node("ask", ask)
    graph.add_node("count", lambda s: {"rounds": s.data["rounds"] + 1})
    graph.add_edge("ask", "count")
    graph.add_conditional_edge("count", lambda s: "ask" if s.data["rounds"] < 2 else END)
    return graph


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_a_node_asking_on_two_visits_gets_two_ids(store: CheckpointStore, live: bool) -> None:
    calls = Calls()
    graph = _loop(calls)
    first = graph.run({}, checkpoint_store=store, run_id="loop")
    assert first.interrupt_id == "loop|1:ask|0"
    if not live:
        graph = _loop(calls)
    second = graph.resume(pending(first), "one", checkpoint_store=store)
    assert second.interrupted
    assert second.interrupt_id == "loop|3:ask|0"
    assert second.interrupts[0].prompt == "round 1?"
    before = stored(store, "loop")
    with pytest.raises(ResumeError):  # the first visit's question never fires again
        graph.resume(pending(first), "again", checkpoint_store=store)
    assert stored(store, "loop") == before
    if not live:
        graph = _loop(calls)
    final = graph.resume(pending(second), "two", checkpoint_store=store)
    assert final.stop_reason == "end"
    assert final.state.data["answers"] == ["one", "two"]
    assert final.state.data["rounds"] == 2
    assert calls["ask"] == (2 if live else 4)
    assert [r.visit for r in final.node_results["ask"]] == [1, 2]


def _subgraph_in_a_branch(calls: Calls) -> AgentGraph:
    """start -> [sub (prep -> two-question generator), plain] -> join."""

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask")
        first = yield InterruptRequest("first?")
        second = yield InterruptRequest("second?")
        return {"answers": [f"sub={first},{second}"]}

    child = AgentGraph("child", state_schema=Team)
    child.add_node("prep", _plain(calls, "prep"))
    child.add_node("ask", ask)
    child.add_edge("prep", "ask")
    child.add_edge("ask", END)

    graph = AgentGraph("outer", state_schema=Team)
    graph.add_node("start", lambda s: {"topic": ""})
    graph.add_node("sub", child)
    graph.add_node("plain", _plain(calls, "plain"))
    graph.add_node("join", _join(calls))
    graph.add_edge("start", ["sub", "plain"])
    graph.add_edge("sub", "join")
    graph.add_edge("plain", "join")
    graph.add_edge("join", END)
    return graph


@pytest.mark.parametrize("durability", ["sync", "exit"])
@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_a_subgraph_in_a_branch_asks_twice(
    store: CheckpointStore, live: bool, durability: Any
) -> None:
    calls = Calls()
    graph = _subgraph_in_a_branch(calls)
    first = graph.run({}, checkpoint_store=store, run_id="sb", durability=durability)
    (question,) = first.interrupts
    assert question.id.startswith("sb|sub/")  # namespaced by the subgraph node
    assert question.id.endswith(":ask|0")
    if not live:
        graph = _subgraph_in_a_branch(calls)
    second = graph.resume(question.id, "A", checkpoint_store=store, durability=durability)
    assert second.interrupt_id == question.id.rsplit("|", 1)[0] + "|1"
    if not live:
        graph = _subgraph_in_a_branch(calls)
    final = graph.resume(pending(second), "B", checkpoint_store=store, durability=durability)
    assert final.stop_reason == "end"
    assert final.state.data["answers"] == ["prep", "sub=A,B", "plain"]
    assert calls["prep"] == 1
    assert calls["plain"] == 1
    assert calls["join"] == 1
    assert calls["ask"] == (1 if live else 3)


def _async_fan_out(calls: Calls) -> AgentGraph:
    async def ask(state: GraphState) -> AsyncIterator[Any]:
        calls.hit("ask")
        await asyncio.sleep(0)
        answer = yield InterruptRequest("async?")
        await asyncio.sleep(0)  # awaits in the loop of the resume, not of the first run
        state.data["answers"] = [f"ask={answer}"]

    async def other(state: GraphState) -> dict[str, Any]:
        calls.hit("other")
        await asyncio.sleep(0.01)
        return {"answers": ["other"]}

    graph = AgentGraph("afan", state_schema=Team)
    graph.add_node("start", lambda s: {"topic": ""})
    graph.add_node("ask", ask)
    graph.add_node("other", other)
    graph.add_node("join", _join(calls))
    graph.add_edge("start", ["ask", "other"])
    graph.add_edge("ask", "join")
    graph.add_edge("other", "join")
    graph.add_edge("join", END)
    return graph


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
async def test_async_generator_branches_with_arun_and_aresume(
    store: CheckpointStore, live: bool
) -> None:
    calls = Calls()
    graph = _async_fan_out(calls)
    result = await graph.arun({}, checkpoint_store=store, run_id="af")
    assert result.interrupted
    if not live:
        graph = _async_fan_out(calls)
    final = await graph.aresume(pending(result), "Y", checkpoint_store=store)
    assert final.state.data["answers"] == ["ask=Y", "other"]
    assert calls["other"] == 1
    assert calls["ask"] == (1 if live else 2)


def test_async_generator_branches_with_blocking_run_and_resume(store: CheckpointStore) -> None:
    """run() and resume() each drive their own event loop; the live generator moves over."""
    calls = Calls()
    graph = _async_fan_out(calls)
    result = graph.run({}, checkpoint_store=store, run_id="bf")
    final = graph.resume(pending(result), "Z", checkpoint_store=store)
    assert final.state.data["answers"] == ["ask=Z", "other"]
    assert calls.counts == {"ask": 1, "other": 1, "join": 1}


def test_a_join_node_named_by_an_equal_but_distinct_string_runs_once() -> None:
    calls = Calls()
    join_name = "".join(["jo", "in"])  # == "join", another object
    graph = AgentGraph("names")
    for name in ("start", "a", "b", join_name):
        graph.add_node(name, _plain(calls, name))
    graph.add_edge("start", ["a", "b"])
    graph.add_edge("a", "join")
    graph.add_edge("b", "join")
    graph.add_edge("join", END)
    graph.run({})
    assert calls["join"] == 1


def _memo_scatter(calls: Calls) -> AgentGraph:
    async def draft(topic: str) -> str:
        calls.hit(f"draft:{topic}")
        await asyncio.sleep(0)
        return f"draft {topic}"

    async def ask(state: GraphState, context: NodeContext) -> AsyncIterator[Any]:
        calls.hit("pre")
        text = await context.once("draft", draft, state.data["topic"])
        answer = yield InterruptRequest("ok?", {"draft": text})
        state.data["answers"] = [f"{text}={answer}"]

    graph = AgentGraph("memo", state_schema=Team)
    graph.add_node("plan", lambda s: {})
    graph.add_node("ask", ask)
    graph.add_node("join", _join(calls))
    graph.add_conditional_edge("plan", lambda s: [Scatter("ask", {"topic": t}) for t in "xy"])
    graph.add_edge("ask", "join")
    graph.add_edge("join", END)
    return graph


async def test_async_once_steps_are_kept_per_branch_across_a_replay(
    store: CheckpointStore,
) -> None:
    calls = Calls()
    paused = await _memo_scatter(calls).arun({}, checkpoint_store=store, run_id="mo")
    assert sorted(i.payload["draft"] for i in paused.interrupts) == ["draft x", "draft y"]
    final = await _memo_scatter(calls).aresume(
        {i.id: "ok" for i in paused.interrupts}, checkpoint_store=store
    )
    assert final.state.data["answers"] == ["draft x=ok", "draft y=ok"]
    assert calls["pre"] == 4  # each branch's generator started over...
    assert calls["draft:x"] == calls["draft:y"] == 1  # ...but its once() step did not run again


def _nested_parent(calls: Calls) -> AgentGraph:
    from tests.durable.test_subgraph_interrupts import _parent

    return _parent(calls, "add_subgraph")


SHAPES = {
    "list-edge": _list_fan_out,
    "scatter": _scatter,
    "group": _group,
    "loop": _loop,
    "subgraph-in-branch": _subgraph_in_a_branch,
    "subgraph": _nested_parent,
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_live_and_replayed_resumes_leave_the_same_run(store: CheckpointStore, shape: str) -> None:
    """Answering every question "ok" until the end: the same state, history and step count."""
    build = SHAPES[shape]
    finals: list[Any] = []
    for live in (True, False):
        run_id = f"{shape}-{live}"
        calls = Calls()
        graph = build(calls)
        result = graph.run({}, checkpoint_store=store, run_id=run_id)
        assert result.interrupted
        while result.interrupted:
            if not live:
                graph = build(calls)
            result = graph.resume({i.id: "ok" for i in result.interrupts}, checkpoint_store=store)
        assert result.stop_reason == "end"
        saved = graph.get_state(run_id, checkpoint_store=store)
        assert saved.values == dict(result.state.data)
        assert [n for n, _ in saved.state.history] == [n for n, _ in result.state.history]
        finals.append(result)
    live_result, replayed = finals
    assert dict(live_result.state.data) == dict(replayed.state.data)
    assert [n for n, _ in live_result.state.history] == [n for n, _ in replayed.state.history]
    assert live_result.steps == replayed.steps
    assert {k: len(v) for k, v in live_result.node_results.items()} == {
        k: len(v) for k, v in replayed.node_results.items()
    }
