"""GraphState and its JSON form: access helpers, to_dict/from_dict round trips, precise errors."""

from __future__ import annotations

import datetime as dt
import json
import math
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum, IntEnum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from selectgraph import (
    END,
    LAST_OUTPUT,
    AgentGraph,
    ErrorPolicy,
    GraphState,
    Message,
    NodeResult,
    Role,
    StateSerializationError,
    ToolCall,
    append,
)


class Color(Enum):
    """A plain enum."""

    RED = "red"
    BLUE = "blue"


class Level(IntEnum):
    """An int enum (== its int, but must come back as itself)."""

    LOW = 1
    HIGH = 2


class Finding(BaseModel):
    """A Pydantic model with nested and non-JSON fields."""

    title: str
    score: float = 0.0
    tags: tuple[str, ...] = ()
    seen: dt.datetime | None = None
    extra: dict[str, Any] = {}


@dataclass
class Run:
    """A dataclass holding another dataclass and a model."""

    when: Any
    label: str = ""
    finding: Finding | None = None
    children: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Point:
    """A frozen dataclass, usable in sets."""

    x: int
    y: int


class Aliased(BaseModel):
    """A model whose field is populated through an alias."""

    value: int = Field(alias="Value")


class Open(BaseModel):
    """A model that keeps extra fields."""

    model_config = ConfigDict(extra="allow")

    known: int = 0


@dataclass
class Derived:
    """A dataclass with a field computed in __post_init__."""

    base: int
    double: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.double = self.base * 2


ALLOWED = [Color, Level, Finding, Run, Point, Aliased, Open, Derived]
"""The test's own types; decoding restores only allowed classes."""


def _round_trip(state: GraphState) -> GraphState:
    """Through real JSON text, so anything JSON cannot carry would show."""
    text = json.dumps(state.to_dict(), allow_nan=False)
    return GraphState.from_dict(json.loads(text), allowed_types=ALLOWED)


def _value_round_trip(value: Any) -> Any:
    return _round_trip(GraphState(data={"v": value})).data["v"]


@pytest.fixture
def open_socket() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        yield sock
    finally:
        sock.close()


# ----------------------------------------------------------------- basics


def test_new_state_is_empty() -> None:
    state = GraphState()

    assert list(state.messages) == []
    assert dict(state.data) == {}
    assert list(state.history) == []
    assert dict(state.metadata) == {}
    assert list(state.errors) == []
    assert state.current_node is None


def test_new_states_do_not_share_containers() -> None:
    first, second = GraphState(), GraphState()

    first.data["k"] = 1
    first.messages.append(Message.user("hi"))
    first.metadata["m"] = 1

    assert dict(second.data) == {}
    assert list(second.messages) == []
    assert dict(second.metadata) == {}


def test_containers_made_on_first_read_are_the_states_own() -> None:
    state = GraphState()
    errors = state.errors  # made now, not when the state was

    assert state.errors is errors
    assert GraphState(errors=[]) == GraphState()
    state.errors.append({"node": "a"})
    assert GraphState().errors == []
    with pytest.raises(AttributeError, match="'GraphState' object has no attribute 'nope'"):
        state.nope  # type: ignore[attr-defined]  # noqa: B018


def test_a_property_that_fails_inside_says_what_it_missed() -> None:
    class Mine(GraphState):
        @property
        def summary(self) -> str:
            return self.dta  # type: ignore[attr-defined, no-any-return]

    with pytest.raises(AttributeError, match="'dta'"):
        Mine().summary  # noqa: B018


def test_from_prompt_starts_the_conversation_with_a_user_message() -> None:
    state = GraphState.from_prompt("Summarize", data={"topic": "AI"}, metadata={"req": "r1"})

    assert len(state.messages) == 1
    assert state.messages[0].role is Role.USER
    assert state.messages[0].text == "Summarize"
    assert state["topic"] == "AI"
    assert state.metadata["req"] == "r1"


def test_from_prompt_copies_the_callers_mappings() -> None:
    data = {"topic": "AI"}
    metadata = {"req": "r1"}

    state = GraphState.from_prompt("x", data=data, metadata=metadata)
    state.data["topic"] = "changed"
    state.metadata["req"] = "changed"

    assert data == {"topic": "AI"}
    assert metadata == {"req": "r1"}


def test_last_output_is_none_until_set() -> None:
    assert GraphState().last_output is None


def test_last_output_is_stored_under_the_reserved_key() -> None:
    state = GraphState()

    state.last_output = {"answer": 42}

    assert state.last_output == {"answer": 42}
    assert state.data[LAST_OUTPUT] == {"answer": 42}


