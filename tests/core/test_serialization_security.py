"""Loading a stored state is safe: nothing is imported or called but allowed types, and bad
input only ever raises a located StateDecodeError (issue 6, items 1 and 6)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typing_extensions import TypedDict

from selectgraph import GraphState, Message, StateSerializationError, append
from selectgraph.core._errors import StateDecodeError, TypeNotAllowedError
from selectgraph.core._serialization import DEFAULT_MAX_DEPTH, StateSerializer, schema_types


class Mood(Enum):
    """An enum a schema field names."""

    CALM = "calm"
    ANGRY = "angry"


class Source(BaseModel):
    """A model nested inside the schema's models."""

    url: str


@dataclass
class Note:
    """A dataclass the schema names through a list."""

    text: str
    source: Source | None = None


class Finding(BaseModel):
    """A model the schema names through an optional field."""

    title: str
    score: float = 0.0
    sources: list[Source] = []


class Research(BaseModel):
    """A graph state schema."""

    topic: str = ""
    finding: Finding | None = None
    notes: Annotated[list[Note], append] = []
    moods: dict[str, Mood] = {}


class Plain(BaseModel):
    """A model nobody allowed."""

    a: int = 0


@dataclass
class Tree:
    """A dataclass that can be made to contain itself."""

    children: list[Any] = field(default_factory=list)


class Flags(TypedDict):
    """A TypedDict schema."""

    mood: Mood
    notes: list[Note]


def _payload(value: Any) -> dict[str, Any]:
    return {"data": {"x": value}}


# --------------------------------------------------------------- item 1: no code runs


def test_an_enum_tag_naming_os_system_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = _payload({"__sg__": "enum", "cls": "os:system", "v": f"touch {marker}"})

    with pytest.raises(TypeNotAllowedError) as info:
        GraphState.from_dict(payload)

    assert not marker.exists()
    assert info.value.path == "data.x"
    assert info.value.type_name == "os:system"
    assert "not allowed" in str(info.value)


@pytest.mark.parametrize("tag", ["enum", "model", "dataclass"])
@pytest.mark.parametrize("name", ["builtins:eval", "builtins:open", "os:popen", "builtins:exec"])
def test_no_tag_calls_a_builtin(tag: str, name: str) -> None:
    payload = _payload({"__sg__": tag, "cls": name, "v": {"source": "1/0"}})

    with pytest.raises(TypeNotAllowedError, match="not allowed"):
        GraphState.from_dict(payload)


def test_decoding_never_imports_the_named_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "sg_evil_module.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nclass Thing:\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    payload = _payload({"__sg__": "model", "cls": "sg_evil_module:Thing", "v": {}})

    with pytest.raises(TypeNotAllowedError):
        GraphState.from_dict(payload)

    assert "sg_evil_module" not in sys.modules
    assert not marker.exists()


def test_an_allowed_class_is_only_restored_under_its_own_tag() -> None:
    serializer = StateSerializer(allowed_types=[Mood, Plain])

    with pytest.raises(TypeNotAllowedError):
        serializer.decode({"__sg__": "model", "cls": f"{__name__}:Mood", "v": {}}, "v")
    with pytest.raises(TypeNotAllowedError):
        serializer.decode({"__sg__": "enum", "cls": f"{__name__}:Plain", "v": 1}, "v")
    with pytest.raises(TypeNotAllowedError):
        serializer.decode({"__sg__": "dataclass", "cls": f"{__name__}:Plain", "v": {}}, "v")


def test_a_dunder_attribute_path_is_just_an_unknown_name() -> None:
    name = f"{__name__}:Plain.__init__.__globals__"
    payload = _payload({"__sg__": "model", "cls": name, "v": {}})

    with pytest.raises(TypeNotAllowedError) as info:
        GraphState.from_dict(payload, allowed_types=[Plain])

    assert info.value.type_name == name


def test_nested_disallowed_type_error_names_its_path() -> None:
    state = GraphState(data={"items": [1, {"deep": (Plain(a=1),)}]})
    payload = json.loads(json.dumps(state.to_dict()))

    with pytest.raises(TypeNotAllowedError) as info:
        GraphState.from_dict(payload)

    assert info.value.path == "data.items[1].deep[0]"
    assert GraphState.from_dict(payload, allowed_types=[Plain]) == state


