"""The copy-on-write view a node receives: its writes reach the shared state only via the merge."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    LAST_OUTPUT,
    AgentGraph,
    EdgeError,
    ErrorPolicy,
    GraphState,
    Message,
    NodeContractError,
    NodeError,
    NodeResult,
    RetryPolicy,
    Scatter,
    append,
    reducer,
    update,
)
from selectgraph.state._views import StateView

Node = Callable[[GraphState], Any]


def _single(node: Node, **graph_options: Any) -> AgentGraph:
    return AgentGraph.chain(node, names=["node"], **graph_options)


def _written_by(result_state: GraphState, node: str) -> dict[str, Any]:
    """The ``data`` writes the engine recorded for ``node``'s last visit."""
    outputs = [r.output for name, r in result_state.history if name == node]
    last = outputs[-1]
    return dict(last) if last is not None else {}


# ---------------------------------------------------- writes reach the state


def test_data_assignment_reaches_the_state_after_the_node() -> None:
    def node(state: GraphState) -> None:
        state.data["k"] = "v"

    assert _single(node).run({}).state["k"] == "v"


def test_item_assignment_on_the_state_reaches_the_state() -> None:
    def node(state: GraphState) -> None:
        state["k"] = [1, 2]

    assert _single(node).run({}).state["k"] == [1, 2]


def test_last_output_assignment_reaches_the_state() -> None:
    def node(state: GraphState) -> None:
        state.last_output = "answer"

    result = _single(node).run({})

    assert result.state.last_output == "answer"
    assert result.content == "answer"


def test_deletion_through_the_view_removes_the_key() -> None:
    def node(state: GraphState) -> None:
        del state.data["gone"]

    result = _single(node).run({"gone": 1, "kept": 2})

    assert dict(result.state.data) == {"kept": 2}


def test_deleting_a_missing_key_raises_key_error() -> None:
    def node(state: GraphState) -> None:
        del state.data["missing"]

    with pytest.raises(NodeError) as info:
        _single(node).run({})

    assert isinstance(info.value.__cause__, KeyError)


def test_in_place_append_to_a_list_becomes_a_whole_value_write() -> None:
    def node(state: GraphState) -> None:
        state.data["items"].append("c")

    result = _single(node).run({"items": ["a", "b"]})

    assert result.state["items"] == ["a", "b", "c"]
    assert _written_by(result.state, "node") == {"items": ["a", "b", "c"]}


def test_in_place_edit_bypasses_the_fields_reducer() -> None:
    calls: list[Any] = []

    @reducer
    def spy(current: Any, update: Any) -> Any:
        calls.append(update)
        return update

    def node(state: GraphState) -> None:
        state.data["items"].append("c")

    result = _single(node, reducers={"items": spy}).run({"items": ["a"]})

    assert result.state["items"] == ["a", "c"]
    assert calls == []


def test_in_place_edit_of_a_dict_becomes_a_whole_value_write() -> None:
    def node(state: GraphState) -> None:
        state.data["cfg"]["b"] = 2
        del state.data["cfg"]["a"]

    result = _single(node).run({"cfg": {"a": 1}})

    assert result.state["cfg"] == {"b": 2}


def test_in_place_edit_of_a_set_becomes_a_whole_value_write() -> None:
    def node(state: GraphState) -> None:
        state["tags"].add("new")

    result = _single(node).run({"tags": {"old"}})

    assert result.state["tags"] == {"old", "new"}


def test_in_place_edits_never_touch_the_callers_containers() -> None:
    items, cfg, tags = ["a"], {"a": 1}, {"x"}

    def node(state: GraphState) -> None:
        state.data["items"].append("b")
        state.data["cfg"]["b"] = 2
        state.data["tags"].add("y")

    result = _single(node).run({"items": items, "cfg": cfg, "tags": tags})

    assert (items, cfg, tags) == (["a"], {"a": 1}, {"x"})
    assert result.state["items"] == ["a", "b"]


def test_reading_a_container_without_changing_it_writes_nothing() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        return {"count": len(state.data["items"])}

    items = ["a", "b"]
    result = _single(node).run({"items": items})

    assert _written_by(result.state, "node") == {"count": 2}
    assert result.state["items"] is items


def test_keys_a_node_does_not_write_stay_shared_not_copied() -> None:
    big = list(range(1000))
    nested = {"deep": [1, 2]}

    def node(state: GraphState) -> dict[str, Any]:
        return {"small": 1}

    result = AgentGraph.chain(node, node, names=["a", "b"]).run({"big": big, "nested": nested})

    assert result.state["big"] is big
    assert result.state["nested"] is nested


