"""Seed 004's streaming contract: GraphEventType's names, the events' fields, their order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from selectgraph import (
    END,
    Agent,
    AgentConfig,
    AgentGraph,
    GraphResult,
    GraphState,
    InMemoryCheckpointStore,
    InterruptRequest,
)
from selectgraph.observe import EdgeFired, GraphEvent, NodeChunk
from selectgraph.orchestration import GraphEventType
from selectgraph.providers import LocalProvider

T = GraphEventType


def agent(name: str, *replies: str) -> Agent:
    return Agent(AgentConfig(name=name), provider=LocalProvider(script=list(replies)))


# --- the seed's example, as written ------------------------------------------------------


def test_seed_streaming_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    graph = AgentGraph("blog")
    graph.add_node("planner", agent("planner", "Outline: owls"), next_node="writer")
    graph.add_node("writer", agent("writer", "Owls can turn their heads."), next_node=END)

    async def main() -> None:
        # From seed 004, "Streaming" (selectools -> selectgraph).
        async for event in graph.astream("Write a blog post"):
            if event.type == GraphEventType.NODE_START:
                print(f"Starting node: {event.node_name}")
            elif event.type == GraphEventType.NODE_CHUNK:
                print(f"[{event.node_name}] {event.chunk}")
            elif event.type == GraphEventType.ROUTING:
                print(f"Routing: {event.node_name} -> {event.next_node}")
            elif event.type == GraphEventType.GRAPH_INTERRUPT:
                print(f"Interrupted! Resume with ID: {event.interrupt_id}")
            elif event.type == GraphEventType.GRAPH_END:
                print(f"Done. Result: {event.result.content[:100]}")

    asyncio.run(main())
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "Starting node: planner",
        "[planner] Outline:",
        "[planner]  owls",
        "Routing: planner -> writer",
        "Starting node: writer",
        "[writer] Owls",
        "[writer]  can",
        "[writer]  turn",
        "[writer]  their",
        "[writer]  heads.",
        "Routing: writer -> END",
        "Done. Result: Owls can turn their heads.",
    ]


def test_seed_example_prints_the_interrupt_id(capsys: pytest.CaptureFixture[str]) -> None:
    def ask(state: Any) -> Any:
        answer = yield InterruptRequest("Publish?")
        return {"answer": answer}

    graph = AgentGraph("hitl")
    graph.add_node("ask", ask, next_node=END)

    async def main() -> None:
        async for event in graph.astream({}, checkpoint_store=InMemoryCheckpointStore()):
            if event.type == GraphEventType.GRAPH_INTERRUPT:
                print(f"Interrupted! Resume with ID: {event.interrupt_id}")

    asyncio.run(main())
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("Interrupted! Resume with ID: ")
    assert line.endswith(":ask|0")


# --- one graph with everything, in order ------------------------------------------------


def everything_graph() -> AgentGraph:
    inner = AgentGraph("inner")
    inner.add_node("drafter", agent("drafter", "inner words"), next_node=END)

    def ask(state: Any) -> Any:
        answer = yield InterruptRequest("ok?")
        return {"answer": answer}

    graph = AgentGraph("outer")
    graph.add_node("first", agent("first", "hello there"), next_node="sub")
    graph.add_subgraph("sub", inner, next_node="team")
    graph.add_node("a", agent("a", "alpha"))
    graph.add_node("b", agent("b", "beta two"))
    graph.add_parallel_nodes("team", ["a", "b"])
    graph.add_edge("team", "ask")
    graph.add_node("ask", ask, next_node=END)
    return graph


FIRST_RUN: list[tuple[GraphEventType, tuple[str, ...]]] = [
    (T.GRAPH_START, ("first",)),
    (T.CHECKPOINT, ()),
    (T.NODE_START, ("first",)),
    (T.LLM_CALL_STARTED, ("first",)),
    (T.NODE_CHUNK, ("first",)),
    (T.NODE_CHUNK, ("first",)),
    (T.LLM_CALL_FINISHED, ("first",)),
    (T.NODE_END, ("first",)),
    (T.CHECKPOINT, ()),
    (T.ROUTING, ("first",)),
    (T.NODE_START, ("sub",)),
    (T.GRAPH_START, ("sub", "drafter")),
    (T.NODE_START, ("sub", "drafter")),
    (T.LLM_CALL_STARTED, ("sub", "drafter")),
    (T.NODE_CHUNK, ("sub", "drafter")),
    (T.NODE_CHUNK, ("sub", "drafter")),
    (T.LLM_CALL_FINISHED, ("sub", "drafter")),
    (T.NODE_END, ("sub", "drafter")),
    (T.CHECKPOINT, ()),  # the subgraph's progress, saved under the run
    (T.ROUTING, ("sub", "drafter")),
    (T.GRAPH_END, ("sub",)),
    (T.NODE_END, ("sub",)),
    (T.CHECKPOINT, ()),
    (T.ROUTING, ("sub",)),
    (T.NODE_START, ("team",)),
    (T.PARALLEL_START, ("team",)),
    (T.NODE_START, ("a",)),
    (T.LLM_CALL_STARTED, ("a",)),
    (T.NODE_CHUNK, ("a",)),
    (T.LLM_CALL_FINISHED, ("a",)),
    (T.NODE_END, ("a",)),
    (T.NODE_START, ("b",)),
    (T.LLM_CALL_STARTED, ("b",)),
    (T.NODE_CHUNK, ("b",)),
    (T.NODE_CHUNK, ("b",)),
    (T.LLM_CALL_FINISHED, ("b",)),
    (T.NODE_END, ("b",)),
    (T.PARALLEL_END, ("team",)),
    (T.NODE_END, ("team",)),
    (T.CHECKPOINT, ()),
    (T.ROUTING, ("team",)),
    (T.NODE_START, ("ask",)),
    (T.NODE_END, ("ask",)),
    (T.GRAPH_INTERRUPT, ("ask",)),
    (T.CHECKPOINT, ()),
    (T.RUN_PAUSED, ()),
]

RESUMED_RUN: list[tuple[GraphEventType, tuple[str, ...]]] = [
    (T.CHECKPOINT, ()),
    (T.GRAPH_RESUME, ("ask",)),
    (T.NODE_START, ("ask",)),
    (T.NODE_END, ("ask",)),
    (T.CHECKPOINT, ()),
    (T.ROUTING, ("ask",)),
    (T.CHECKPOINT, ()),
    (T.GRAPH_END, ()),
]


def order(events: list[GraphEvent]) -> list[tuple[GraphEventType, tuple[str, ...]]]:
    return [(e.type, e.node_path) for e in events]


def test_event_order_of_a_graph_with_subgraph_parallel_group_and_interrupt() -> None:
    graph = everything_graph()
    store = InMemoryCheckpointStore()

    async def stream() -> list[GraphEvent]:
        return [e async for e in graph.astream("go", checkpoint_store=store, run_id="order-1")]

    streamed = asyncio.run(stream())
    assert order(streamed) == FIRST_RUN

    interrupt_id = next(e for e in streamed if e.type is T.GRAPH_INTERRUPT).interrupt_id  # type: ignore[attr-defined]
    resumed: list[GraphEvent] = []
    result = graph.resume(interrupt_id, "yes", checkpoint_store=store, observers=[resumed.append])
    assert order(resumed) == RESUMED_RUN
    assert result.stop_reason == "end"
    assert result.state["answer"] == "yes"


def test_chunks_say_where_they_come_from() -> None:
    graph = everything_graph()

    async def stream() -> list[GraphEvent]:
        return [e async for e in graph.astream("go", checkpoint_store=InMemoryCheckpointStore())]

    chunks = [e for e in asyncio.run(stream()) if isinstance(e, NodeChunk)]
    where = [
        (e.node_name, e.namespace, None if e.branch is None else (e.branch.source, e.branch.name))
        for e in chunks
    ]
    assert where == [
        ("first", (), None),
        ("first", (), None),
        ("drafter", ("sub",), None),
        ("drafter", ("sub",), None),
        ("a", (), ("team", "a")),
        ("b", (), ("team", "b")),
        ("b", (), ("team", "b")),
    ]
    text: dict[tuple[str, ...], str] = {}
    for e in chunks:
        text[e.node_path] = text.get(e.node_path, "") + e.chunk
    assert text == {
        ("first",): "hello there",
        ("sub", "drafter"): "inner words",
        ("a",): "alpha",
        ("b",): "beta two",
    }
    branch_indexes = {e.node_name: e.branch.index for e in chunks if e.branch is not None}
    assert branch_indexes == {"a": 0, "b": 1}


# --- the seed's fields, per event kind ---------------------------------------------------


def collect(graph: AgentGraph, input: Any, **options: Any) -> tuple[list[GraphEvent], Any]:
    events: list[GraphEvent] = []
    result = graph.run(input, observers=[events.append], **options)
    return events, result


def first_of(events: list[GraphEvent], kind: GraphEventType) -> Any:
    return next(e for e in events if e.type is kind and not e.namespace and e.branch is None)


def test_seed_fields_of_each_event_kind() -> None:
    graph = everything_graph()
    store = InMemoryCheckpointStore()
    events, paused = collect(graph, "go", checkpoint_store=store, run_id="fields-1")

    start = first_of(events, T.GRAPH_START)
    assert start.node_name == "first"
    assert isinstance(start.state, GraphState)

    assert first_of(events, T.NODE_START).node_name == "first"
    assert first_of(events, T.NODE_END).node_name == "first"

    chunk = first_of(events, T.NODE_CHUNK)
    assert (chunk.node_name, chunk.chunk) == ("first", "hello")

    routing = first_of(events, T.ROUTING)
    assert (routing.node_name, routing.next_node) == ("first", "sub")

    assert first_of(events, T.PARALLEL_START).node_name == "team"
    assert first_of(events, T.PARALLEL_END).node_name == "team"

    interrupt = first_of(events, T.GRAPH_INTERRUPT)
    assert interrupt.node_name == "ask"
    assert interrupt.interrupt_id == paused.interrupt_id

    checkpoint = first_of(events, T.CHECKPOINT)
    assert checkpoint.checkpoint_id

    resumed_events, result = collect_resume(graph, paused.interrupt_id, store)
    resume = first_of(resumed_events, T.GRAPH_RESUME)
    assert resume.node_name == "ask"
    assert resume.interrupt_id == paused.interrupt_id

    end = first_of(resumed_events, T.GRAPH_END)
    assert isinstance(end.result, GraphResult)
    assert end.result is result
    assert end.state is result.state
    last_routing = [e for e in resumed_events if isinstance(e, EdgeFired)][-1]
    assert (last_routing.node_name, last_routing.next_node) == ("ask", "END")


def collect_resume(
    graph: AgentGraph, interrupt_id: str, store: InMemoryCheckpointStore
) -> tuple[list[GraphEvent], Any]:
    events: list[GraphEvent] = []
    result = graph.resume(interrupt_id, "yes", checkpoint_store=store, observers=[events.append])
    return events, result


def test_error_event_has_node_name_and_error() -> None:
    def broken(state: Any) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    graph = AgentGraph("failing")
    graph.add_node("broken", broken, next_node=END)
    events: list[GraphEvent] = []
    with pytest.raises(Exception, match="disk on fire"):
        graph.run({}, observers=[events.append])
    error = first_of(events, T.ERROR)
    assert error.node_name == "broken"
    assert "disk on fire" in error.error
    assert events[-1] is error


# --- GraphEventType's names -------------------------------------------------------------

SEED_NAMES = (
    "GRAPH_START",
    "GRAPH_END",
    "NODE_START",
    "NODE_END",
    "NODE_CHUNK",
    "ROUTING",
    "GRAPH_INTERRUPT",
    "GRAPH_RESUME",
    "PARALLEL_START",
    "PARALLEL_END",
    "CHECKPOINT",
    "ERROR",
)


def test_seed_names_are_the_members() -> None:
    members = list(GraphEventType.__members__)
    for name in SEED_NAMES:
        assert GraphEventType[name].name == name  # a member, not an alias of another name
    assert members[: len(SEED_NAMES)] == list(SEED_NAMES)


@pytest.mark.parametrize(
    ("seed", "alias"),
    [
        ("NODE_START", "NODE_STARTED"),
        ("NODE_END", "NODE_FINISHED"),
        ("GRAPH_START", "RUN_STARTED"),
        ("GRAPH_END", "RUN_FINISHED"),
        ("ROUTING", "EDGE_FIRED"),
        ("GRAPH_INTERRUPT", "INTERRUPT_RAISED"),
        ("GRAPH_RESUME", "RUN_RESUMED"),
        ("PARALLEL_START", "PARALLEL_STARTED"),
        ("PARALLEL_END", "PARALLEL_FINISHED"),
        ("CHECKPOINT", "CHECKPOINT_SAVED"),
        ("ERROR", "RUN_FAILED"),
    ],
)
def test_old_names_are_aliases(seed: str, alias: str) -> None:
    assert GraphEventType[alias] is GraphEventType[seed]
    assert alias not in [m.name for m in GraphEventType]


def test_node_start_is_node_started() -> None:
    # mypy sees aliases declared with a member's value as members of their own.
    assert GraphEventType.NODE_START is GraphEventType.NODE_STARTED  # type: ignore[comparison-overlap]
    assert GraphEventType.GRAPH_END is GraphEventType.RUN_FINISHED  # type: ignore[comparison-overlap]
    assert len(set(GraphEventType)) == len(list(GraphEventType))