def test_allowed_types_round_trip() -> None:
    state = GraphState(data={"p": Plain(a=2), "m": Mood.ANGRY, "t": Tree([Tree()])})
    payload = json.loads(json.dumps(state.to_dict()))

    assert GraphState.from_dict(payload, allowed_types=[Plain, Mood, Tree]) == state


def test_library_types_are_allowed_by_default() -> None:
    state = GraphState(data={"message": Message.user("hi"), "role": Message.user("x").role})

    assert GraphState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_a_serializer_passed_in_carries_its_allow_list() -> None:
    serializer = StateSerializer()
    serializer.register_type(Plain)
    state = GraphState(data={"p": Plain(a=3)}, metadata={"mood": Mood.CALM})
    payload = state.to_dict(serializer=serializer)

    with pytest.raises(TypeNotAllowedError) as info:
        GraphState.from_dict(payload, serializer=serializer)
    assert info.value.path == "metadata.mood"

    restored = GraphState.from_dict(payload, serializer=serializer, allowed_types=[Mood])
    assert restored == state
    assert Mood not in serializer.allowed_types  # allowed_types= did not widen the serializer


def test_register_type_works_as_a_decorator() -> None:
    serializer = StateSerializer()

    @dataclass
    class Local:
        a: int

    assert serializer.register_type(Plain) is Plain
    with pytest.raises(TypeError, match="inside a function"):
        serializer.register_type(Local)


@pytest.mark.parametrize("bad", [len, object, int, 3, "os:system", Research.model_fields])
def test_only_enums_models_and_dataclasses_can_be_allowed(bad: Any) -> None:
    with pytest.raises(TypeError):
        StateSerializer(allowed_types=[bad])


def test_two_classes_with_one_name_cannot_both_be_allowed() -> None:
    serializer = StateSerializer(allowed_types=[Plain])
    impostor = type("Plain", (BaseModel,), {"__module__": __name__, "__qualname__": "Plain"})

    with pytest.raises(TypeError, match="already allowed"):
        serializer.register_type(impostor)


def test_allowing_returns_a_wider_copy() -> None:
    base = StateSerializer()

    wider = base.allowing(Plain)

    assert Plain in wider.allowed_types
    assert Plain not in base.allowed_types
    assert Message in wider.allowed_types


def test_schema_types_allowed_automatically() -> None:
    serializer = StateSerializer(state_schema=Research)
    value = Research(
        topic="t",
        finding=Finding(title="f", sources=[Source(url="u")]),
        notes=[Note("n", Source(url="v"))],
        moods={"a": Mood.CALM},
    )
    state = GraphState(data={"all": value, "note": Note("x")})

    restored = GraphState.from_dict(json.loads(json.dumps(state.to_dict())), serializer=serializer)

    assert restored == state
    assert {Research, Finding, Source, Note, Mood} <= serializer.allowed_types
    assert Plain not in serializer.allowed_types


def test_schema_types_of_a_typeddict_and_a_dataclass() -> None:
    assert set(schema_types(Flags)) == {Mood, Note, Source}
    assert set(schema_types(Note)) == {Note, Source}


def test_a_dataclass_payload_cannot_set_undeclared_attributes() -> None:
    payload = _payload({"__sg__": "dataclass", "cls": f"{__name__}:Tree", "v": {"__class__": 1}})

    with pytest.raises(StateDecodeError) as info:
        GraphState.from_dict(payload, allowed_types=[Tree])

    assert info.value.path == "data.x"
    assert "unknown fields" in str(info.value)


# ---------------------------------------------------- item 6: corrupt input, one error


def _tagged(tag: str, v: Any, **extra: Any) -> dict[str, Any]:
    return {"__sg__": tag, "v": v, **extra}