def test_nested_objects_read_through_the_view_are_shared() -> None:
    inner = [1, 2]

    def node(state: GraphState) -> dict[str, Any]:
        return {"same": state.data["outer"]["inner"] is inner}

    result = _single(node).run({"outer": {"inner": inner}})

    assert result.state["same"] is True


def test_message_appends_reach_the_state() -> None:
    def node(state: GraphState) -> None:
        state.messages.append(Message.assistant("one"))
        state.messages.extend([Message.assistant("two"), Message.assistant("three")])

    result = _single(node).run("prompt")

    assert [m.text for m in result.state.messages] == ["prompt", "one", "two", "three"]


def test_history_appends_reach_the_state() -> None:
    note = NodeResult(node="external", step=0, visit=1, outcome="success")

    def node(state: GraphState) -> None:
        state.history.append(("external", note))

    result = _single(node).run({})

    assert [name for name, _ in result.state.history] == ["external", "node"]
    assert result.state.history[0][1] is note


def test_metadata_writes_and_deletions_reach_the_state() -> None:
    def node(state: GraphState) -> None:
        state.metadata["request"] = "r2"
        del state.metadata["stale"]

    initial = GraphState(metadata={"request": "r1", "stale": True, "user": "u"})
    result = _single(node).run(initial)

    assert dict(result.state.metadata) == {"request": "r2", "user": "u"}


def test_message_appends_survive_returning_a_dict() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        state.messages.append(Message.assistant("kept?"))
        return {"x": 1}

    result = _single(node).run("prompt")

    assert [m.text for m in result.state.messages] == ["prompt", "kept?"]


def test_metadata_writes_survive_returning_a_dict() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        state.metadata["request"] = "r2"
        return {"x": 1}

    result = _single(node).run({})

    assert result.state.metadata == {"request": "r2"}


def test_view_writes_and_returned_update_combine() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        state.data["a"] = 1
        state.messages.append(Message.assistant("m"))
        return {"b": 2}

    result = _single(node).run("p")

    assert result.state["a"] == 1
    assert result.state["b"] == 2
    assert [m.text for m in result.state.messages] == ["p", "m"]


def test_returned_update_wins_over_a_view_write_of_the_same_key() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        state.data["k"] = "view"
        return {"k": "returned"}

    assert _single(node).run({}).state["k"] == "returned"


# ----------------------------------------------------- isolation while running


def test_view_writes_do_not_touch_the_live_state() -> None:
    live = GraphState.from_prompt("hi", data={"items": [1], "k": 0}, metadata={"m": 0})
    view = StateView(live, "node")

    view.data["k"] = 1
    view["new"] = True
    view.last_output = "out"
    view.data["items"].append(2)
    del view.data["k"]
    view.messages.append(Message.user("more"))
    view.metadata["m"] = 1

    assert dict(live.data) == {"items": [1], "k": 0}
    assert [m.text for m in live.messages] == ["hi"]
    assert dict(live.metadata) == {"m": 0}


def test_view_collects_what_the_node_wrote() -> None:
    live = GraphState(data={"items": [1], "k": 0, "untouched": [5]}, metadata={"m": 0})
    view = StateView(live, "node")

    view.data["items"].append(2)
    _ = view.data["untouched"]
    view["new"] = True
    del view.data["k"]
    view.metadata["m"] = 1
    view.messages.append(Message.user("x"))

    writes = view.collect()

    assert writes is not None
    assert writes.assignments == {"items": [1, 2], "new": True}
    assert writes.deletions == {"k"}
    assert writes.metadata == {"m": 1}
    assert [m.text for m in writes.messages] == ["x"]


def test_view_that_only_read_collects_nothing() -> None:
    view = StateView(GraphState(data={"items": [1], "k": 0}), "node")

    _ = view["k"], view.data["items"], list(view.messages), view.metadata.get("m")

    assert view.collect() is None


def test_view_sees_its_own_writes() -> None:
    view = StateView(GraphState(data={"k": 0, "gone": 1}), "node")

    view.data["k"] = 1
    del view.data["gone"]
    view.messages.append(Message.user("mine"))

    assert view["k"] == 1
    assert "gone" not in view
    assert view.get("gone", "default") == "default"
    assert [m.text for m in view.messages] == ["mine"]


