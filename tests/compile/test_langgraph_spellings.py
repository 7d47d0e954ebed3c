"""LangGraph's spellings work: START, add_conditional_edges, compile(checkpointer=), invoke,
stream, config (thread_id, checkpoint_id, recursion_limit), Command (goto/update, resume)."""

from __future__ import annotations

import operator
from collections.abc import Generator
from typing import Annotated, Any, TypedDict

import pytest

from selectgraph import (
    END,
    START,
    AgentGraph,
    Command,
    GraphBuildError,
    InMemoryCheckpointStore,
    InterruptRequest,
    ResumeError,
)


class State(TypedDict):
    n: int
    log: Annotated[list[str], operator.add]


def count(state: State) -> dict[str, Any]:
    return {"n": state.get("n", 0) + 1, "log": [f"count {state.get('n', 0) + 1}"]}


def looping() -> AgentGraph:
    graph = AgentGraph("loop", state_schema=State)
    graph.add_node("count", count)
    graph.add_edge(START, "count")
    graph.add_conditional_edges("count", lambda s: "count" if s["n"] < 3 else END, ["count", END])
    return graph


def asking() -> AgentGraph:
    def ask(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
        answer = yield InterruptRequest("Continue?", payload={"n": state.get("n", 0)})
        return {"answer": answer}

    graph = AgentGraph("ask")
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    graph.set_finish_point("ask")
    return graph


def test_start_and_add_conditional_edges_build_the_same_graph() -> None:
    result = looping().run({"n": 0})
    assert result.node_order == ["count", "count", "count"]
    assert result.state["log"] == ["count 1", "count 2", "count 3"]
    with pytest.raises(TypeError, match=r"add_edge\(START, \.\.\.\) names the one node"):
        AgentGraph().add_edge(START, ["a", "b"])
    with pytest.raises(TypeError, match="with a condition"):
        AgentGraph().add_edge(START, "a", condition="x > 1")


def test_invoke_returns_the_final_state_data() -> None:
    assert looping().invoke({"n": 0}) == {"n": 3, "log": ["count 1", "count 2", "count 3"]}


async def test_ainvoke() -> None:
    values = await looping().ainvoke({"n": 1})
    assert values["n"] == 3


def test_stream_yields_updates_by_default_and_other_modes_on_request() -> None:
    updates = list(looping().stream({"n": 1}))
    assert updates == [
        {"count": {"n": 2, "log": ["count 2"]}},
        {"count": {"n": 3, "log": ["count 3"]}},
    ]
    values = list(looping().stream({"n": 2}, stream_mode="values"))
    assert values[-1]["n"] == 3


def test_leaving_a_stream_early_stops_the_run() -> None:
    stream = looping().stream({"n": 0})
    first = next(iter(stream))
    assert first == {"count": {"n": 1, "log": ["count 1"]}}
    stream.close()  # must not hang


def test_a_thread_id_names_the_thread_and_the_checkpointer_keeps_it() -> None:
    graph = looping().compile(checkpointer=InMemoryCheckpointStore())
    config = {"configurable": {"thread_id": "t-1"}}
    assert graph.invoke({"n": 0}, config)["n"] == 3
    assert graph.get_state(config).values["n"] == 3
    history = graph.get_history(config)
    assert history[0].metadata["trigger"] == "end"
    assert history[0].metadata["thread_id"] == "t-1"
    earlier = next(s for s in history if s.values.get("n") == 1)
    forked = graph.invoke(
        None, {"configurable": {"thread_id": "t-2", "checkpoint_id": earlier.checkpoint_id}}
    )
    assert forked["n"] == 3
    state = graph.get_state({"configurable": {"thread_id": "t-2"}})
    assert state.values["log"] == ["count 1", "count 2", "count 3"]


def test_invoking_a_thread_twice_continues_the_conversation() -> None:
    # LangGraph's chat-memory pattern: the second call starts from the first one's state.
    graph = looping().compile(checkpointer=InMemoryCheckpointStore())
    config = {"configurable": {"thread_id": "chat"}}
    first = graph.invoke({"n": 0}, config)
    second = graph.invoke({"n": 1}, config)
    assert first["log"] == ["count 1", "count 2", "count 3"]
    assert second["log"] == [*first["log"], "count 2", "count 3"]
    runs = graph.get_history(config)
    assert len({snapshot.run_id for snapshot in runs}) == 2


def test_other_configurable_keys_reach_the_nodes() -> None:
    seen: list[Any] = []

    def node(state: Any, context: Any) -> dict[str, Any]:
        seen.append(dict(context.config))
        return {}

    graph = AgentGraph("cfg")
    graph.add_node("n", node, next_node=END)
    graph.invoke({}, {"configurable": {"user": "ann", "model": "small"}})
    assert seen == [{"user": "ann", "model": "small"}]


def test_recursion_limit_is_the_step_limit_of_that_run() -> None:
    graph = looping().compile()
    result = graph.invoke({"n": -10}, {"recursion_limit": 4})
    assert result["n"] == -6  # four steps, then the run stopped
    assert graph.run({"n": -10}).state["n"] == 3  # the graph itself is unchanged


def test_command_routes_and_updates_from_a_node() -> None:
    def decide(state: Any) -> Command:
        return Command(goto="b" if state["go"] == "b" else END, update={"seen": True})

    graph = AgentGraph("cmd")
    graph.add_node("decide", decide, destinations=["b", END])
    graph.add_node("b", lambda s: {"b": True}, next_node=END)
    graph.add_edge(START, "decide")
    assert graph.invoke({"go": "b"}) == {"go": "b", "seen": True, "b": True}
    assert graph.invoke({"go": "x"}) == {"go": "x", "seen": True}
    with pytest.raises(TypeError, match=r"Command\(goto=\.\.\.\) takes one node name or END"):
        Command(goto=["a", "b"])  # type: ignore[arg-type]


def test_command_resume_answers_the_pending_question() -> None:
    graph = asking().compile(checkpointer=InMemoryCheckpointStore())
    config = {"configurable": {"thread_id": "q"}}
    waiting = graph.invoke({"n": 5}, config)
    [interrupt] = waiting["__interrupt__"]
    assert (interrupt.prompt, interrupt.payload) == ("Continue?", {"n": 5})
    assert graph.invoke(Command(resume="yes"), config) == {"n": 5, "answer": "yes"}
    with pytest.raises(ResumeError, match="thread 'q' is not waiting for an answer"):
        graph.invoke(Command(resume="again"), config)


def test_command_resume_needs_a_checkpointer_and_a_thread() -> None:
    with pytest.raises(ResumeError, match="give the graph a checkpointer"):
        asking().invoke(Command(resume="yes"))
    graph = asking().compile(checkpointer=InMemoryCheckpointStore())
    with pytest.raises(ResumeError, match="thread_id"):
        graph.invoke(Command(resume="yes"))
    with pytest.raises(TypeError, match="takes a Command only to resume"):
        graph.invoke(Command(goto="ask"))


@pytest.mark.parametrize(
    ("config", "error", "message"),
    [
        ("thread-1", TypeError, "config must be a dict"),
        ({"callbacks": []}, ValueError, "'callbacks', which selectgraph does not read"),
        ({"configurable": "t-1"}, TypeError, "config\\['configurable'\\] must be a dict"),
        ({"recursion_limit": 0}, ValueError, "recursion_limit must be an integer >= 1"),
    ],
)
def test_bad_config_is_refused_naming_the_key(config: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        looping().invoke({"n": 0}, config)


def test_tags_and_metadata_are_accepted_and_ignored() -> None:
    assert looping().invoke({"n": 2}, {"tags": ["x"], "metadata": {"a": 1}})["n"] == 3


def test_get_state_without_any_store_says_what_to_pass() -> None:
    with pytest.raises(ValueError, match=r"pass checkpoint_store=\.\.\., or compile the graph"):
        looping().get_state("t")


def test_a_graph_without_an_entry_still_fails_compile_clearly() -> None:
    graph = AgentGraph(strict_entry=True)
    graph.add_node("a", lambda s: None, next_node=END)
    with pytest.raises(GraphBuildError):
        graph.compile()