def test_item_access_reads_and_writes_data() -> None:
    state = GraphState(data={"a": 1})

    state["b"] = 2

    assert state["a"] == 1
    assert state.data == {"a": 1, "b": 2}


def test_item_access_raises_key_error_for_a_missing_key() -> None:
    with pytest.raises(KeyError, match="'missing'"):
        GraphState()["missing"]


def test_get_returns_the_default_for_a_missing_key() -> None:
    state = GraphState(data={"a": None})

    assert state.get("a", "default") is None
    assert state.get("missing") is None
    assert state.get("missing", 5) == 5


def test_in_checks_data_keys() -> None:
    state = GraphState(data={"a": 1}, metadata={"m": 1})

    assert "a" in state
    assert "m" not in state


def test_state_is_not_iterable() -> None:
    with pytest.raises(TypeError, match=r"iterate over state\.data"):
        iter(GraphState())


def test_state_is_unhashable() -> None:
    with pytest.raises(TypeError):
        hash(GraphState())


def test_states_with_equal_contents_are_equal() -> None:
    assert GraphState(data={"a": [1]}) == GraphState(data={"a": [1]})
    assert GraphState(data={"a": [1]}) != GraphState(data={"a": [2]})
    assert GraphState(metadata={"m": 1}) != GraphState()


def test_snapshot_is_detached_at_the_top_level() -> None:
    state = GraphState.from_prompt("hi", data={"a": 1})

    copy = state.snapshot()
    copy.data["a"] = 2
    copy.messages.append(Message.user("more"))

    assert state["a"] == 1
    assert len(state.messages) == 1
    assert copy == GraphState(messages=[Message.user("hi"), Message.user("more")], data={"a": 2})


def test_repr_lists_data_keys() -> None:
    text = repr(GraphState(data={"b": 1, "a": 2}))

    assert "data keys=[a, b]" in text


# ------------------------------------------------------------ round trips