def test_failed_node_writes_are_never_seen_by_the_next_node() -> None:
    seen: dict[str, Any] = {}

    def failing(state: GraphState) -> None:
        state.data["k"] = "leaked"
        state.messages.append(Message.assistant("leaked"))
        raise RuntimeError("fails after writing")

    def after(state: GraphState) -> None:
        seen["k"] = state.get("k")
        seen["messages"] = [m.text for m in state.messages]

    graph = AgentGraph.chain(
        failing, after, names=["failing", "after"], error_policy=ErrorPolicy.SKIP
    )
    result = graph.run("p")

    assert seen == {"k": None, "messages": ["p"]}
    assert "k" not in result.state


def test_failure_router_sees_the_state_without_the_failed_nodes_writes() -> None:
    seen: list[bool] = []

    def failing(state: GraphState) -> None:
        state.data["k"] = "leaked"
        raise RuntimeError("fails after writing")

    def router(state: GraphState) -> str:
        seen.append("k" in state)
        return "recover"

    graph = AgentGraph("g")
    graph.add_node("failing", failing)
    graph.add_node("recover", lambda state: {"recovered": True}, next_node=END)
    graph.add_conditional_edge("failing", router, on="failure")
    graph.add_edge("failing", END)
    graph.set_entry("failing")

    result = graph.run({})

    assert seen == [False]
    assert result.state["recovered"] is True


def test_a_retry_attempt_gets_a_fresh_view() -> None:
    attempts: list[Any] = []

    def flaky(state: GraphState) -> dict[str, Any]:
        attempts.append(state.get("k"))
        state.data["k"] = "from attempt"
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")
        return {}

    graph = _single(
        flaky,
        error_policy=ErrorPolicy.RETRY,
        retry=RetryPolicy(max_retries=1, initial_delay=0, jitter=0),
    )
    result = graph.run({})

    assert attempts == [None, None]
    assert result.state["k"] == "from attempt"


def test_router_sees_the_merged_writes_of_the_node() -> None:
    seen: list[Any] = []

    def node(state: GraphState) -> None:
        state.data["items"].append(2)

    def router(state: GraphState) -> Any:
        seen.append(state["items"])
        return END

    graph = AgentGraph("g")
    graph.add_node("node", node)
    graph.add_conditional_edge("node", router)
    graph.set_entry("node")
    graph.run({"items": [1]})

    assert seen == [[1, 2]]


# ------------------------------------------------------- append-only sequences


REFUSED: list[tuple[str, Callable[[Any], object]]] = [
    ("item assignment", lambda seq: seq.__setitem__(0, Message.user("x"))),
    ("del", lambda seq: seq.__delitem__(0)),
    ("insert", lambda seq: seq.insert(0, Message.user("x"))),
    ("pop", lambda seq: seq.pop()),
    ("remove", lambda seq: seq.remove(seq[0])),
    ("clear", lambda seq: seq.clear()),
    ("item assignment", lambda seq: seq.reverse()),
]
REFUSED_IDS = ["setitem", "delitem", "insert", "pop", "remove", "clear", "reverse"]


@pytest.mark.parametrize(("operation", "change"), REFUSED, ids=REFUSED_IDS)
def test_messages_view_refuses_everything_but_append(
    operation: str, change: Callable[[Any], object]
) -> None:
    view = StateView(GraphState(messages=[Message.user("1"), Message.user("2")]), "node")

    with pytest.raises(TypeError) as info:
        change(view.messages)

    message = str(info.value)
    assert "state.messages is append-only inside a node" in message
    assert f"{operation}()" in message
    assert "use append() or extend()" in message
    assert [m.text for m in view.messages] == ["1", "2"]


@pytest.mark.parametrize(("operation", "change"), REFUSED, ids=REFUSED_IDS)
def test_history_view_refuses_everything_but_append(
    operation: str, change: Callable[[Any], object]
) -> None:
    entries = [(n, NodeResult(node=n, step=1, visit=1, outcome="success")) for n in "ab"]
    view = StateView(GraphState(history=entries), "node")

    with pytest.raises(TypeError, match=r"state\.history is append-only"):
        change(view.history)


def test_messages_view_refusal_fails_the_node_with_a_clear_type_error() -> None:
    def node(state: GraphState) -> None:
        state.messages.pop()

    with pytest.raises(NodeError) as info:
        _single(node).run("p")

    assert isinstance(info.value.__cause__, TypeError)
    assert "append-only" in str(info.value.__cause__)


