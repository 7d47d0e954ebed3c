"""Reducers: the built-in merge rules as pure functions, and the engine's two-phase merge."""

from __future__ import annotations

import copy
import operator
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from selectgraph import (
    END,
    AgentGraph,
    GraphBuildError,
    GraphState,
    Reducer,
    ReducerConfigurationError,
    ReducerError,
    append,
    bounded_append,
    concat_flatten,
    dedupe_append,
    goto,
    last_write_wins,
    merge,
    merge_all,
    merge_by_key,
    reducer,
)
from selectgraph.state._fingerprint import fingerprint
from selectgraph.state._reducers import MISSING, as_reducer

Update = dict[str, Any]


@dataclass(frozen=True)
class Doc:
    """A record with an attribute key (for key="id" on objects)."""

    id: int
    text: str


def _returning(update: Update) -> Callable[[GraphState], Update]:
    def node(state: GraphState) -> Update:
        return update

    return node


def _chain(reducers: dict[str, Any], *updates: Update) -> AgentGraph:
    """A linear graph whose i-th node returns ``updates[i]``."""
    return AgentGraph.chain(
        *(_returning(u) for u in updates),
        names=[f"n{i}" for i in range(len(updates))],
        reducers=reducers,
    )


def _fold(red: Reducer, start: Any, updates: list[Any]) -> Any:
    value = start
    for item in updates:
        value = red(value, item)
    return value


def _loop_graph(red: Reducer) -> AgentGraph:
    """One node revisited once per entry of ``state["ops"]``.

    An op is ``("update", v)`` (returned, so merged through the reducer),
    ``("assign", v)`` (``state.data["k"] = v`` through the view) or
    ``("inplace", item)`` (``state.data["k"].append(item)`` through the view).
    """

    def step(state: GraphState) -> Update:
        i: int = state["i"]
        kind, value = state["ops"][i]
        if kind == "assign":
            state.data["k"] = list(value)
        elif kind == "inplace":
            state.data.setdefault("k", []).append(value)
        else:
            return {"k": value, "i": i + 1}
        return {"i": i + 1}

    graph = AgentGraph("loop", reducers={"k": red}, max_steps=None)
    graph.add_node("step", step)
    graph.add_edge("step", "step", condition="i < n")
    graph.add_edge("step", END)
    graph.set_entry("step")
    return graph


def _model(red: Reducer, start: Any, ops: list[tuple[str, Any]]) -> Any:
    """What ``_loop_graph`` should produce, computed with the pure reducer."""
    value = start
    for kind, item in ops:
        if kind == "assign":
            value = list(item)
        elif kind == "inplace":
            value = [*(value or []), item]
        else:
            value = red(value, item)
    return value


def _run_ops(red: Reducer, start: Any, ops: list[tuple[str, Any]]) -> GraphState:
    data: dict[str, Any] = {"i": 0, "n": len(ops), "ops": ops}
    if start is not None:
        data["k"] = start
    return _loop_graph(red).run(data).state


# --------------------------------------------------------------- last_write_wins


def test_last_write_wins_returns_the_update() -> None:
    assert last_write_wins([1, 2], {"new": True}) == {"new": True}


def test_last_write_wins_accepts_a_missing_current_value() -> None:
    assert last_write_wins(None, 3) == 3


# ------------------------------------------------------------------------ append


def test_append_extends_current_list() -> None:
    assert append(["a", "b"], ["c", "d"]) == ["a", "b", "c", "d"]


def test_append_does_not_mutate_its_inputs() -> None:
    current, update = ["a"], ["b"]

    merged = append(current, update)

    assert current == ["a"]
    assert update == ["b"]
    assert merged is not current
    assert merged is not update


def test_append_treats_a_missing_current_value_as_empty() -> None:
    assert append(None, ["a"]) == ["a"]


def test_append_returns_a_list_when_given_tuples() -> None:
    assert append(("a",), ("b",)) == ["a", "b"]


def test_append_rejects_a_non_list_update_and_suggests_wrapping_it() -> None:
    with pytest.raises(TypeError) as info:
        append(["a"], 5)

    message = str(info.value)
    assert "append needs a list as the update" in message
    assert "int 5" in message
    assert "[item]" in message


def test_append_rejects_a_string_update() -> None:
    with pytest.raises(TypeError, match="append needs a list as the update, got str 'abc'"):
        append([], "abc")


def test_append_rejects_a_non_list_current_value() -> None:
    with pytest.raises(TypeError, match="append needs a list as the current value, got dict"):
        append({"a": 1}, ["b"])


# ------------------------------------------------------------------------- merge


def test_merge_combines_dicts_with_the_update_winning() -> None:
    assert merge({"a": 1, "b": 1}, {"b": 2, "c": 3}) == {"a": 1, "b": 2, "c": 3}


