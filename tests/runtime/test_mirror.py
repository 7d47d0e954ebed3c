"""StateMirror: the deltas it writes rebuild exactly the state a full encoding gives."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from selectgraph import GraphState, Message, StateSerializationError
from selectgraph.core._node_result import NodeResult
from selectgraph.core._serialization import default_serializer
from selectgraph.persistence import apply_delta
from selectgraph.runtime._mirror import StateMirror


def _decoded(encoded: dict[str, Any]) -> GraphState:
    return GraphState.from_dict(encoded)


def _step(mirror: StateMirror, state: GraphState, written: set[str], base: dict[str, Any]) -> Any:
    delta = mirror.update(state, written)
    rebuilt = apply_delta(base, delta)
    assert _decoded(rebuilt) == _decoded(state.to_dict()), delta
    assert rebuilt == mirror.encoded
    return rebuilt, delta


def test_every_kind_of_change_round_trips() -> None:
    serializer = default_serializer()
    state = GraphState(data={"n": 0, "items": [1], "gone": "x", "same": 1.0})
    mirror = StateMirror.of(serializer, state)
    base = copy.deepcopy(mirror.encoded)

    state.data["n"] = 1
    state.data["items"] = [1, 2, 3]
    del state.data["gone"]
    state.data["new"] = {"k": [1, 2]}
    state.messages.append(Message.user("hi"))
    state.history.append(
        ("a", NodeResult(node="a", step=1, visit=1, outcome="success", output={"n": 1}))
    )
    state.errors.append({"node": "a", "error": "x"})
    state.metadata["m"] = 1
    state.current_node = "a"
    base, delta = _step(mirror, state, {"n", "items", "gone", "new"}, base)
    assert ["/data/items", [2, 3]] in delta["append"]  # a list that grew stores its tail
    assert "/data/gone" in delta["unset"]

    # 1.0 -> 1 is a change (JSON types differ) even though they compare equal.
    state.data["same"] = 1
    base, delta = _step(mirror, state, {"same"}, base)
    assert delta["set"] == [["/data/same", 1]]

    # Writing a key to the value it had stores nothing.
    _, delta = _step(mirror, state, {"n"}, base)
    assert delta == {}


def test_a_replaced_conversation_is_stored_whole() -> None:
    state = GraphState(messages=[Message.user("a"), Message.assistant("b")])
    mirror = StateMirror.of(default_serializer(), state)
    base = copy.deepcopy(mirror.encoded)
    state.messages = [Message.system("summary")]  # compaction
    _, delta = _step(mirror, state, set(), base)
    assert delta["set"][0][0] == "/messages"


def test_history_is_stored_compact_and_decodes_to_the_same_results() -> None:
    result = NodeResult(
        node="a", step=3, visit=2, outcome="failure", error="E: x", attempts=2, duration_ms=1.25
    )
    state = GraphState()
    mirror = StateMirror.of(default_serializer(), state)
    base = copy.deepcopy(mirror.encoded)
    state.history.append(("a", result))
    base, delta = _step(mirror, state, set(), base)
    entry = delta["append"][0][1][0]
    assert entry[:4] == ["a", 3, 2, "failure"]
    assert len(entry) <= 9
    assert _decoded(base).history[0] == ("a", result)


def test_an_unencodable_write_names_its_path() -> None:
    state = GraphState(data={"ok": 1})
    mirror = StateMirror.of(default_serializer(), state)
    state.data["bad"] = object()
    with pytest.raises(StateSerializationError, match=r"data\.bad"):
        mirror.update(state, {"bad"})
