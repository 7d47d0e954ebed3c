"""Library and user types in the state survive checkpoints; what cannot be stored is named."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    ErrorPolicy,
    GraphState,
    InterruptRequest,
    Message,
    StateSerializationError,
    StateSerializer,
    TypeNotAllowedError,
)
from tests.durable._support import Calls, pending, stored
from tests.durable._types import Item, Order, Priority


def _two_steps(first: Any, **graph_options: Any) -> AgentGraph:
    graph = AgentGraph("types", **graph_options)
    graph.add_node("first", first)
    graph.add_node("second", lambda s: {"n": 1})
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    return graph


def test_messages_and_library_types_survive_a_checkpoint(store: CheckpointStore) -> None:
    def first(state: GraphState) -> dict[str, Any]:
        state.messages.append(Message.user("hello"))
        return {"said": Message.assistant("hi there"), "when": (1, 2), "tags": {"a", "b"}}

    graph = _two_steps(first)
    paused = graph.run({}, checkpoint_store=store, run_id="lib", pause_after=["first"])
    snapshot = graph.get_state("lib", checkpoint_store=store)
    assert snapshot.values["said"] == Message.assistant("hi there")
    assert snapshot.values["when"] == (1, 2)
    assert snapshot.values["tags"] == {"a", "b"}
    assert list(snapshot.state.messages) == list(paused.state.messages)
    assert Message.user("hello") in list(snapshot.state.messages)
    final = _two_steps(first).run(None, checkpoint_store=store, run_id="lib")
    assert final.state.data["said"] == Message.assistant("hi there")
    assert isinstance(final.state.data["said"], Message)
    assert Message.user("hello") in list(final.state.messages)


def test_a_model_value_round_trips_with_an_allowing_serializer(store: CheckpointStore) -> None:
    item = Item(name="bolt", qty=3, priority=Priority.HIGH)
    serializer = StateSerializer(allowed_types=[Item, Priority])
    graph = _two_steps(lambda s: {"item": item, "items": [item, item]})
    graph.run({}, checkpoint_store=store, run_id="m", pause_after=["first"], serializer=serializer)
    snapshot = graph.get_state("m", checkpoint_store=store, serializer=serializer)
    assert snapshot.values["item"] == item
    assert isinstance(snapshot.values["item"], Item)
    assert snapshot.values["item"].priority is Priority.HIGH
    final = graph.run(None, checkpoint_store=store, run_id="m", serializer=serializer)
    assert final.state.data["items"] == [item, item]
    # Without the allowance the stored class is refused, not imported.
    with pytest.raises(TypeNotAllowedError, match=r"data\.item"):
        graph.get_state("m", checkpoint_store=store)


def test_a_schema_model_round_trips_with_a_schema_serializer(store: CheckpointStore) -> None:
    serializer = StateSerializer(state_schema=Order)
    graph = _two_steps(lambda s: {"item": Item(name="nut")}, state_schema=Order)
    graph.run({}, checkpoint_store=store, run_id="s", pause_after=["first"], serializer=serializer)
    final = graph.run(None, checkpoint_store=store, run_id="s", serializer=serializer)
    assert final.state.data["item"] == Item(name="nut")
    assert final.state.data["n"] == 1


def test_a_graph_can_continue_its_own_schema_types_by_default(store: CheckpointStore) -> None:
    graph = _two_steps(lambda s: {"item": Item(name="nut")}, state_schema=Order)
    graph.run({}, checkpoint_store=store, run_id="d", pause_after=["first"])
    final = graph.run(None, checkpoint_store=store, run_id="d")
    assert final.state.data["item"] == Item(name="nut")


def test_an_interrupt_payload_and_answer_of_allowed_types_round_trip(
    store: CheckpointStore,
) -> None:
    serializer = StateSerializer(allowed_types=[Item, Priority])
    seen: list[Any] = []

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        answer = yield InterruptRequest("which?", {"offer": Item(name="a")})
        seen.append(answer)
        state.data["chosen"] = answer

    def build() -> AgentGraph:
        graph = AgentGraph("payload")
        graph.add_node("ask", ask, next_node=END)
        return graph

    result = build().run({}, checkpoint_store=store, run_id="p", serializer=serializer)
    snapshot = build().get_state("p", checkpoint_store=store, serializer=serializer)
    assert snapshot.interrupts[0].payload == {"offer": Item(name="a")}
    answer = Item(name="b", priority=Priority.HIGH)
    final = build().resume(pending(result), answer, checkpoint_store=store, serializer=serializer)
    assert seen == [answer]  # replayed from the store: the answer came back as an Item
    assert final.state.data["chosen"] == answer


def test_an_unencodable_value_is_named_by_its_path(store: CheckpointStore) -> None:
    calls = Calls()

    def second(state: GraphState) -> dict[str, Any]:
        calls.hit("second")
        return {"bad": object()}

    graph = AgentGraph("bad")
    graph.add_node("first", lambda s: {"ok": 1})
    graph.add_node("second", second)
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    with pytest.raises(StateSerializationError) as caught:
        graph.run({}, checkpoint_store=store, run_id="u")
    assert "data.bad" in str(caught.value)
    # Nothing with the bad value was stored: the run continues from after "first".
    head = store.head("u")
    assert head is not None
    assert head.next == [{"after": "first"}]


def test_an_unencodable_input_writes_nothing(store: CheckpointStore) -> None:
    graph = _two_steps(lambda s: {"ok": 1})
    with pytest.raises(StateSerializationError, match=r"data\.handle"):
        graph.run({"handle": object()}, checkpoint_store=store, run_id="in")
    assert stored(store, "in") == []


def test_an_unencodable_payload_or_memo_is_named(store: CheckpointStore) -> None:
    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        yield InterruptRequest("q", object())

    graph = AgentGraph("payload")
    graph.add_node("ask", ask, next_node=END)
    with pytest.raises(StateSerializationError, match=r"interrupts\['pl\|1:ask\|0'\]\.payload"):
        graph.run({}, checkpoint_store=store, run_id="pl")

    def remember(state: GraphState, context: Any) -> Generator[Any, Any, Any]:
        context.once("handle", object)
        yield InterruptRequest("q")

    graph = AgentGraph("memo")
    graph.add_node("ask", remember, next_node=END)
    with pytest.raises(StateSerializationError, match=r"memo\['1:ask'\]\.handle"):
        graph.run({}, checkpoint_store=store, run_id="me")


def _answer_graph() -> AgentGraph:
    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        state.data["answer"] = yield InterruptRequest("q")

    graph = AgentGraph("answer")
    graph.add_node("ask", ask, next_node=END)
    return graph


def _refuse_bad_answer(graph: AgentGraph, interrupt_id: str, store: CheckpointStore) -> None:
    before = stored(store, "an")
    with pytest.raises(StateSerializationError, match=r"\.answer"):
        graph.resume(interrupt_id, object(), checkpoint_store=store)
    assert stored(store, "an") == before


def test_an_unencodable_answer_is_refused_and_the_question_stays_open_on_replay(
    store: CheckpointStore,
) -> None:
    result = _answer_graph().run({}, checkpoint_store=store, run_id="an")
    assert result.interrupt_id is not None
    graph = _answer_graph()  # not the paused run's graph: every resume replays
    _refuse_bad_answer(graph, result.interrupt_id, store)
    final = graph.resume(pending(result), "fine", checkpoint_store=store)
    assert final.state.data["answer"] == "fine"


def test_an_unencodable_answer_is_refused_and_the_question_stays_open_in_process(
    store: CheckpointStore,
) -> None:
    graph = _answer_graph()
    result = graph.run({}, checkpoint_store=store, run_id="an")
    assert result.interrupt_id is not None
    _refuse_bad_answer(graph, result.interrupt_id, store)
    final = graph.resume(pending(result), "fine", checkpoint_store=store)
    assert final.state.data["answer"] == "fine"


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_metadata_errors_and_quality_survive_a_resume(store: CheckpointStore, live: bool) -> None:
    def bad(state: GraphState) -> dict[str, Any]:
        raise RuntimeError("skipped")

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        state.metadata["asked"] = True
        state.data["answer"] = yield InterruptRequest("q")

    def build() -> AgentGraph:
        graph = AgentGraph("meta")
        graph.add_node("s", lambda s: {"s": 1})
        graph.add_node("bad", bad, error_policy=ErrorPolicy.SKIP)
        graph.add_node("ask", ask, next_node=END)
        graph.add_edge("s", "bad")
        graph.add_edge("bad", "ask")
        return graph

    graph = build()
    start = GraphState(data={}, metadata={"request_id": "req-42"})
    paused = graph.run(start, checkpoint_store=store, run_id="meta")
    if not live:
        graph = build()
    final = graph.resume(pending(paused), "y", checkpoint_store=store)
    assert final.quality == "degraded"  # the skipped failure still counts after the pause
    assert final.state.metadata == {"request_id": "req-42", "asked": True}
    assert [error["node"] for error in final.state.errors] == ["bad"]
    assert dict(final.state.data) == {"s": 1, "answer": "y"}


def test_an_agent_output_schema_survives_a_checkpoint_without_registering_it(
    store: CheckpointStore,
) -> None:
    # The agent's structured answer sits in the run's history (its AgentResult); the
    # graph allows the agent's output schema, so continuing from the store restores it.
    from selectgraph import Agent, AgentConfig
    from selectgraph.providers import LocalReply
    from selectgraph.testing import ScriptedProvider

    def build() -> AgentGraph:
        agent = Agent(
            AgentConfig(name="pricer", output_schema=Order),
            provider=ScriptedProvider(
                [LocalReply.json({"items": [{"name": "a1", "qty": 2, "priority": "high"}]})]
            ),
        )
        graph = AgentGraph("priced")
        graph.add_node("pricer", agent, output_key="order", next_node="after")
        graph.add_node("after", lambda s: {"seen": True}, next_node=END)
        return graph

    build().run("price it", checkpoint_store=store, run_id="priced", pause_after=["pricer"])
    final = build().run(None, checkpoint_store=store, run_id="priced")
    assert final.state.data["seen"] is True
    [pricer] = final.node_results["pricer"]
    assert isinstance(pricer.agent_result.output, Order)
    assert final.state.data["order"].items[0].priority is Priority.HIGH


def test_a_run_time_model_restores_as_its_module_class_only_with_the_same_fields() -> None:
    from pydantic import create_model

    from selectgraph.core._serialization import named_class
    from tests.durable._types import Item

    narrowed = create_model("Item", __base__=Item, __module__=Item.__module__, name=(str, ...))
    assert named_class(narrowed) is Item
    widened = create_model("Item", __base__=Item, __module__=Item.__module__, score=(float, 0.0))
    assert named_class(widened) is widened  # restoring it as Item would drop "score"
    elsewhere = create_model("Item", __base__=Item)  # built in this module, not Item's
    assert named_class(elsewhere) is elsewhere