def test_merge_is_shallow() -> None:
    assert merge({"cfg": {"x": 1, "y": 1}}, {"cfg": {"y": 2}}) == {"cfg": {"y": 2}}


def test_merge_does_not_mutate_its_inputs() -> None:
    current, update = {"a": 1}, {"b": 2}

    merged = merge(current, update)

    assert current == {"a": 1}
    assert update == {"b": 2}
    assert merged is not current


def test_merge_treats_a_missing_current_value_as_empty() -> None:
    assert merge(None, {"a": 1}) == {"a": 1}


def test_merge_rejects_a_non_mapping_update() -> None:
    with pytest.raises(TypeError, match=r"merge needs a mapping as the update, got list \[1\]"):
        merge({}, [1])


def test_merge_rejects_a_non_mapping_current_value() -> None:
    with pytest.raises(TypeError, match="merge needs a mapping as the current value, got str"):
        merge("text", {"a": 1})


# ---------------------------------------------------------------- concat_flatten


def test_concat_flatten_extends_with_the_items_of_each_group() -> None:
    assert concat_flatten([0], [[1, 2], [], (3,)]) == [0, 1, 2, 3]


def test_concat_flatten_does_not_mutate_its_inputs() -> None:
    current, update = [0], [[1], [2]]

    concat_flatten(current, update)

    assert current == [0]
    assert update == [[1], [2]]


def test_concat_flatten_rejects_a_group_that_is_not_a_list_naming_its_index() -> None:
    with pytest.raises(TypeError, match=r"list of lists; update\[1\] is int 2"):
        concat_flatten([], [[1], 2])


def test_concat_flatten_rejects_a_non_list_update() -> None:
    with pytest.raises(TypeError, match="concat_flatten needs a list as the update"):
        concat_flatten([], {"a": 1})


# --------------------------------------------------------------------- merge_all


def test_merge_all_folds_dicts_with_later_ones_winning() -> None:
    assert merge_all({"a": 0}, [{"a": 1, "b": 1}, {"b": 2}]) == {"a": 1, "b": 2}


def test_merge_all_does_not_mutate_its_inputs() -> None:
    current, parts = {"a": 0}, [{"a": 1}, {"b": 2}]

    merge_all(current, parts)

    assert current == {"a": 0}
    assert parts == [{"a": 1}, {"b": 2}]


def test_merge_all_treats_a_missing_current_value_as_empty() -> None:
    assert merge_all(None, [{"a": 1}]) == {"a": 1}


def test_merge_all_rejects_a_part_that_is_not_a_mapping_naming_its_index() -> None:
    with pytest.raises(TypeError, match=r"list of mappings; update\[1\] is int 3"):
        merge_all({}, [{}, 3])


def test_merge_all_rejects_a_single_dict_as_the_update() -> None:
    with pytest.raises(TypeError, match="merge_all needs a list as the update, got dict"):
        merge_all({}, {"a": 1})


# ---------------------------------------------------------------- bounded_append


def test_bounded_append_keeps_the_newest_items() -> None:
    assert bounded_append(3)([1, 2], [3, 4]) == [2, 3, 4]


def test_bounded_append_under_the_limit_keeps_everything() -> None:
    assert bounded_append(5)([1], [2]) == [1, 2]


def test_bounded_append_keeps_the_tail_of_an_update_longer_than_the_limit() -> None:
    assert bounded_append(2)(None, [1, 2, 3, 4]) == [3, 4]


def test_bounded_append_does_not_mutate_its_inputs() -> None:
    current, update = [1, 2, 3], [4]

    bounded_append(2)(current, update)

    assert current == [1, 2, 3]
    assert update == [4]


def test_bounded_append_empty_update_leaves_an_overlong_list_alone() -> None:
    # The bound applies when items are added (OpenArmature fixture 034).
    assert bounded_append(2)([1, 2, 3], []) == [1, 2, 3]


@pytest.mark.parametrize("max_len", [0, -1, 1.5, True, "3", None])
def test_bounded_append_rejects_an_invalid_max_len(max_len: Any) -> None:
    with pytest.raises(ReducerConfigurationError) as info:
        bounded_append(max_len)

    assert info.value.categories == ["reducer_configuration_invalid"]
    assert f"max_len={max_len!r}" in str(info.value)
    assert "integer >= 1" in str(info.value)


def test_bounded_append_name_shows_its_limit() -> None:
    assert bounded_append(4).name == "bounded_append(max_len=4)"


# ----------------------------------------------------------------- dedupe_append


def test_dedupe_append_skips_items_already_present() -> None:
    assert dedupe_append()(["a", "b"], ["b", "c"]) == ["a", "b", "c"]