CORRUPT: list[tuple[Any, str]] = [
    ([], "state"),
    ({"data": []}, "data"),
    ({"metadata": "x"}, "metadata"),
    ({"messages": {}}, "messages"),
    ({"messages": [1]}, "messages[0]"),
    ({"messages": [{"role": "nobody"}]}, "messages[0]"),
    ({"history": [["a"]]}, "history[0]"),
    ({"history": [[1, 2]]}, "history[0]"),
    (
        {"history": [["a", {"node": 1, "step": 1, "visit": 1, "outcome": "success"}]]},
        "history[0].node",
    ),
    (
        {"history": [["a", {"node": "a", "step": "1", "visit": 1, "outcome": "success"}]]},
        "history[0].step",
    ),
    (
        {"history": [["a", {"node": "a", "step": 1, "visit": 1, "outcome": "??"}]]},
        "history[0].outcome",
    ),
    (
        {
            "history": [
                [
                    "a",
                    {
                        "node": "a",
                        "step": 1,
                        "visit": 1,
                        "outcome": "success",
                        "usage": {"calls": "x"},
                    },
                ]
            ]
        },
        "history[0].usage.calls",
    ),
    (
        {
            "history": [
                ["a", {"node": "a", "step": 1, "visit": 1, "outcome": "success", "output": [1]}]
            ]
        },
        "history[0].output",
    ),
    (
        {
            "history": [
                [
                    "a",
                    {
                        "node": "a",
                        "step": 1,
                        "visit": 1,
                        "outcome": "success",
                        "content": {"__sg__": "x"},
                    },
                ]
            ]
        },
        "history[0].content",
    ),
    ({"current_node": 5}, "current_node"),
    ({"errors": "x"}, "errors"),
    ({"errors": [1]}, "errors[0]"),
    (_payload(_tagged("bytes", "not base64!")), "data.x"),
    (_payload(_tagged("bytes", "QUJD=")), "data.x"),
    (_payload(_tagged("bytes", 5)), "data.x"),
    (_payload(_tagged("float", "1e5")), "data.x"),
    (_payload(_tagged("float", None)), "data.x"),
    (_payload(_tagged("float", ["inf"])), "data.x"),
    (_payload(_tagged("int", "xyz")), "data.x"),
    (_payload(_tagged("timedelta", [10**10, 0, 0])), "data.x"),
    (_payload(_tagged("timedelta", [1, 2])), "data.x"),
    (_payload(_tagged("timedelta", None)), "data.x"),
    (_payload(_tagged("datetime", "yesterday")), "data.x"),
    (_payload(_tagged("date", 20240101)), "data.x"),
    (_payload(_tagged("time", "25:00")), "data.x"),
    (_payload(_tagged("decimal", "one")), "data.x"),
    (_payload(_tagged("uuid", "zz")), "data.x"),
    (_payload(_tagged("path", None)), "data.x"),
    (_payload(_tagged("tuple", "abc")), "data.x"),
    (_payload(_tagged("set", [[1]])), "data.x"),
    (_payload(_tagged("frozenset", [{"a": 1}])), "data.x"),
    (_payload(_tagged("dict", [[1]])), "data.x"),
    (_payload(_tagged("dict", [[[1], 2]])), "data.x"),
    (_payload(_tagged("dict", {"a": 1})), "data.x"),
    (_payload(_tagged("dict", [[1, _tagged("nope", 0)]])), "data.x<entry 0>"),
    (_payload({"__sg__": ["tuple"], "v": []}), "data.x"),
    (_payload({"__sg__": "no-such-tag"}), "data.x"),
    (_payload({"__sg__": "model", "v": {}}), "data.x"),
    (_payload({"__sg__": "model", "cls": 3, "v": {}}), "data.x"),
    (_payload({"__sg__": "model", "cls": f"{__name__}:Plain", "v": {"a": "many"}}), "data.x"),
    (_payload({"__sg__": "model", "cls": f"{__name__}:Plain", "v": [1]}), "data.x"),
    (_payload({"__sg__": "dataclass", "cls": f"{__name__}:Note", "v": {}}), "data.x"),
    (_payload({"__sg__": "enum", "cls": f"{__name__}:Mood", "v": "bored"}), "data.x"),
    (_payload([1, {"y": _tagged("tuple", [1, _tagged("bytes", "%%")])}]), "data.x[1].y[1]"),
    (_payload({"k": {1, 2}}), "data.x.k"),
    (_payload({"k": object()}), "data.x.k"),
]


@pytest.mark.parametrize(("payload", "path"), CORRUPT, ids=[p for _, p in CORRUPT])
def test_corrupt_input_raises_one_located_error(payload: Any, path: str) -> None:
    with pytest.raises(StateDecodeError) as info:
        GraphState.from_dict(payload, allowed_types=[Plain, Note, Mood])

    assert info.value.path == path
    assert f"at {path}:" in str(info.value)


def test_invalid_base64_is_an_error_not_empty_bytes() -> None:
    with pytest.raises(StateDecodeError, match="bytes"):
        GraphState.from_dict(_payload(_tagged("bytes", "@@@@")))


