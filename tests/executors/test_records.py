"""The DBOS executor's records, serializer and inputs, without a database."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from selectgraph import END, AgentGraph, GraphState, Interrupt, NodeContext, Scatter, Usage
from selectgraph.cli._load import LoadError
from selectgraph.cli._worker import parse_graphs
from selectgraph.core._control import BudgetStop
from selectgraph.core._run_errors import NodeError, NodeTimeout
from selectgraph.core._serialization import StateSerializer
from selectgraph.executors import DBOSExecutor, RunHandle, UnknownGraphError
from selectgraph.executors.dbos._records import (
    ReplayedError,
    ReplayedRunError,
    decode_decision,
    decode_result,
    decode_tally,
    encode_budget_stop,
    encode_decision,
    encode_failure,
    encode_result,
    encode_tally,
    rebuild_budget_stop,
    rebuild_failure,
)
from selectgraph.executors.dbos._serializer import JsonSerializer, RemoteError
from selectgraph.executors.dbos._workflow import decode_input, encode_input
from selectgraph.observe import NodeStarted
from selectgraph.observe._codec import event_to_json
from selectgraph.persistence._checkpoint import (
    checkpoint_ids_from,
    new_checkpoint_id,
    replayable_ids,
)
from selectgraph.routing._edges import RouteDecision
from selectgraph.runtime._book import InterruptBook
from selectgraph.runtime._book_codec import (
    decode_children,
    decode_interrupt_records,
    decode_memo,
    encode_book,
)
from selectgraph.runtime._tasks import BranchTally


class Finding(BaseModel):
    claim: str


def test_a_failure_comes_back_under_its_own_name_with_its_details() -> None:
    try:
        try:
            raise ConnectionError("the backend is down")
        except ConnectionError as cause:
            raise NodeError("node 'fetch' raised ConnectionError", node="fetch", step=3) from cause
    except NodeError as error:
        record = encode_failure(error)
    rebuilt = rebuild_failure(record)
    assert type(rebuilt).__name__ == "NodeError"
    assert isinstance(rebuilt, ReplayedRunError)
    assert str(rebuilt) == "node 'fetch' raised ConnectionError"
    assert (rebuilt.node, rebuilt.step) == ("fetch", 3)
    rebuilt_cause = rebuilt.__cause__
    assert type(rebuilt_cause).__name__ == "ConnectionError"
    assert isinstance(rebuilt_cause, ReplayedError)
    assert not isinstance(rebuilt_cause, ConnectionError)  # a class made here, not the original
    assert str(rebuilt_cause) == "the backend is down"
    # Encoding a rebuilt failure again gives the same record (a second replay).
    assert encode_failure(rebuilt) == record


def test_a_failure_keeps_its_usage_and_refuses_odd_names() -> None:
    error = ValueError("bad")
    error.usage = Usage(input_tokens=3, output_tokens=4)  # type: ignore[attr-defined]
    error.node = "n"  # type: ignore[attr-defined]
    rebuilt = rebuild_failure(encode_failure(error))
    assert rebuilt.usage == Usage(input_tokens=3, output_tokens=4)  # type: ignore[attr-defined]
    assert rebuilt.node == "n"  # type: ignore[attr-defined]
    odd = rebuild_failure({"type": "os.system('x')", "message": "m"})
    assert type(odd).__name__ == "ReplayedError"
    timeout = rebuild_failure(encode_failure(NodeTimeout("slow", node="n", step=1)))
    assert type(timeout).__name__ == "NodeTimeout"
    assert type(rebuild_failure(encode_failure(ValueError("x")))) is type(
        rebuild_failure({"type": "ValueError", "message": "y"})
    )


def test_budget_stops_tallies_and_decisions_round_trip() -> None:
    stop = rebuild_budget_stop(encode_budget_stop(BudgetStop("token_budget", 10, 9, 5)))
    assert (stop.kind, stop.limit, stop.used, stop.needed) == ("token_budget", 10, 9, 5)
    walk = BranchTally(
        usage=Usage(input_tokens=1), ran={"a": 2}, steps=7, hit_limit=True, stopped_at=END
    )
    other = BranchTally(ran={"a": 1, "b": 1}, steps=9, degraded=True)
    tally = decode_tally(encode_tally([walk, other]))
    assert tally.ran == {"a": 3, "b": 1}
    assert (tally.steps, tally.degraded, tally.hit_limit) == (9, True, True)
    assert tally.stopped_at is END
    assert tally.usage == Usage(input_tokens=1)
    for decision in (
        RouteDecision(target=END, reasoning="done", usage=Usage(output_tokens=2)),
        RouteDecision(target="writer", error="fallback"),
    ):
        assert decode_decision(encode_decision(decision)) == decision


def test_a_result_round_trips_through_the_graphs_serializer() -> None:
    graph = AgentGraph("r")
    graph.add_node("a", lambda state: {"finding": Finding(claim="x")}, next_node=END)
    result = graph.compile().run({})
    serializer = StateSerializer(allowed_types=[Finding])
    back = decode_result(encode_result(result, serializer), serializer, [])
    assert back.state.data == result.state.data
    assert (back.steps, back.stop_reason, back.quality) == (1, "end", "clean")
    asked = Interrupt(id="r|1:a|0", node="a", prompt="ok?", payload=Finding(claim="y"))
    paused = dataclasses.replace(result, interrupts=(asked,))
    assert decode_result(encode_result(paused, serializer), serializer, []).interrupts == (asked,)


def test_the_serializer_writes_json_and_reads_exceptions_as_data() -> None:
    serializer = JsonSerializer()
    assert serializer.name() == "selectgraph_json"
    text = serializer.serialize({"args": ("g", {"x": (1, 2)}), "kwargs": {}})
    assert serializer.deserialize(text) == {"args": ("g", {"x": [1, 2]}), "kwargs": {}}
    error = serializer.deserialize(serializer.serialize(KeyError("k")))
    assert isinstance(error, RemoteError)
    assert (error.type_name, error.message) == ("KeyError", "'k'")
    assert serializer.deserialize(serializer.serialize(error)).type_name == "KeyError"
    assert serializer.deserialize(serializer.serialize([ValueError("v")]))[0] == {
        "$exception": "ValueError",
        "message": "v",
    }
    with pytest.raises(TypeError, match="JSON only"):
        serializer.serialize({"when": dt.datetime.now(dt.UTC)})


def test_replayable_checkpoint_ids_repeat_and_sort() -> None:
    start = dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
    first = replayable_ids(start, "run-1")
    again = replayable_ids(start, "run-1")
    ids = [first() for _ in range(3)]
    assert ids == [again() for _ in range(3)]
    assert ids == sorted(ids)
    assert replayable_ids(start, "run-2")() != ids[0]
    with checkpoint_ids_from(replayable_ids(start, "run-1")):
        assert new_checkpoint_id() == ids[0]
    assert new_checkpoint_id() not in ids


def test_inputs_round_trip_and_bad_ones_are_named() -> None:
    serializer = StateSerializer(allowed_types=[Finding])
    for value in (None, "a prompt", {"finding": Finding(claim="c")}):
        assert decode_input(encode_input(value, serializer), serializer) == value
    state = GraphState(data={"n": 1})
    decoded = decode_input(encode_input(state, serializer), serializer)
    assert isinstance(decoded, GraphState)
    assert decoded.data == {"n": 1}
    with pytest.raises(TypeError, match="got int"):
        encode_input(3, serializer)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown input kind"):
        decode_input({"kind": "pickle"}, serializer)
    with pytest.raises(ValueError, match="must be an object"):
        decode_input({"kind": "data", "value": [1]}, serializer)


def test_the_interrupt_book_codec_round_trips() -> None:
    serializer = StateSerializer(allowed_types=[Finding])
    asked = Interrupt(id="r|2:ask|0", node="ask", prompt="ok?", payload=Finding(claim="p"))
    book = InterruptBook(answers={"r|1:ask|0": "yes"}, pending={asked.id: asked})
    book.memo["2:ask"] = {"fact": Finding(claim="m")}
    book.children["3:sub"] = {
        "state": GraphState(data={"k": 1}),
        "steps": 2,
        "visits": {"x": 1},
        "next": ["y"],
        "written": {"k"},
    }
    records, extra, writes = encode_book(book, serializer, book.pending.values())
    assert writes == {}
    pending, answers = decode_interrupt_records(records, serializer, "here")
    assert pending == {asked.id: asked}
    assert answers == {"r|1:ask|0": "yes"}
    assert decode_memo(extra["memo"], serializer, "here") == book.memo
    child = decode_children(extra["children"], serializer)["3:sub"]
    assert child["state"].data == {"k": 1}
    assert (child["steps"], child["visits"], child["next"], child["written"]) == (
        2,
        {"x": 1},
        ["y"],
        {"k"},
    )


def test_a_node_knows_its_stable_task_id_in_branches_and_subgraphs() -> None:
    seen: list[str] = []

    def note(state: Any, context: NodeContext) -> dict[str, Any]:
        seen.append(context.task_id)
        return {}

    inner = AgentGraph("inner")
    inner.add_node("deep", note, next_node=END)
    graph = AgentGraph("outer")
    graph.add_node("start", note)
    graph.add_conditional_edges("start", lambda state: [Scatter("leaf", {}), Scatter("leaf", {})])
    graph.add_node("leaf", note, next_node="sub")
    graph.add_subgraph("sub", inner, next_node=END)
    graph.compile().run({})
    assert seen[0] == "1:start"
    assert sorted(seen[1:3]) == ["start:0/2:leaf", "start:1/2:leaf"]
    assert seen[3] == "sub/1:deep"
    orphan = NodeContext("n", 4, 1, 1, "run", "g", namespace=("outer",))
    assert orphan.task_id == "outer/4:n"


def test_executor_options_and_graph_names_are_checked() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {}, next_node=END)
    with pytest.raises(ValueError, match="database_url"):
        DBOSExecutor("")
    with pytest.raises(ValueError, match="worker_concurrency"):
        DBOSExecutor("sqlite:///x.sqlite", worker_concurrency=0)
    with pytest.raises(ValueError, match="poll_interval"):
        DBOSExecutor("sqlite:///x.sqlite", poll_interval=0)
    with pytest.raises(ValueError, match="non-empty string"):
        DBOSExecutor("sqlite:///x.sqlite", graphs={"": graph})
    with pytest.raises(TypeError, match="got int"):
        DBOSExecutor("sqlite:///x.sqlite", graphs={"g": 3})  # type: ignore[dict-item]
    gated = AgentGraph("gated", pause_before=["a"])
    gated.add_node("a", lambda state: {}, next_node=END)
    with pytest.raises(ValueError, match="pause gates are not supported"):
        DBOSExecutor("sqlite:///x.sqlite", graphs={"gated": gated})
    executor = DBOSExecutor("sqlite:///x.sqlite", graphs={"g": graph})
    with pytest.raises(UnknownGraphError, match="registered: g"):
        executor.graph("h")
    assert executor.serializer_for("h") is not executor.serializer_for("g")
    assert "sqlite:///x.sqlite" in repr(executor)
    assert executor.single_node


def test_the_worker_command_reads_its_graph_list() -> None:
    found = parse_graphs("tests.executors.graphs:three, R=tests.executors.graphs:approval")
    assert sorted(found) == ["R", "three"]
    with pytest.raises(LoadError, match="name at least one graph"):
        parse_graphs(" , ")
    with pytest.raises(LoadError, match="two graphs are named 'three'"):
        parse_graphs("tests.executors.graphs:three,three=tests.executors.graphs:approval")
    with pytest.raises(LoadError, match="is not module:attr"):
        parse_graphs("=tests.executors.graphs:three")


class _Stream:
    """A client whose run stream holds ``items``, one of them written twice."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def read_stream(self, run_id: str, key: str, **options: Any) -> Iterator[dict[str, Any]]:
        yield from self.items[options.get("offset", 0) :]