def test_dedupe_append_keeps_the_first_occurrence_within_one_update() -> None:
    assert dedupe_append()([], ["x", "y", "x"]) == ["x", "y"]


def test_dedupe_append_with_a_callable_key() -> None:
    merged = dedupe_append(key=str.lower)(["Apple"], ["APPLE", "pear", "Pear"])

    assert merged == ["Apple", "pear"]


def test_dedupe_append_with_a_field_name_reads_dict_keys() -> None:
    current = [{"id": 1, "v": "old"}]

    merged = dedupe_append(key="id")(current, [{"id": 1, "v": "new"}, {"id": 2, "v": "b"}])

    assert merged == [{"id": 1, "v": "old"}, {"id": 2, "v": "b"}]


def test_dedupe_append_with_a_field_name_reads_attributes() -> None:
    merged = dedupe_append(key="id")([Doc(1, "a")], [Doc(1, "again"), Doc(2, "b")])

    assert merged == [Doc(1, "a"), Doc(2, "b")]


def test_dedupe_append_does_not_mutate_its_inputs() -> None:
    current, update = ["a"], ["a", "b"]

    merged = dedupe_append()(current, update)

    assert current == ["a"]
    assert update == ["a", "b"]
    assert merged is not current


def test_dedupe_append_rejects_unhashable_items_without_a_key() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        dedupe_append()([], [{"id": 1}])


@pytest.mark.parametrize("key", [5, 1.5, ["id"]])
def test_dedupe_append_rejects_a_key_that_is_neither_callable_nor_a_name(key: Any) -> None:
    with pytest.raises(ReducerConfigurationError) as info:
        dedupe_append(key=key)

    assert info.value.categories == ["reducer_configuration_invalid"]
    assert f"key must be a callable or a field name, got {key!r}" in str(info.value)


# ------------------------------------------------------------------ merge_by_key


def test_merge_by_key_replaces_matching_records_in_place_and_appends_new_ones() -> None:
    current = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]

    merged = merge_by_key("id")(current, [{"id": 3, "v": "c"}, {"id": 1, "v": "A"}])

    assert merged == [{"id": 1, "v": "A"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}]


def test_merge_by_key_last_duplicate_within_one_update_wins() -> None:
    merged = merge_by_key("id")([], [{"id": 1, "v": "x"}, {"id": 1, "v": "y"}])

    assert merged == [{"id": 1, "v": "y"}]


def test_merge_by_key_with_a_callable_key() -> None:
    merged = merge_by_key(lambda doc: doc.id)([Doc(1, "a")], [Doc(1, "b"), Doc(2, "c")])

    assert merged == [Doc(1, "b"), Doc(2, "c")]


def test_merge_by_key_does_not_mutate_its_inputs() -> None:
    current = [{"id": 1, "v": "a"}]
    update = [{"id": 1, "v": "b"}]

    merged = merge_by_key("id")(current, update)

    assert current == [{"id": 1, "v": "a"}]
    assert update == [{"id": 1, "v": "b"}]
    assert merged is not current


def test_merge_by_key_treats_a_missing_current_value_as_empty() -> None:
    assert merge_by_key("id")(None, [{"id": 1}]) == [{"id": 1}]


def test_merge_by_key_requires_a_key() -> None:
    with pytest.raises(ReducerConfigurationError) as info:
        merge_by_key(None)  # type: ignore[arg-type]

    assert info.value.categories == ["reducer_configuration_invalid"]
    assert "merge_by_key(key=None)" in str(info.value)


def test_merge_by_key_rejects_a_key_that_is_neither_callable_nor_a_name() -> None:
    with pytest.raises(ReducerConfigurationError, match="merge_by_key: key must be a callable"):
        merge_by_key(3)  # type: ignore[arg-type]


def test_merge_by_key_fails_on_a_record_without_the_key_naming_it() -> None:
    with pytest.raises(LookupError, match=r"update\[1\] has no key 'id'"):
        merge_by_key("id")([], [{"id": 1}, {"name": "no id"}])


def test_merge_by_key_names_the_current_item_without_the_key() -> None:
    with pytest.raises(LookupError, match=r"current value\[0\] has no key 'id'"):
        merge_by_key("id")([object()], [{"id": 1}])


def test_dedupe_append_names_the_item_with_an_unhashable_key() -> None:
    with pytest.raises(TypeError, match=r"update\[2\] is unhashable"):
        dedupe_append()([], [1, 2, [3]])


def test_an_item_without_the_key_gets_a_reducer_error_naming_index_and_node() -> None:
    class Records(TypedDict, total=False):
        records: Annotated[list[dict[str, Any]], merge_by_key("id")]

    graph = AgentGraph("g", state_schema=Records)
    graph.add_node("load", lambda s: {"records": [{"id": 1}, {"id": 2}, {"title": "x"}]})
    graph.add_edge("load", END)

    with pytest.raises(ReducerError) as info:
        graph.run()

    assert info.value.node == "load"
    assert "update[2] has no key 'id'" in str(info.value)


