"""Fingerprints: structural hashes consistent with ==, and their O(update) incremental forms."""

from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from selectgraph import END, AgentGraph, GraphState
from selectgraph.state._fingerprint import (
    MOD,
    StateFingerprint,
    dict_merge_fingerprint,
    fingerprint,
    key_weight,
    list_drop_front_fingerprint,
    list_extend_fingerprint,
    list_replace_fingerprint,
)


class Point(BaseModel):
    """A Pydantic model with nested structure."""

    x: int
    tags: list[str] = []


class OtherPoint(BaseModel):
    """Same fields as Point, different class."""

    x: int
    tags: list[str] = []


@dataclass
class Box:
    """A dataclass with nested structure."""

    label: str
    items: list[Any]


@dataclass
class Tagged:
    """A dataclass with a field that == ignores."""

    value: int
    note: str = field(default="", compare=False)


class Pair(NamedTuple):
    """A tuple subclass."""

    left: int
    right: int


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.binary(max_size=4),
)
_HASHABLE = st.recursive(
    _SCALARS, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=6
)
_VALUES = st.recursive(
    _SCALARS | _HASHABLE,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3) | st.integers(-5, 5), inner, max_size=4),
        st.sets(_HASHABLE, max_size=4),
        st.builds(Box, st.text(max_size=3), st.lists(inner, max_size=3)),
    ),
    max_leaves=12,
)
_ITEM = st.one_of(
    _SCALARS,
    st.tuples(st.integers(-3, 3), st.text(max_size=2)),
    st.lists(st.integers(-3, 3), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(-3, 3), max_size=2),
)
_ITEMS = st.lists(_ITEM, max_size=6)


def _equal_by_another_route(value: Any) -> Any:
    """A value == ``value`` built differently: dicts reversed, set kinds swapped, ints as floats."""
    if type(value) is int and abs(value) < 2**52:
        return float(value)
    if type(value) is list:
        return [_equal_by_another_route(item) for item in value]
    if type(value) is tuple:
        return tuple(_equal_by_another_route(item) for item in value)
    if type(value) is dict:
        return {k: _equal_by_another_route(v) for k, v in reversed(list(value.items()))}
    if type(value) is set:
        return frozenset(value)  # set({..}) == frozenset({..})
    if type(value) is frozenset:
        return set(value)
    if isinstance(value, Box):
        return Box(value.label, _equal_by_another_route(value.items))
    return copy.deepcopy(value)


# ------------------------------------------------------------------ fingerprint


@settings(max_examples=80, database=None, deadline=None)
@given(_VALUES)
def test_fingerprint_is_equal_for_equal_values_built_differently(value: Any) -> None:
    other = _equal_by_another_route(value)

    assert other == value
    assert fingerprint(other) == fingerprint(value)


@settings(max_examples=50, database=None, deadline=None)
@given(_VALUES)
def test_fingerprint_is_a_value_in_the_field(value: Any) -> None:
    assert 0 <= fingerprint(value) < MOD


def test_list_tuple_and_set_of_the_same_items_differ() -> None:
    prints = {fingerprint([1, 2]), fingerprint((1, 2)), fingerprint({1, 2})}

    assert len(prints) == 3


def test_empty_containers_and_none_all_differ() -> None:
    values: list[Any] = [[], (), set(), {}, None, 0]

    prints = {fingerprint(v) for v in values}

    assert len(prints) == 6


def test_set_and_frozenset_with_equal_items_match() -> None:
    assert fingerprint({1, "a"}) == fingerprint(frozenset({"a", 1}))


def test_list_order_matters() -> None:
    assert fingerprint([1, 2]) != fingerprint([2, 1])


def test_dict_insertion_order_does_not_matter() -> None:
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})


def test_dict_key_and_value_are_bound_together() -> None:
    # Int keys: no hash randomization, so this pair collides on every run.
    assert fingerprint({1: 1, 2: 6}) != fingerprint({1: 6, 2: 1})


def test_sets_with_the_same_item_sum_differ() -> None:
    assert fingerprint({1, 4}) != fingerprint({2, 3})


