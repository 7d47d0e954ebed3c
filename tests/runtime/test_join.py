from __future__ import annotations

from typing import Any

import pytest

from selectgraph import GraphState, Message, append
from selectgraph.core._run_errors import MergeConflictError, ReducerError
from selectgraph.routing._parallel import MergePolicy
from selectgraph.runtime._join import BranchWrites, apply_merge_fn, join_branches, relative_to
from selectgraph.state._merge import Merger
from selectgraph.state._output import NodeOutput
from selectgraph.state._reducers import reducer
from selectgraph.state._schema import StateSchema
from selectgraph.state._views import ViewWrites

SCHEMA = StateSchema(reducers={"notes": append})


def _branch(index: int, *outputs: NodeOutput, label: str | None = None) -> BranchWrites:
    name = label or f"b{index}"
    return BranchWrites(index, name, [(name, output) for output in outputs])


def _join(state: GraphState, branches: list[BranchWrites], policy: MergePolicy) -> None:
    join_branches(state, Merger(SCHEMA, None), SCHEMA, branches, policy, node="fan", step=1)


def test_reducer_keys_take_every_branch_in_order() -> None:
    state = GraphState(data={"notes": ["parent"]})
    _join(
        state,
        [_branch(0, NodeOutput({"notes": ["a"]})), _branch(1, NodeOutput({"notes": ["b"]}))],
        MergePolicy.LAST_WINS,
    )
    assert state.data["notes"] == ["parent", "a", "b"]


def test_distinct_plain_keys_are_all_kept_and_conflicts_follow_the_policy() -> None:
    outputs = [
        _branch(0, NodeOutput({"x": 1, "only0": True})),
        _branch(1, NodeOutput({"x": 2, "only1": True})),
    ]
    for policy, expected in [(MergePolicy.LAST_WINS, 2), (MergePolicy.FIRST_WINS, 1)]:
        state = GraphState(data={})
        _join(state, outputs, policy)
        assert state.data == {"x": expected, "only0": True, "only1": True}


def test_error_policy_names_the_key_and_the_branches() -> None:
    state = GraphState(data={"x": 0})
    with pytest.raises(MergeConflictError) as caught:
        _join(
            state,
            [_branch(0, NodeOutput({"x": 1})), _branch(1, NodeOutput({"x": 2}))],
            MergePolicy.ERROR,
        )
    assert caught.value.key == "x"
    assert caught.value.branches == ["b0", "b1"]
    assert state.data == {"x": 0}


def test_append_counts_the_parents_items_once() -> None:
    state = GraphState(data={"found": ["p"]})
    _join(
        state,
        [
            _branch(0, NodeOutput(writes=ViewWrites(assignments={"found": ["p", "a"]}))),
            _branch(1, NodeOutput({"found": ["p", "b"]})),
            _branch(2, NodeOutput({"found": ["c"]})),
        ],
        MergePolicy.APPEND,
    )
    assert state.data["found"] == ["p", "a", "b", "c"]


def test_seed_style_growth_of_a_reducer_list_becomes_an_update_of_the_new_items() -> None:
    seen: dict[str, Any] = {"notes": ["parent"]}
    grown = NodeOutput(writes=ViewWrites(assignments={"notes": ["parent", "a"]}))
    relative_to(grown, seen, SCHEMA.reducers)
    assert grown.update == {"notes": ["a"]}
    assert grown.writes is not None
    assert grown.writes.assignments == {}
    state = GraphState(data={"notes": ["parent"]})
    _join(
        state, [_branch(0, grown), _branch(1, NodeOutput({"notes": ["b"]}))], MergePolicy.LAST_WINS
    )
    assert state.data["notes"] == ["parent", "a", "b"]


def test_a_failing_reducer_leaves_the_state_as_it_was() -> None:
    @reducer
    def picky(current: Any, update: Any) -> Any:
        if update == "bad":
            raise ValueError("no")
        return [*(current or []), update]

    schema = StateSchema(reducers={"notes": append, "picky": picky})
    state = GraphState(data={"notes": ["p"], "picky": ["p"]})
    with pytest.raises(ReducerError):
        join_branches(
            state,
            Merger(schema, None),
            schema,
            [
                _branch(0, NodeOutput({"notes": ["a"], "picky": "ok"})),
                _branch(1, NodeOutput({"notes": ["b"], "picky": "bad"})),
            ],
            MergePolicy.LAST_WINS,
            node="fan",
            step=1,
        )
    assert state.data == {"notes": ["p"], "picky": ["p"]}


def test_messages_history_and_errors_are_concatenated_in_branch_order() -> None:
    state = GraphState(data={})
    first = _branch(0, NodeOutput(writes=ViewWrites(messages=[Message.user("zero")])))
    first.history.append(("b0", "h0"))
    second = _branch(1, NodeOutput(writes=ViewWrites(messages=[Message.user("one")])))
    second.errors.append({"node": "b1"})
    _join(state, [first, second], MergePolicy.LAST_WINS)
    assert [m.text for m in state.messages] == ["zero", "one"]
    assert state.history.raw == [("b0", "h0")]  # type: ignore[attr-defined]
    assert state.errors == [{"node": "b1"}]


def test_merge_fn_sees_whole_branch_states_and_its_changes_are_merged() -> None:
    state = GraphState(data={"notes": ["p"]}, messages=[Message.user("hi")])

    def combine(states: list[GraphState]) -> GraphState:
        combined = GraphState()
        combined.data["all"] = [s.data["finding"] for s in states]
        for s in states:
            combined.messages.extend(s.messages)
        return combined

    branches = [
        _branch(
            0,
            NodeOutput(
                {"finding": "a", "notes": ["x"]}, ViewWrites(messages=[Message.assistant("A")])
            ),
        ),
        _branch(1, NodeOutput({"finding": "b"})),
    ]
    apply_merge_fn(state, Merger(SCHEMA, None), SCHEMA, branches, combine, node="g", step=1)
    assert state.data["all"] == ["a", "b"]
    assert state.data["notes"] == ["p"]  # the branch's append reached only its own copy
    assert [m.text for m in state.messages] == ["hi", "A"]