# --------------------------------------------------------- errors, flags, names


def test_reducer_configuration_error_is_a_graph_build_error() -> None:
    with pytest.raises(GraphBuildError) as info:
        bounded_append(0)

    assert isinstance(info.value, ReducerConfigurationError)
    assert [d.category for d in info.value.diagnostics] == ["reducer_configuration_invalid"]


@pytest.mark.parametrize(
    ("red", "idempotent"),
    [
        (last_write_wins, True),
        (append, False),
        (merge, True),
        (concat_flatten, False),
        (merge_all, False),
        (bounded_append(3), False),
        (dedupe_append(), True),
        (dedupe_append(key="id"), True),
        (merge_by_key("id"), True),
    ],
)
def test_round_trip_idempotent_flag_of_built_in_reducers(red: Reducer, idempotent: bool) -> None:
    assert red.round_trip_idempotent is idempotent


@pytest.mark.parametrize(
    ("red", "name"),
    [
        (last_write_wins, "last_write_wins"),
        (append, "append"),
        (merge, "merge"),
        (concat_flatten, "concat_flatten"),
        (merge_all, "merge_all"),
        (dedupe_append(), "dedupe_append"),
        (dedupe_append(key="id"), "dedupe_append(key='id')"),
        (merge_by_key("id"), "merge_by_key(key='id')"),
    ],
)
def test_built_in_reducers_have_readable_names(red: Reducer, name: str) -> None:
    assert red.name == name
    assert repr(red) == name


def test_reducer_factories_with_equal_parameters_compare_equal() -> None:
    assert bounded_append(3) == bounded_append(3)
    assert bounded_append(3) != bounded_append(4)
    assert dedupe_append(key="id") == dedupe_append(key="id")
    assert merge_by_key("id") != merge_by_key("key")


# ---------------------------------------------------------------- @reducer


def test_reducer_decorator_bare_uses_the_function_name() -> None:
    @reducer
    def keep_max(current: Any, update: Any) -> Any:
        return update if current is None else max(current, update)

    assert isinstance(keep_max, Reducer)
    assert keep_max.name == "keep_max"
    assert keep_max.round_trip_idempotent is False
    assert keep_max(3, 5) == 5
    assert keep_max(7, 5) == 7


def test_reducer_decorator_with_name_and_idempotent() -> None:
    def biggest(current: Any, update: Any) -> Any:
        return update if current is None else max(current, update)

    # Applied by hand: reducer(...) is typed as returning Any, an untyped decorator to mypy.
    keep_max = reducer(name="biggest", idempotent=True)(biggest)

    assert isinstance(keep_max, Reducer)
    assert keep_max.name == "biggest"
    assert keep_max.round_trip_idempotent is True
    assert keep_max(None, 4) == 4


def test_reducer_decorator_passes_current_and_update_in_that_order() -> None:
    calls: list[tuple[Any, Any]] = []

    @reducer
    def spy(current: Any, update: Any) -> Any:
        calls.append((current, update))
        return update

    spy("cur", "upd")

    assert calls == [("cur", "upd")]


# ---------------------------------------------------------------- as_reducer


def test_as_reducer_wraps_operator_add() -> None:
    red = as_reducer(operator.add)

    assert red is not None
    assert red.name == "add"
    assert red([1], [2]) == [1, 2]
    assert red.round_trip_idempotent is False


@pytest.mark.parametrize(("fn", "name"), [(operator.or_, "or_"), (operator.concat, "concat")])
def test_as_reducer_names_operator_functions(fn: Callable[[Any, Any], Any], name: str) -> None:
    red = as_reducer(fn)

    assert red is not None
    assert red.name == name


def test_as_reducer_returns_a_reducer_unchanged() -> None:
    assert as_reducer(append) is append


def test_as_reducer_wraps_a_plain_function_under_its_name() -> None:
    def longest(current: Any, update: Any) -> Any:
        return update if current is None or len(update) > len(current) else current

    red = as_reducer(longest)

    assert red is not None
    assert red.name == "longest"
    assert red("ab", "abc") == "abc"


@pytest.mark.parametrize("candidate", ["append", 3, None, list, dict])
def test_as_reducer_rejects_non_callables_and_classes(candidate: Any) -> None:
    assert as_reducer(candidate) is None


# ------------------------------------------------------- engine hooks (private)