def test_loop_detection_does_not_fire_on_a_state_that_only_collides() -> None:
    def narrow(state: GraphState) -> dict[str, Any]:
        low, high = min(state["s"]), max(state["s"])
        return {"s": {low + 1, high - 1}}

    graph = AgentGraph("narrow")
    graph.add_node("narrow", narrow)
    graph.add_conditional_edge("narrow", lambda st: END if min(st["s"]) >= 4 else "narrow")
    graph.set_entry("narrow")

    assert graph.run({"s": {0, 9}}).state["s"] == {4, 5}


def test_nested_change_changes_the_fingerprint() -> None:
    before = {"runs": [{"id": 1, "tags": ("x", "y")}]}
    after = {"runs": [{"id": 1, "tags": ("x", "z")}]}

    assert fingerprint(before) != fingerprint(after)


def test_equal_pydantic_models_match() -> None:
    assert fingerprint(Point(x=1, tags=["a"])) == fingerprint(Point(x=1, tags=["a"]))


def test_pydantic_models_with_different_fields_differ() -> None:
    assert fingerprint(Point(x=1, tags=["a"])) != fingerprint(Point(x=1, tags=["b"]))


def test_pydantic_models_of_different_classes_differ() -> None:
    assert Point(x=1) != OtherPoint(x=1)  # type: ignore[comparison-overlap]
    assert fingerprint(Point(x=1)) != fingerprint(OtherPoint(x=1))


def test_equal_dataclasses_match() -> None:
    assert fingerprint(Box("a", [1, (2, 3)])) == fingerprint(Box("a", [1, (2, 3)]))


def test_dataclasses_with_different_fields_differ() -> None:
    assert fingerprint(Box("a", [1])) != fingerprint(Box("a", [2]))


def test_numbers_equal_across_types_match() -> None:
    assert fingerprint([1, True, 2.0]) == fingerprint([1.0, 1, 2])


def test_ordered_dict_matches_an_equal_dict() -> None:
    assert OrderedDict(a=1) == {"a": 1}
    assert fingerprint(OrderedDict(a=1)) == fingerprint({"a": 1})


def test_namedtuple_matches_an_equal_tuple() -> None:
    assert Pair(1, 2) == (1, 2)
    assert fingerprint(Pair(1, 2)) == fingerprint((1, 2))


def test_dataclasses_equal_under_eq_match() -> None:
    assert Tagged(1, "x") == Tagged(1, "y")
    assert fingerprint(Tagged(1, "x")) == fingerprint(Tagged(1, "y"))


@pytest.mark.parametrize(
    "value",
    [
        [1, [2, [3, {"k": (4, frozenset({5}))}]]],
        {"model": Point(x=2, tags=["t"]), "box": Box("b", [{"a": 1}])},
        ({"x": [1, 2]}, {3, 4}),
    ],
)
def test_deep_copies_of_nested_values_match(value: Any) -> None:
    assert fingerprint(copy.deepcopy(value)) == fingerprint(value)


# --------------------------------------------------------- incremental helpers


@settings(max_examples=80, database=None, deadline=None)
@given(_ITEMS, _ITEMS)
def test_list_extend_fingerprint_equals_recomputing(items: list[Any], more: list[Any]) -> None:
    assert list_extend_fingerprint(fingerprint(items), more) == fingerprint(items + more)


@settings(max_examples=100, database=None, deadline=None)
@given(_ITEMS, _ITEM)
def test_list_extend_fingerprint_by_one_item_equals_recomputing(
    items: list[Any], item: Any
) -> None:
    assert list_extend_fingerprint(fingerprint(items), [item]) == fingerprint([*items, item])


@settings(max_examples=80, database=None, deadline=None)
@given(_ITEMS, st.integers(0, 6))
def test_list_drop_front_fingerprint_equals_recomputing(items: list[Any], drop: int) -> None:
    drop = min(drop, len(items))

    incremental = list_drop_front_fingerprint(fingerprint(items), items[:drop], len(items))

    assert incremental == fingerprint(items[drop:])


@settings(max_examples=80, database=None, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=6), st.data())
def test_list_replace_fingerprint_equals_recomputing(items: list[Any], data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(items) - 1))
    new = data.draw(_ITEM)
    replaced = [*items[:index], new, *items[index + 1 :]]

    incremental = list_replace_fingerprint(fingerprint(items), index, items[index], new, len(items))

    assert incremental == fingerprint(replaced)