def test_a_reader_sees_each_event_once_in_order() -> None:
    def event(node: str) -> dict[str, Any]:
        started = NodeStarted(run_id="r", graph="g", step=1, timestamp=0.0, node=node, visit=1)
        return event_to_json(started)

    items = [
        {"from": 0, "events": [event("a"), event("b")], "checkpoints": []},
        # A node that ran again after its worker died wrote what waited once more.
        {"from": 1, "events": [event("b"), event("c")], "checkpoints": []},
        {"from": 3, "events": [event("d")], "checkpoints": []},
    ]
    executor = DBOSExecutor("sqlite:///unused.sqlite")
    executor._client = _Stream(items)
    handle = RunHandle(executor, "r", "g")
    assert [e.node for e in handle.events(follow=False)] == ["a", "b", "c", "d"]  # type: ignore[attr-defined]
    assert [e.node for e in handle.events(follow=False, start=2)] == ["c", "d"]  # type: ignore[attr-defined]


def test_a_question_record_carries_the_fan_out_branch_that_asked() -> None:
    from selectgraph import BranchRef, Interrupt, StateSerializer
    from selectgraph.executors.dbos._records import decode_interrupt, encode_interrupt

    inner = BranchRef(source="plan", index=2, parent=BranchRef(source="outer", index=0, name="a"))
    question = Interrupt(id="r|t|0", node="work", prompt="Keep?", branch=inner)
    serializer = StateSerializer()

    record = encode_interrupt(question, serializer)

    assert record["branch"]["label"] == "plan[2]"
    assert decode_interrupt(record, serializer) == question