_small = st.integers(-3, 3)
_records = st.lists(st.fixed_dictionaries({"id": st.integers(0, 4), "v": _small}), max_size=6)
_HOOK_CASES: list[tuple[Reducer, st.SearchStrategy[Any], st.SearchStrategy[Any]]] = [
    (append, st.lists(_small, max_size=5), st.lists(_small, max_size=5)),
    (bounded_append(3), st.lists(_small, max_size=6), st.lists(_small, max_size=6)),
    (dedupe_append(), st.lists(_small, max_size=6), st.lists(_small, max_size=6)),
    (merge_by_key("id"), _records, _records),
    (
        concat_flatten,
        st.lists(_small, max_size=5),
        st.lists(st.lists(_small, max_size=3), max_size=3),
    ),
    (
        merge,
        st.dictionaries(_small, _small, max_size=4),
        st.dictionaries(_small, _small, max_size=4),
    ),
    (
        merge_all,
        st.dictionaries(_small, _small, max_size=4),
        st.lists(st.dictionaries(_small, _small, max_size=3), max_size=3),
    ),
]


@pytest.mark.parametrize(
    ("red", "currents", "updates"), _HOOK_CASES, ids=[repr(case[0]) for case in _HOOK_CASES]
)
def test_plan_apply_and_fingerprint_after_agree_with_the_pure_reducer(
    red: Reducer, currents: st.SearchStrategy[Any], updates: st.SearchStrategy[Any]
) -> None:
    @settings(max_examples=40, database=None, deadline=None)
    @given(st.one_of(st.none(), currents), st.lists(updates, min_size=1, max_size=4))
    def check(start: Any, steps: list[Any]) -> None:
        expected = copy.deepcopy(start)
        owned: Any = MISSING if start is None else copy.deepcopy(start)
        scratch: Any = None
        for step in steps:
            snapshot = copy.deepcopy(step)
            plan = red.plan(owned, step, scratch)
            old = fingerprint(owned) if owned is not MISSING else 0
            new_fp = red.fingerprint_after(old, owned, plan)
            owned, scratch = red.apply(owned, plan, scratch)
            expected = red(expected, step)
            assert owned == expected
            assert new_fp == fingerprint(owned)
            assert step == snapshot  # the update is never mutated

    check()


# ---------------------------------------------------------------- engine path


def test_engine_append_matches_the_pure_function_over_several_steps() -> None:
    updates: list[Update] = [{"log": ["a"]}, {"log": ["b", "c"]}, {"log": []}, {"log": ["d"]}]

    result = _chain({"log": append}, *updates).run({"log": ["seed"]})

    assert result.state["log"] == _fold(append, ["seed"], [u["log"] for u in updates])
    assert result.state["log"] == ["seed", "a", "b", "c", "d"]


def test_engine_merge_matches_the_pure_function_over_several_steps() -> None:
    updates: list[Update] = [{"cfg": {"a": 1}}, {"cfg": {"b": 2}}, {"cfg": {"a": 3}}]

    result = _chain({"cfg": merge}, *updates).run({})

    assert result.state["cfg"] == _fold(merge, None, [u["cfg"] for u in updates])
    assert result.state["cfg"] == {"a": 3, "b": 2}


def test_engine_bounded_append_keeps_only_the_newest_items() -> None:
    red = bounded_append(3)
    updates: list[Update] = [{"k": [1, 2]}, {"k": [3, 4]}, {"k": [5]}]

    result = _chain({"k": red}, *updates).run({})

    assert result.state["k"] == [3, 4, 5]


def test_engine_uses_reducers_declared_on_a_pydantic_schema() -> None:
    class Notes(BaseModel):
        notes: Annotated[list[str], append] = []
        title: str = ""

    graph = AgentGraph.chain(
        _returning({"notes": ["a"], "title": "one"}),
        _returning({"notes": ["b"], "title": "two"}),
        names=["first", "second"],
        state_schema=Notes,
    )

    result = graph.run({"notes": ["seed"]})

    assert result.state["notes"] == ["seed", "a", "b"]
    assert result.state["title"] == "two"


def test_engine_uses_reducers_declared_on_a_typeddict_schema() -> None:
    class Tally(TypedDict):
        seen: Annotated[list[str], dedupe_append()]
        counts: Annotated[dict[str, int], merge]

    graph = AgentGraph.chain(
        _returning({"seen": ["a", "b"], "counts": {"a": 1}}),
        _returning({"seen": ["b", "c"], "counts": {"b": 1}}),
        names=["first", "second"],
        state_schema=Tally,
    )

    result = graph.run({})

    assert result.state["seen"] == ["a", "b", "c"]
    assert result.state["counts"] == {"a": 1, "b": 1}


def test_engine_applies_operator_add_declared_in_annotated() -> None:
    class Total(TypedDict):
        parts: Annotated[list[int], operator.add]

    graph = AgentGraph.chain(
        _returning({"parts": [1]}), _returning({"parts": [2]}), names=["a", "b"], state_schema=Total
    )

    assert graph.run({"parts": [0]}).state["parts"] == [0, 1, 2]