@pytest.mark.parametrize("attribute", ["messages", "history", "data", "metadata", "errors"])
def test_replacing_a_container_of_the_view_is_refused(attribute: str) -> None:
    view = StateView(GraphState(), "node")

    with pytest.raises(TypeError, match=f"cannot replace state.{attribute}"):
        setattr(view, attribute, [])


def test_errors_are_read_only_inside_a_node() -> None:
    view = StateView(GraphState(errors=[{"node": "x"}]), "node")

    with pytest.raises(TypeError, match="read-only"):
        view.errors.append({"node": "y"})
    assert list(view.errors) == [{"node": "x"}]


def test_messages_view_supports_reads_like_a_list() -> None:
    view = StateView(GraphState.from_prompt("one"), "node")
    view.messages.append(Message.user("two"))

    assert len(view.messages) == 2
    assert view.messages[-1].text == "two"
    assert [m.text for m in view.messages[0:2]] == ["one", "two"]
    assert view.messages == [Message.user("one"), Message.user("two")]
    with pytest.raises(IndexError):
        _ = view.messages[2]


def test_messages_plus_equals_appends() -> None:
    def node(state: GraphState) -> None:
        state.messages += [Message.assistant("added")]

    result = _single(node).run("p")

    assert [m.text for m in result.state.messages] == ["p", "added"]


# ------------------------------------------------------- routers: read-only

ROUTER_WRITES: list[tuple[str, Callable[[GraphState], object]]] = [
    ("data['k']", lambda state: state.data.__setitem__("k", 1)),
    ("state['k']", lambda state: state.__setitem__("k", 1)),
    ("last_output", lambda state: setattr(state, "last_output", 1)),
    ("del data['x']", lambda state: state.data.__delitem__("x")),
    ("metadata['m']", lambda state: state.metadata.__setitem__("m", 1)),
]


@pytest.mark.parametrize(("what", "write"), ROUTER_WRITES, ids=[w[0] for w in ROUTER_WRITES])
def test_a_condition_view_refuses_writes_pointing_to_a_router_or_node(
    what: str, write: Callable[[GraphState], object]
) -> None:
    view = StateView(GraphState(data={"x": 1}), "condition on 'a'", readonly=True)

    with pytest.raises(TypeError) as info:
        write(view)

    assert "conditions only read state" in str(info.value)
    assert view.collect() is None


def test_a_condition_view_refuses_message_appends() -> None:
    view = StateView(GraphState(), "condition on 'a'", readonly=True)

    with pytest.raises(TypeError, match="read-only"):
        view.messages.append(Message.user("x"))


def test_a_router_s_writes_merge_before_routing_like_an_update() -> None:
    # Seed 004's enrich_and_route, as a router: its write and its update() both land.
    def enrich_and_route(state: GraphState) -> Any:
        state.data["enriched"] = True
        return update({"revision_count": state.data.get("revision_count", 0) + 1})

    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {"x": 1})
    graph.add_conditional_edge("a", enrich_and_route)

    result = graph.run({})

    assert result.state.data == {"x": 1, "enriched": True, "revision_count": 1}
    assert result.stop_reason == "end"  # update() without a target: the router's node ends


class _Items(BaseModel):
    items: Annotated[list[int], append] = []
    n: int = 0


def _appending_router(state: GraphState) -> str:
    state.data["items"].append(9)  # in place, on the view's copy: a whole value
    state.data["n"] = 5
    return "m"


@pytest.mark.parametrize("fan_out", [False, True], ids=["top", "in-a-branch"])
def test_a_router_s_in_place_write_is_a_whole_value_not_reduced_again(fan_out: bool) -> None:
    graph = AgentGraph("g", state_schema=_Items)
    graph.add_node("a", lambda state: {"items": [1]})
    graph.add_node("m", lambda state: {"items": [2]}, next_node=END)
    graph.add_conditional_edge("a", _appending_router)
    if fan_out:  # two branches, each through the router: each adds [1, 9, 2] once
        graph.add_node("start", lambda state: {"items": [0]})
        graph.add_conditional_edge("start", lambda state: [Scatter("a", {}), Scatter("a", {})])
        graph.set_entry("start")
        assert graph.run({}).state.data == {"items": [0, 1, 9, 2, 1, 9, 2], "n": 5}
        return
    assert graph.run({}).state.data == {"items": [1, 9, 2], "n": 5}