_DICTS = st.dictionaries(st.text(max_size=3) | st.integers(-3, 3), _ITEM, max_size=5)


@settings(max_examples=80, database=None, deadline=None)
@given(_DICTS, _DICTS)
def test_dict_merge_fingerprint_equals_recomputing(
    current: dict[Any, Any], update: dict[Any, Any]
) -> None:
    incremental = dict_merge_fingerprint(fingerprint(current), current, update)

    assert incremental == fingerprint({**current, **update})


def test_dict_merge_fingerprint_handles_overwritten_keys() -> None:
    current = {"a": 1, "b": [1, 2]}
    update = {"b": [3], "c": None}

    incremental = dict_merge_fingerprint(fingerprint(current), current, update)

    assert incremental == fingerprint({"a": 1, "b": [3], "c": None})


def test_incremental_helpers_chain_like_a_bounded_list() -> None:
    items: list[Any] = [1, 2, 3]
    fp = fingerprint(items)

    fp = list_extend_fingerprint(fp, [4, 5])
    fp = list_drop_front_fingerprint(fp, [1, 2], 5)
    fp = list_replace_fingerprint(fp, 0, 3, "three", 3)

    assert fp == fingerprint(["three", 4, 5])


# ----------------------------------------------------------- StateFingerprint


def test_state_fingerprint_starts_at_zero() -> None:
    assert StateFingerprint().total == 0


def test_state_fingerprint_changes_when_a_key_changes() -> None:
    sf = StateFingerprint()
    start = sf.of("a", True)

    sf.set("a", start, fingerprint([1]))

    assert sf.total != 0
    assert sf.of("a", True) == fingerprint([1])


def test_state_fingerprint_returns_to_zero_when_a_key_returns_to_its_initial_token() -> None:
    sf = StateFingerprint()
    start = sf.of("a", True)
    sf.set("a", start, 123)

    sf.set("a", 123, start)

    assert sf.total == 0


def test_state_fingerprint_returns_to_zero_when_every_key_returns() -> None:
    sf = StateFingerprint()
    starts = {key: sf.of(key, key != "new") for key in ("a", "b", "new")}
    for step, key in enumerate(starts, start=1):
        sf.set(key, starts[key], fingerprint(step))
    assert sf.total != 0

    for step, key in enumerate(starts, start=1):
        sf.set(key, fingerprint(step), starts[key])
        if key != "new":
            assert sf.total != 0

    assert sf.total == 0


def test_state_fingerprint_is_order_independent_across_keys() -> None:
    one, two = StateFingerprint(), StateFingerprint()

    one.set("a", one.of("a", True), 10)
    one.set("b", one.of("b", True), 20)
    two.set("b", two.of("b", True), 20)
    two.set("a", two.of("a", True), 10)

    assert one.total == two.total


def test_state_fingerprint_same_change_on_different_keys_differs() -> None:
    one, two = StateFingerprint(), StateFingerprint()

    one.set("a", one.of("a", True), 10)
    two.set("b", two.of("b", True), 10)

    assert one.total != two.total


def test_state_fingerprint_setting_an_unchanged_value_keeps_the_total() -> None:
    sf = StateFingerprint()
    sf.set("a", sf.of("a", True), 5)
    total = sf.total

    sf.set("a", 5, 5)

    assert sf.total == total


def test_state_fingerprint_absent_token_differs_from_present_token() -> None:
    sf = StateFingerprint()

    assert sf.absent("a") == sf.of("a", False)
    assert sf.of("a", False) != sf.of("a", True)


def test_state_fingerprint_tokens_are_stable_within_a_process() -> None:
    assert StateFingerprint().initial("k", True) == StateFingerprint().initial("k", True)


@pytest.mark.parametrize("key", ["a", "b", "", "__last_output__", "x" * 100])
def test_key_weight_is_odd_and_nonzero(key: str) -> None:
    weight = key_weight(key)

    assert weight % 2 == 1
    assert 0 < weight < MOD + 1