def test_engine_passes_none_to_a_custom_reducer_for_a_missing_field() -> None:
    seen: list[Any] = []

    @reducer
    def record(current: Any, update: Any) -> Any:
        seen.append(current)
        return update

    _chain({"k": record}, {"k": 1}, {"k": 2}).run({})

    assert seen == [None, 1]


def test_engine_merges_a_router_goto_update_through_the_reducer() -> None:
    graph = AgentGraph("g", reducers={"log": append})
    graph.add_node("a", _returning({"log": ["a"]}))
    graph.add_conditional_edge("a", lambda state: goto(END, update={"log": ["router"]}))
    graph.set_entry("a")

    assert graph.run({}).state["log"] == ["a", "router"]


def test_engine_rejects_conflicting_reducers_for_one_field() -> None:
    class Notes(TypedDict):
        notes: Annotated[list[str], append]

    graph = AgentGraph.chain(_returning({}), state_schema=Notes, reducers={"notes": merge})

    with pytest.raises(GraphBuildError) as info:
        graph.compile()

    assert "conflicting_reducers" in info.value.categories


def test_engine_rejects_a_reducers_entry_that_is_not_a_reducer() -> None:
    graph = AgentGraph.chain(_returning({}), reducers={"notes": "append"})

    with pytest.raises(GraphBuildError) as info:
        graph.compile()

    assert "invalid_reducer" in info.value.categories


# ------------------------------------------------------------ ReducerError


def _failing_graph() -> AgentGraph:
    def second(state: GraphState) -> Update:
        return {"log": ["b"], "plain": 2, "tags": "not a list"}

    graph = AgentGraph("g", reducers={"log": append, "tags": append})
    graph.add_node("first", _returning({"log": ["a"], "tags": ["t"], "plain": 1}))
    graph.add_node("second", second)
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    graph.set_entry("first")
    return graph


def test_reducer_failure_raises_reducer_error_naming_field_reducer_and_node() -> None:
    with pytest.raises(ReducerError) as info:
        _failing_graph().run({})

    error = info.value
    assert error.field == "tags"
    assert error.reducer == "append"
    assert error.node == "second"
    assert error.step == 2
    assert error.category == "reducer_error"
    assert "'tags'" in str(error)
    assert "'second'" in str(error)


def test_reducer_error_keeps_the_reducers_exception_as_its_cause() -> None:
    with pytest.raises(ReducerError) as info:
        _failing_graph().run({})

    cause = info.value.__cause__
    assert isinstance(cause, TypeError)
    assert "append needs a list as the update" in str(cause)


def test_reducer_error_state_is_the_state_before_the_failing_merge() -> None:
    with pytest.raises(ReducerError) as info:
        _failing_graph().run({})

    state = info.value.state
    assert state is not None
    # "log" was planned and "plain" assigned before "tags" failed: neither was applied.
    assert state.data == {"log": ["a"], "tags": ["t"], "plain": 1}
    assert [name for name, _ in state.history] == ["first"]


def test_reducer_error_discards_the_failing_nodes_view_writes() -> None:
    def second(state: GraphState) -> Update:
        state.data["written"] = True
        state.messages.append(state.messages[0])
        return {"tags": 5}

    graph = AgentGraph.chain(
        _returning({"tags": ["t"]}), second, names=["first", "second"], reducers={"tags": append}
    )

    with pytest.raises(ReducerError) as info:
        graph.run("hello")

    state = info.value.state
    assert state is not None
    assert "written" not in state.data
    assert [m.text for m in state.messages] == ["hello"]


def test_custom_reducer_failure_raises_reducer_error_with_its_exception() -> None:
    def add_positive(current: Any, update: Any) -> Any:
        if update < 0:
            raise ValueError("negative update")
        return (current or 0) + update

    strict_sum = reducer(name="strict_sum")(add_positive)
    graph = _chain({"total": strict_sum}, {"total": 2}, {"total": -1})

    with pytest.raises(ReducerError) as info:
        graph.run({})

    assert info.value.reducer == "strict_sum"
    assert info.value.node == "n1"
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.state is not None
    assert info.value.state.data == {"total": 2}


def test_reducer_error_result_is_a_failed_partial_result() -> None:
    with pytest.raises(ReducerError) as info:
        _failing_graph().run({})

    result = info.value.result
    assert result is not None
    assert result.quality == "failed"
    assert result.state.data["log"] == ["a"]


# --------------------------------------------------- per-run indexes, many steps


def test_dedupe_append_stays_correct_across_many_steps() -> None:
    red = dedupe_append()
    ops = [("update", [i % 17, (i * 7) % 23]) for i in range(120)]

    state = _run_ops(red, None, ops)

    assert state["k"] == _model(red, None, ops)
    assert len(state["k"]) == len(set(state["k"]))