@pytest.mark.parametrize(
    ("write", "problem"),
    [
        (lambda state: state.data.__delitem__("x"), "deleted data keys"),
        (lambda state: state.messages.append(Message.user("x")), "added messages"),
        (lambda state: state.metadata.__setitem__("m", 1), "changed metadata"),
    ],
    ids=["delete", "message", "metadata"],
)
def test_a_router_that_writes_more_than_data_keys_fails_with_an_edge_error(
    write: Callable[[GraphState], object], problem: str
) -> None:
    def router(state: GraphState) -> Any:
        write(state)
        return END

    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {"x": 1})
    graph.add_conditional_edge("a", router)

    with pytest.raises(EdgeError) as info:
        graph.run({})

    assert problem in str(info.value)
    assert "do the rest in a node" in str(info.value)
    assert info.value.state is not None
    assert info.value.state.data == {"x": 1}


def test_a_router_that_writes_and_fans_out_fails_with_an_edge_error() -> None:
    def router(state: GraphState) -> Any:
        state.data["k"] = 1
        return ["b", "c"]

    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {"x": 1})
    graph.add_node("b", lambda state: {}, next_node=END)
    graph.add_node("c", lambda state: {}, next_node=END)
    graph.add_conditional_edge("a", router)

    with pytest.raises(EdgeError, match="wrote state and fanned out"):
        graph.run({})


def test_a_condition_function_that_writes_fails_the_run_with_an_edge_error() -> None:
    def condition(state: GraphState) -> bool:
        state["k"] = 1
        return True

    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {"x": 1})
    graph.add_edge("a", END, condition=condition)
    graph.add_edge("a", END)
    graph.set_entry("a")

    with pytest.raises(EdgeError) as info:
        graph.run({})

    assert isinstance(info.value.__cause__, TypeError)
    assert "conditions only read state" in str(info.value.__cause__)


def test_a_router_s_in_place_edit_of_a_container_is_a_write_as_a_node_s_is() -> None:
    def router(state: GraphState) -> Any:
        items = state["items"]
        items.append("local")  # on the view's copy, merged as a whole value
        return END

    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {"x": 1})
    graph.add_conditional_edge("a", router)
    graph.set_entry("a")

    assert graph.run({"items": ["a"]}).state["items"] == ["a", "local"]


def test_a_router_that_only_reads_a_container_writes_nothing() -> None:
    def router(state: GraphState) -> Any:
        return END if state["items"] == ["a"] else "a"

    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {"x": 1})
    graph.add_conditional_edge("a", router)

    result = graph.run({"items": ["a"]})
    assert result.state.data == {"items": ["a"], "x": 1}
    assert [name for name, *_ in result.state.history] == ["a"]


# --------------------------------------------------------- declared reads


def _reading(key: str) -> Node:
    def node(state: GraphState) -> dict[str, Any]:
        return {"out": state[key]}

    return node


def test_reading_a_declared_key_works() -> None:
    graph = AgentGraph("g")
    graph.add_node("n", _reading("a"), reads=["a"], next_node=END)
    graph.set_entry("n")

    assert graph.run({"a": 1, "b": 2}).state["out"] == 1


def test_reading_an_undeclared_key_raises_node_contract_error() -> None:
    graph = AgentGraph("g")
    graph.add_node("n", _reading("b"), reads=["a"], next_node=END)
    graph.set_entry("n")

    with pytest.raises(NodeContractError) as info:
        graph.run({"a": 1, "b": 2})

    message = str(info.value)
    assert "read data['b']" in message
    assert "reads=[a]" in message
    assert info.value.node == "n"


def test_get_of_an_undeclared_key_raises_node_contract_error() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        return {"out": state.get("b", "default")}

    graph = AgentGraph("g")
    graph.add_node("n", node, reads=["a"], next_node=END)
    graph.set_entry("n")

    with pytest.raises(NodeContractError, match="read data\\['b'\\]"):
        graph.run({"a": 1, "b": 2})


def test_last_output_is_readable_without_declaring_it() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        return {"out": state.last_output}

    graph = AgentGraph("g")
    graph.add_node("n", node, reads=["a"], next_node=END)
    graph.set_entry("n")

    assert graph.run({"a": 1, LAST_OUTPUT: "prev"}).state["out"] == "prev"


def test_a_node_may_read_what_it_wrote_without_declaring_it() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        state.data["scratch"] = 5
        return {"out": state["scratch"] + state["a"]}

    graph = AgentGraph("g")
    graph.add_node("n", node, reads=["a"], next_node=END)
    graph.set_entry("n")

    assert graph.run({"a": 1}).state["out"] == 6