def test_a_deeply_nested_payload_is_a_located_error_not_a_recursion_error() -> None:
    value: Any = 1
    for _ in range(20_000):
        value = [value]

    with pytest.raises(StateDecodeError, match=f"deeper than {DEFAULT_MAX_DEPTH}") as info:
        GraphState.from_dict(_payload(value))

    assert info.value.path.startswith("data.x[0][0]")


def test_a_payload_that_contains_itself_is_a_located_error() -> None:
    loop: list[Any] = [1]
    loop.append(loop)

    with pytest.raises(StateDecodeError, match="contains itself") as info:
        GraphState.from_dict(_payload(loop))

    assert info.value.path == "data.x[1]"


# ---------------------------------------------------------- item 6: to_dict limits


def test_to_dict_on_a_list_that_contains_itself_names_the_cycle() -> None:
    items: list[Any] = [1, 2]
    items.append(items)

    with pytest.raises(StateSerializationError) as info:
        GraphState(data={"items": items}).to_dict()

    assert info.value.path == "data.items[2]"
    assert "is data.items again" in str(info.value)
    assert "contains itself has no JSON form" in str(info.value)


def test_to_dict_on_a_dataclass_that_contains_itself_names_the_cycle() -> None:
    tree = Tree()
    tree.children.append({"up": tree})

    with pytest.raises(StateSerializationError) as info:
        GraphState(metadata={"tree": tree}).to_dict()

    assert info.value.path == "metadata.tree.children[0].up"


def test_to_dict_on_a_too_deeply_nested_value_is_a_located_error() -> None:
    value: Any = {}
    for _ in range(DEFAULT_MAX_DEPTH + 5):
        value = {"d": value}

    with pytest.raises(StateSerializationError, match="deeper than") as info:
        GraphState(data={"v": value}).to_dict()

    assert info.value.path.startswith("data.v.d.d.d")


def test_max_depth_is_configurable() -> None:
    shallow = StateSerializer(max_depth=2)

    assert shallow.encode([[1]], "v") == [[1]]
    with pytest.raises(StateSerializationError, match="deeper than 2"):
        shallow.encode([[[1]]], "v")
    with pytest.raises(StateDecodeError, match="deeper than 2"):
        shallow.decode([[[1]]], "v")
    with pytest.raises(ValueError, match="max_depth"):
        StateSerializer(max_depth=0)


@pytest.mark.parametrize(
    "value",
    [10**5000, -(10**5000), 2**20000 + 1, {10**4500: "key"}, {10**4500, 1}],
    ids=["positive", "negative", "power-of-two", "dict-key", "set-item"],
)
def test_huge_ints_survive_json(value: Any) -> None:
    state = GraphState(data={"v": value, "list": [value]})

    text = json.dumps(state.to_dict())  # fails with "Exceeds the limit (4300 digits)" if unsafe

    assert GraphState.from_dict(json.loads(text)) == state


def test_ordinary_ints_stay_plain_json_numbers() -> None:
    big = 10**3999

    assert GraphState(data={"v": big}).to_dict()["data"]["v"] == big


# ---------------------------------------------------------------- property test

_TAGS = [
    "float", "int", "tuple", "set", "frozenset", "dict", "bytes", "datetime", "date", "time",
    "timedelta", "decimal", "uuid", "path", "model", "dataclass", "enum", "nope",
]  # fmt: skip
_NAMES = [
    "os:system", "builtins:eval", "builtins:open", "subprocess:Popen", f"{__name__}:Plain",
    f"{__name__}:Note", f"{__name__}:Mood", f"{__name__}:Tree",
    "selectgraph.core._messages:Message", "selectgraph.core._messages:Role",
    "selectgraph.core._usage:Usage", "selectgraph._messages:Message", "no.such.module:X", ":", "",
]  # fmt: skip

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["inf", "nan", "QUJD", "2024-01-01", "1.5", "calm", "", "@@"])
)


def _tagged_of(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.builds(
        lambda tag, name, v, with_name: (
            {"__sg__": tag, "cls": name, "v": v} if with_name else {"__sg__": tag, "v": v}
        ),
        st.sampled_from(_TAGS),
        st.sampled_from(_NAMES) | st.integers(),
        children,
        st.booleans(),
    )


_json = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=4) | st.just("__sg__"), children, max_size=4)
        | _tagged_of(children)
    ),
    max_leaves=12,
)