def test_merge_by_key_stays_correct_across_many_steps() -> None:
    red = merge_by_key("id")
    ops = [("update", [{"id": i % 11, "v": i}, {"id": i % 5, "v": -i}]) for i in range(120)]

    state = _run_ops(red, None, ops)

    assert state["k"] == _model(red, None, ops)
    assert sorted(record["id"] for record in state["k"]) == list(range(11))


def test_dedupe_append_after_a_direct_assignment_through_the_view() -> None:
    red = dedupe_append()
    ops: list[tuple[str, Any]] = [
        ("update", [1, 2]),
        ("update", [2, 3]),
        ("assign", [3]),
        ("update", [1, 3, 4]),
    ]

    state = _run_ops(red, None, ops)

    assert state["k"] == [3, 1, 4]


def test_dedupe_append_after_an_in_place_edit_through_the_view() -> None:
    red = dedupe_append()
    ops: list[tuple[str, Any]] = [("update", [1, 2]), ("inplace", 9), ("update", [9, 2, 5])]

    state = _run_ops(red, None, ops)

    assert state["k"] == [1, 2, 9, 5]


def test_merge_by_key_after_a_direct_assignment_through_the_view() -> None:
    red = merge_by_key("id")
    ops: list[tuple[str, Any]] = [
        ("update", [{"id": 1, "v": 1}, {"id": 2, "v": 1}]),
        ("assign", [{"id": 2, "v": 9}]),
        ("update", [{"id": 2, "v": 3}, {"id": 1, "v": 3}]),
    ]

    state = _run_ops(red, None, ops)

    assert state["k"] == [{"id": 2, "v": 3}, {"id": 1, "v": 3}]


def test_view_assignment_bypasses_the_reducer() -> None:
    calls: list[Any] = []

    @reducer
    def spy(current: Any, update: Any) -> Any:
        calls.append(update)
        return update

    def assign(state: GraphState) -> None:
        state.data["k"] = ["assigned"]

    def edit(state: GraphState) -> None:
        state.data["k"].append("edited")

    graph = AgentGraph.chain(assign, edit, reducers={"k": spy})

    result = graph.run({"k": ["seed"]})

    assert result.state["k"] == ["assigned", "edited"]
    assert calls == []


def test_view_deletion_then_update_in_one_node_starts_from_empty() -> None:
    def reset(state: GraphState) -> Update:
        del state.data["k"]
        return {"k": [7, 1]}

    graph = AgentGraph.chain(
        _returning({"k": [1, 2]}), reset, _returning({"k": [1, 8]}), reducers={"k": dedupe_append()}
    )

    assert graph.run({}).state["k"] == [7, 1, 8]


_OP_VALUES = st.lists(st.integers(0, 6), max_size=4)
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("update"), _OP_VALUES),
        st.tuples(st.just("assign"), _OP_VALUES),
        st.tuples(st.just("inplace"), st.integers(0, 6)),
    ),
    min_size=1,
    max_size=8,
)


@pytest.mark.parametrize(
    "red", [append, bounded_append(3), dedupe_append(), concat_flatten], ids=repr
)
@settings(max_examples=40, database=None, deadline=None)
@given(start=st.one_of(st.none(), _OP_VALUES), ops=_OPS)
def test_engine_list_merges_equal_the_pure_reducer(
    red: Reducer, start: list[int] | None, ops: list[tuple[str, Any]]
) -> None:
    if red is concat_flatten:
        ops = [
            (kind, [[v] for v in value]) if kind == "update" else (kind, value)
            for kind, value in ops
        ]
    before = copy.deepcopy((start, ops))

    state = _run_ops(red, start, ops)

    assert state.get("k") == _model(red, start, ops)
    assert (start, ops) == before  # the caller's input is never mutated