ROUND_TRIP_VALUES: list[Any] = [
    None,
    True,
    0,
    -12,
    3.25,
    "text",
    "",
    [1, [2, [3, []]]],
    {"a": {"b": {"c": [1, {"d": None}]}}},
    (1, "two", (3.0, None)),
    (),
    {1, 2, 3},
    set(),
    frozenset({"a", "b"}),
    {frozenset({1, 2}), frozenset()},
    {(1, 2), (3, 4)},
    b"\x00\xffbytes",
    b"",
    dt.datetime(2024, 5, 17, 13, 45, 1, 123456),
    dt.datetime(2024, 5, 17, 13, 45, tzinfo=dt.timezone(dt.timedelta(hours=-3))),
    dt.date(2024, 2, 29),
    dt.time(23, 59, 59, 999999),
    dt.timedelta(days=2, seconds=5, microseconds=7),
    Decimal("1.10"),
    Decimal("-0.000001"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    math.inf,
    -math.inf,
    {1: "one", 2: {3: "three"}},
    {(1, 2): "tuple key", None: "none key", True: "bool key"},
    {1.5: "float key", "s": "str key"},
    Path("/tmp/some/file.txt"),
    Finding(title="t", score=0.5, tags=("a", "b"), seen=dt.datetime(2024, 1, 1)),
    Run(when=dt.date(2024, 1, 2), label="r", finding=Finding(title="f")),
    Run(when=None, children=[Run(when=(1, 2)), {"k": {1, 2}}]),
    Point(1, 2),
    {Point(1, 2), Point(3, 4)},
    Color.BLUE,
    Level.HIGH,
    Role.ASSISTANT,
    [Color.RED, {"level": Level.LOW}],
    Message.user("a message in data"),
]


@pytest.mark.parametrize("value", ROUND_TRIP_VALUES, ids=lambda v: type(v).__name__)
def test_value_survives_a_json_round_trip(value: Any) -> None:
    restored = _value_round_trip(value)

    assert restored == value
    assert type(restored) is type(value)


def test_to_dict_is_strict_json() -> None:
    state = GraphState(data={f"v{i}": v for i, v in enumerate(ROUND_TRIP_VALUES)})

    text = json.dumps(state.to_dict(), allow_nan=False)

    assert isinstance(text, str)
    assert GraphState.from_dict(json.loads(text), allowed_types=ALLOWED) == state


def test_nan_survives_a_round_trip() -> None:
    restored = _value_round_trip([math.nan, {"x": math.nan}])

    assert math.isnan(restored[0])
    assert math.isnan(restored[1]["x"])


def test_negative_zero_keeps_its_sign() -> None:
    assert math.copysign(1.0, _value_round_trip(-0.0)) == -1.0


def test_int_keys_stay_ints_not_strings() -> None:
    restored = _value_round_trip({1: "a", "1": "b"})

    assert restored == {1: "a", "1": "b"}


def test_bool_int_and_float_items_keep_their_types() -> None:
    restored = _value_round_trip([True, 1, 1.0])

    assert [type(item) for item in restored] == [bool, int, float]


def test_decimal_keeps_its_exponent() -> None:
    assert str(_value_round_trip(Decimal("1.10"))) == "1.10"


def test_nested_containers_keep_their_kinds() -> None:
    restored = _value_round_trip({"t": (1, [2, (3,)]), "s": {"f": frozenset({(1,)})}})

    assert type(restored["t"]) is tuple
    assert type(restored["t"][1]) is list
    assert type(restored["t"][1][1]) is tuple
    assert type(restored["s"]["f"]) is frozenset


def test_messages_with_tool_calls_survive_a_round_trip() -> None:
    call = ToolCall(id="c1", name="search", arguments={"q": "x", "n": 2})
    state = GraphState(
        messages=[
            Message.system("be brief"),
            Message.user({"structured": [1, 2]}),
            Message.assistant(None, tool_calls=(call,), name="agent"),
            Message.tool("c1", "result", name="search", is_error=True),
        ]
    )

    assert _round_trip(state) == state


def test_metadata_errors_and_current_node_survive_a_round_trip() -> None:
    state = GraphState(
        metadata={"when": dt.datetime(2024, 1, 1), "ids": (1, 2)},
        errors=[{"node": "a", "error": "boom", "attempts": 2}],
        current_node="a",
    )

    restored = _round_trip(state)

    assert restored == state
    assert restored.current_node == "a"
    assert type(restored.metadata["ids"]) is tuple


def test_reserved_key_at_the_top_level_of_data_is_kept_as_is() -> None:
    state = GraphState(data={"__sg__": {"a": 1}, "x": 1})

    assert _round_trip(state) == state


def test_reserved_key_in_a_dict_with_non_string_keys_is_kept_as_is() -> None:
    value = {1: "one", "__sg__": "tuple"}

    assert _value_round_trip(value) == value


def _run_state() -> GraphState:
    def ask(state: GraphState) -> dict[str, Any]:
        state.messages.append(Message.assistant("thinking", name="ask"))
        state.last_output = Finding(title="answer", tags=("x",))
        return {"log": ["ask"], "seen": {1, 2}}

    def fail(state: GraphState) -> dict[str, Any]:
        raise ValueError("boom")

    def finish(state: GraphState) -> dict[str, Any]:
        return {"log": ["finish"], "when": dt.datetime(2024, 1, 1), "point": Point(1, 2)}

    graph = AgentGraph("g", reducers={"log": append}, error_policy=ErrorPolicy.SKIP)
    graph.add_node("ask", ask, next_node="fail")
    graph.add_node("fail", fail, next_node="finish")
    graph.add_node("finish", finish, next_node=END)
    graph.set_entry("ask")
    return graph.run("question", run_id="r1").state


def test_state_from_a_real_run_survives_a_round_trip() -> None:
    state = _run_state()

    restored = _round_trip(state)

    assert restored == state
    assert restored.data["log"] == ["ask", "finish"]
    assert [m.text for m in restored.messages] == ["question", "thinking"]


def test_history_from_a_real_run_comes_back_as_node_results() -> None:
    restored = _round_trip(_run_state())

    results = [result for _, result in restored.history]
    assert all(isinstance(result, NodeResult) for result in results)
    assert [(r.node, r.outcome) for r in results] == [
        ("ask", "success"),
        ("fail", "skipped"),
        ("finish", "success"),
    ]
    assert results[0].content == Finding(title="answer", tags=("x",))
    assert results[1].error == "ValueError: boom"


def test_errors_from_a_real_run_survive_a_round_trip() -> None:
    restored = _round_trip(_run_state())

    assert len(restored.errors) == 1
    assert restored.errors[0]["node"] == "fail"
    assert restored.errors[0]["error"] == "boom"


def test_large_timedelta_survives_a_round_trip() -> None:
    value = dt.timedelta(days=999_999, microseconds=1)

    assert _value_round_trip(value) == value


def test_model_with_an_aliased_field_survives_a_round_trip() -> None:
    value = Aliased(Value=3)

    assert _value_round_trip(value) == value


def test_model_extra_fields_survive_a_round_trip() -> None:
    value = Open(known=1, surprise="kept?")

    assert _value_round_trip(value) == value


def test_dataclass_with_an_init_false_field_survives_a_round_trip() -> None:
    value = Derived(3)

    assert _value_round_trip(value) == value


# ------------------------------------------------------------ errors, paths


def test_unserializable_value_error_names_its_path_in_a_nested_dataclass() -> None:
    results = [1, 2, Run(when=lambda: None)]
    state = GraphState(data={"results": results})

    with pytest.raises(StateSerializationError) as info:
        state.to_dict()

    assert info.value.path == "data.results[2].when"
    assert "data.results[2].when" in str(info.value)
    assert "function" in str(info.value)


def test_unserializable_metadata_error_names_its_path() -> None:
    state = GraphState(data={"fine": 1}, metadata={"x": lambda: None})

    with pytest.raises(StateSerializationError) as info:
        state.to_dict()

    assert info.value.path == "metadata.x"


def test_socket_in_state_is_an_error_naming_its_path(open_socket: socket.socket) -> None:
    state = GraphState(data={"conn": {"sock": open_socket}})

    with pytest.raises(StateSerializationError) as info:
        state.to_dict()

    assert info.value.path == "data.conn.sock"
    assert "socket" in str(info.value)


def test_instance_of_a_class_defined_in_a_function_is_an_error() -> None:
    class Local:
        pass

    state = GraphState(data={"items": [Local()]})

    with pytest.raises(StateSerializationError) as info:
        state.to_dict()

    assert info.value.path == "data.items[0]"
    assert "Local" in str(info.value)


def test_dataclass_defined_in_a_function_is_an_error_saying_why() -> None:
    @dataclass
    class LocalRecord:
        a: int

    state = GraphState(data={"rec": LocalRecord(1)})

    with pytest.raises(StateSerializationError) as info:
        state.to_dict()

    assert info.value.path == "data.rec"
    assert "module level" in str(info.value)


def test_model_defined_in_a_function_is_an_error_saying_why() -> None:
    class LocalModel(BaseModel):
        a: int = 1

    with pytest.raises(StateSerializationError, match="module level") as info:
        GraphState(metadata={"m": LocalModel()}).to_dict()

    assert info.value.path == "metadata.m"


def test_unserializable_dict_key_is_an_error_naming_the_dict() -> None:
    state = GraphState(data={"table": {1: "ok", object(): "bad"}})

    with pytest.raises(StateSerializationError) as info:
        state.to_dict()

    assert info.value.path.startswith("data.table<key ")


def test_unserializable_value_under_an_int_key_names_the_key() -> None:
    state = GraphState(data={"table": {1: "ok", 2: print}})

    with pytest.raises(StateSerializationError) as info:
        state.to_dict()

    assert info.value.path == "data.table[2]"


def test_unserializable_history_output_names_its_path() -> None:
    result = NodeResult(node="n", step=1, visit=1, outcome="success", output={"k": [1, print]})
    state = GraphState(history=[("n", result)])

    with pytest.raises(StateSerializationError) as info:
        state.to_dict()

    assert info.value.path == "history[0].output.k[1]"


def test_a_class_object_in_state_is_an_error() -> None:
    with pytest.raises(StateSerializationError) as info:
        GraphState(data={"kind": Finding}).to_dict()

    assert info.value.path == "data.kind"


def test_reserved_key_in_a_nested_dict_is_an_error_naming_it() -> None:
    state = GraphState(data={"payload": [{"ok": 1}, {"__sg__": "tuple", "v": [1]}]})

    with pytest.raises(StateSerializationError) as info:
        state.to_dict()

    assert info.value.path == "data.payload[1]"
    assert "'__sg__' is reserved" in str(info.value)


def test_reserved_key_in_metadata_values_is_an_error() -> None:
    with pytest.raises(StateSerializationError) as info:
        GraphState(metadata={"m": {"__sg__": 1}}).to_dict()

    assert info.value.path == "metadata.m"


def test_reserved_key_error_leaves_the_state_unchanged() -> None:
    payload = {"__sg__": "set", "v": [1]}
    state = GraphState(data={"payload": payload})

    with pytest.raises(StateSerializationError):
        state.to_dict()

    assert state.data["payload"] is payload
    assert payload == {"__sg__": "set", "v": [1]}


def test_unknown_tag_in_a_payload_is_an_error() -> None:
    payload = {"data": {"x": {"__sg__": "no-such-tag", "v": 1}}}

    with pytest.raises(StateSerializationError, match="unknown tag 'no-such-tag'"):
        GraphState.from_dict(payload)