# ------------------------------------------------ mapping protocol of the view


def test_view_len_iteration_in_and_get_reflect_its_writes() -> None:
    view = StateView(GraphState(data={"a": 1, "b": 2, "c": 3}), "node")

    view.data["d"] = 4
    view.data["a"] = 10
    del view.data["b"]

    assert len(view.data) == 3
    assert sorted(view.data) == ["a", "c", "d"]
    assert "b" not in view
    assert "d" in view
    assert view.get("b") is None
    assert view.get("a") == 10
    assert dict(view.data) == {"a": 10, "c": 3, "d": 4}


def test_view_mapping_protocol_inside_a_running_node() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        state.data["new"] = 1
        del state.data["old"]
        return {
            "len": len(state.data),
            "keys": sorted(state.data),
            "has_old": "old" in state,
            "has_new": "new" in state,
            "get_old": state.get("old", "none"),
        }

    result = _single(node).run({"old": 0, "kept": 0})

    assert result.state["len"] == 2
    assert result.state["keys"] == ["kept", "new"]
    assert result.state["has_old"] is False
    assert result.state["has_new"] is True
    assert result.state["get_old"] == "none"


def test_deleted_then_reassigned_key_is_present_again() -> None:
    view = StateView(GraphState(data={"k": 1}), "node")

    del view.data["k"]
    view.data["k"] = 2

    assert view["k"] == 2
    writes = view.collect()
    assert writes is not None
    assert writes.assignments == {"k": 2}
    assert writes.deletions == set()


def test_view_current_node_is_the_running_node() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        return {"me": state.current_node}

    assert _single(node).run({}).state["me"] == "node"


# ---------------------------------------------------- returning a GraphState


def test_returning_a_modified_snapshot_writes_changed_keys_and_new_messages() -> None:
    def node(state: GraphState) -> GraphState:
        new = state.snapshot()
        new.data["changed"] = "after"
        new.data["added"] = [1]
        new.messages.append(Message.assistant("reply"))
        return new

    result = _single(node).run(GraphState.from_prompt("p", data={"changed": "before", "same": 1}))

    assert dict(result.state.data) == {"changed": "after", "same": 1, "added": [1]}
    assert [m.text for m in result.state.messages] == ["p", "reply"]
    assert _written_by(result.state, "node") == {"changed": "after", "added": [1]}


def test_returning_a_new_graph_state_writes_only_keys_whose_values_differ() -> None:
    def first(state: GraphState) -> dict[str, Any]:
        return {"a": [1, 2], "b": "x"}

    def second(state: GraphState) -> GraphState:
        return GraphState(
            messages=[*state.messages, Message.assistant("new")],
            data={"a": [1, 2], "b": "y", "c": None},
            history=list(state.history),
        )

    result = AgentGraph.chain(first, second).run("p")

    assert dict(result.state.data) == {"a": [1, 2], "b": "y", "c": None}
    assert _written_by(result.state, "second") == {"b": "y", "c": None}
    assert [m.text for m in result.state.messages] == ["p", "new"]


def test_returning_a_graph_state_writes_bypass_reducers() -> None:
    calls: list[Any] = []

    @reducer
    def spy(current: Any, update: Any) -> Any:
        calls.append(update)
        return update

    def node(state: GraphState) -> GraphState:
        new = state.snapshot()
        new.data["items"] = ["replaced"]
        return new

    result = _single(node, reducers={"items": spy}).run({"items": ["a"]})

    assert result.state["items"] == ["replaced"]
    assert calls == []


def test_returning_a_graph_state_that_rewrites_messages_is_refused() -> None:
    def node(state: GraphState) -> GraphState:
        return GraphState(messages=[Message.user("rewritten")], data={})

    with pytest.raises(NodeContractError, match="may only append to messages"):
        _single(node).run("original")


def test_returning_the_view_itself_is_like_returning_none() -> None:
    def node(state: GraphState) -> GraphState:
        state.data["k"] = 1
        return state

    assert _single(node).run({}).state["k"] == 1


def test_message_appended_then_returned_in_a_snapshot_is_added_once() -> None:
    def node(state: GraphState) -> GraphState:
        state.messages.append(Message.assistant("once"))
        return state.snapshot()

    result = _single(node).run("p")

    assert [m.text for m in result.state.messages] == ["p", "once"]