_RECORD_OPS = st.lists(
    st.tuples(
        st.sampled_from(["update", "assign"]),
        st.lists(
            st.fixed_dictionaries({"id": st.integers(0, 4), "v": st.integers(0, 3)}), max_size=4
        ),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, database=None, deadline=None)
@given(ops=_RECORD_OPS)
def test_engine_merge_by_key_equals_the_pure_reducer(ops: list[tuple[str, Any]]) -> None:
    red = merge_by_key("id")
    before = copy.deepcopy(ops)

    state = _run_ops(red, None, ops)

    assert state.get("k") == _model(red, None, ops)
    assert ops == before


_DICTS = st.dictionaries(st.sampled_from("abcd"), st.integers(0, 3), max_size=3)


@settings(max_examples=25, database=None, deadline=None)
@given(start=st.one_of(st.none(), _DICTS), updates=st.lists(_DICTS, min_size=1, max_size=6))
def test_engine_merge_equals_the_pure_reducer(
    start: dict[str, int] | None, updates: list[dict[str, int]]
) -> None:
    before = copy.deepcopy((start, updates))
    graph = _chain({"k": merge}, *({"k": u} for u in updates))

    state = graph.run({} if start is None else {"k": start}).state

    assert state.get("k") == _fold(merge, start, updates)
    assert (start, updates) == before


# --------------------------------------------------------- caller's input


@pytest.mark.parametrize(
    ("red", "start", "update"),
    [
        (append, [1], [2]),
        (concat_flatten, [1], [[2]]),
        (bounded_append(2), [1, 2], [3]),
        (dedupe_append(), [1], [1, 2]),
        (merge_by_key("id"), [{"id": 1, "v": 1}], [{"id": 1, "v": 2}]),
        (merge, {"a": 1}, {"b": 2}),
        (merge_all, {"a": 1}, [{"b": 2}]),
    ],
    ids=repr,
)
def test_run_never_mutates_the_callers_input_value(red: Reducer, start: Any, update: Any) -> None:
    original = copy.deepcopy(start)
    graph = _chain({"k": red}, {"k": update}, {"k": update})

    result = graph.run({"k": start})

    assert start == original
    assert result.state["k"] == _fold(red, original, [update, update])


def test_run_never_mutates_the_lists_of_a_graph_state_input() -> None:
    items = ["seed"]
    initial = GraphState(data={"items": items})
    graph = _chain({"items": append}, {"items": ["a"]})

    result = graph.run(initial)

    assert items == ["seed"]
    assert initial.data["items"] == ["seed"]
    assert result.state["items"] == ["seed", "a"]


def test_run_never_mutates_a_callers_ordered_dict() -> None:
    caller = OrderedDict(a=1)

    _chain({"k": merge}, {"k": {"b": 2}}).run({"k": caller})

    assert caller == OrderedDict(a=1)


def test_engine_append_onto_a_tuple_current_value_matches_the_pure_function() -> None:
    result = _chain({"k": append}, {"k": [3]}).run({"k": (1, 2)})

    assert result.state["k"] == append((1, 2), [3])


class _Notes(BaseModel):
    notes: Annotated[list[str], append] = []
    n: int = 0


def test_resetting_an_optional_write_does_not_mutate_the_schema_default() -> None:
    def writer(state: GraphState) -> Update:
        if state["n"] == 0:
            return {"notes": ["first"], "n": 1}
        return {"n": state["n"] + 1}

    graph = AgentGraph("g", state_schema=_Notes)
    graph.add_node("writer", writer, writes=["n"], optional_writes=["notes"])
    graph.add_edge("writer", "writer", condition="n < 2")
    graph.add_edge("writer", "tail")
    graph.add_node("tail", _returning({"notes": ["tail"]}), next_node=END)
    graph.set_entry("writer")
    try:
        graph.run({})
        second = graph.run({})
        assert second.state["notes"] == ["tail"]
        assert _Notes().notes == []
    finally:
        _Notes.model_fields["notes"].default.clear()  # undo the damage for other tests


# ------------------------------------------ binary-operator reducers on typed fields


class OperatorState(TypedDict):
    items: Annotated[list[str], operator.add]
    counts: Annotated[dict[str, int], operator.or_]
    tags: Annotated[set[str], operator.or_]
    text: Annotated[str, operator.add]
    total: Annotated[int, operator.add]
    score: Annotated[float, operator.add]
    pair: Annotated[tuple[int, ...], operator.add]


def test_operator_reducers_start_from_the_empty_value_of_their_type() -> None:
    # As in LangGraph: a key missing from the input starts from its type's empty value.
    graph = AgentGraph("g", state_schema=OperatorState)
    update = {
        "items": ["a"],
        "counts": {"a": 1},
        "tags": {"t"},
        "text": "hi",
        "total": 2,
        "score": 0.5,
        "pair": (1,),
    }
    graph.add_node("first", lambda s: update, next_node="second")
    graph.add_node("second", lambda s: update, next_node=END)

    data = graph.run({}).state.data

    assert data == {
        "items": ["a", "a"],
        "counts": {"a": 1},
        "tags": {"t"},
        "text": "hihi",
        "total": 4,
        "score": 1.0,
        "pair": (1, 1),
    }


def test_a_function_reducer_on_an_untyped_field_still_starts_from_none() -> None:
    seen: list[Any] = []

    def keep(current: Any, update: Any) -> Any:
        seen.append(current)
        return update

    graph = AgentGraph("g", reducers={"x": keep})
    graph.add_node("n", lambda s: {"x": 1}, next_node=END)
    graph.run()

    assert seen == [None]