def _load_error(payload: Any) -> StateDecodeError | None:
    try:
        GraphState.from_dict(payload, allowed_types=[Plain, Note, Mood, Tree, Source])
    except StateDecodeError as error:
        return error
    return None


# Real outcomes and usage fields, so that history entries get past their first check
# and the fields behind it are fed junk too (random text never spells "success").
_outcome = st.sampled_from(["success", "failure", "skipped"]) | _json
_usage = st.fixed_dictionaries(
    {},
    optional={
        **{name: st.integers(0, 3) | _json for name in ("input_tokens", "output_tokens", "calls")},
        "cost_usd": st.floats(0, 1) | _json,
        "unpriced_calls": _json,
    },
)

_state_payload = st.fixed_dictionaries(
    {},
    optional={
        "data": st.dictionaries(st.text(max_size=4), _json, max_size=3) | _json,
        "metadata": st.dictionaries(st.text(max_size=4), _json, max_size=3) | _json,
        "messages": st.lists(
            _json | st.fixed_dictionaries({"role": _json, "content": _json}), max_size=3
        ),
        "history": st.lists(
            st.lists(_json, max_size=3)
            | st.tuples(
                st.text(max_size=3),
                st.fixed_dictionaries(
                    {
                        "node": st.text(max_size=3) | _json,
                        "step": st.integers(0, 3) | _json,
                        "visit": st.integers(0, 3) | _json,
                        "outcome": _outcome,
                    },
                    optional={"output": _json, "content": _json, "usage": _usage},
                ),
            ).map(list),
            max_size=3,
        ),
        "errors": _json,
        "current_node": _json,
    },
)


# Replayable: derandomize draws the same examples on every run (a failure seen once is
# seen again, and the failing payload is printed), and the database is off so a run
# does not depend on an earlier one. The long run is sized to stay well under its
# timeout on a loaded two-core machine (about 10 s idle).
@pytest.mark.parametrize(
    "usage",
    [
        {"unpriced_calls": "x"},  # int("x"): a ValueError escaped
        {"unpriced_calls": [1]},  # int([1]): a TypeError escaped
        {"unpriced_calls": 1.5},
        {"calls": "2"},
        {"cost_usd": "free"},
    ],
)
def test_a_history_usage_field_of_the_wrong_type_is_a_decode_error(usage: dict[str, Any]) -> None:
    entry = {"node": "n", "step": 1, "visit": 1, "outcome": "success", "usage": usage}

    error = _load_error({"history": [["n", entry]]})

    assert error is not None
    assert error.path.startswith("history[0].")


_QUICK = settings(
    max_examples=150,
    database=None,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
_LONG = settings(_QUICK, max_examples=1500)


def _check_random_payload(payload: dict[str, Any]) -> None:
    error = _load_error(payload)  # anything but StateDecodeError escapes and fails the test

    assert error is None or error.path


@_QUICK
@given(_state_payload)
def test_random_payloads_raise_only_state_decode_error(payload: dict[str, Any]) -> None:
    _check_random_payload(payload)


@pytest.mark.slow
@pytest.mark.timeout(600)
@_LONG
@given(_state_payload)
def test_many_random_payloads_raise_only_state_decode_error(payload: dict[str, Any]) -> None:
    _check_random_payload(payload)


@settings(max_examples=150, database=None, deadline=None, derandomize=True, print_blob=True)
@given(st.data())
def test_corrupting_a_valid_payload_raises_only_state_decode_error(data: st.DataObject) -> None:
    state = GraphState(
        data={"t": (1, b"ab", {2}), "d": {1: dt.date(2024, 1, 1)}, "p": Plain(a=1)},
        metadata={"m": Mood.CALM, "n": Note("x", Source(url="u"))},
    )
    payload = json.loads(json.dumps(state.to_dict()))
    # Replace one nested value with junk.
    target = payload["data"] if data.draw(st.booleans()) else payload["metadata"]
    key = data.draw(st.sampled_from(sorted(target)))
    node = target[key]
    while isinstance(node, dict) and "v" in node and data.draw(st.booleans()):
        target, key, node = node, "v", node["v"]
    target[key] = data.draw(_json)

    error = _load_error(payload)

    assert error is None or error.path.startswith(("data.", "metadata."))
