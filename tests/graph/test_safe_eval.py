"""Safe conditions: the allowed subset evaluates like Python; the rest fails at parse time."""

from __future__ import annotations

import builtins
from typing import Any

import pytest

from selectgraph import END, AgentGraph, EdgeError, GraphBuildError, GraphState
from selectgraph.graph import Condition, ConditionSyntaxError, parse_condition

DATA: dict[str, Any] = {
    "score": 7,
    "ratio": 0.5,
    "name": "ada",
    "empty": "",
    "flag": True,
    "off": False,
    "nothing": None,
    "tags": ["a", "b"],
    "scores": {"math": 9, "art": 3, 1: "one"},
    "nested": {"a": {"b": [10, 20]}},
    "matrix": [[1, 2], [3, 4]],
    "zero": 0,
}


def _python(source: str) -> Any:
    """What Python makes of ``source`` with DATA as the only names (the reference semantics)."""
    return bool(eval(source, {"__builtins__": {}}, dict(DATA)))


# ------------------------------------------------------------------ allowed

ALLOWED = [
    # comparisons
    "score == 7",
    "score != 7",
    "score < 8",
    "score <= 7",
    "score > 7",
    "score >= 7",
    "ratio > 0.25",
    "name == 'ada'",
    "7 == score",
    "score == ratio",
    # chained comparisons
    "1 < score < 10",
    "1 < score < 5",
    "0 <= ratio <= 1 < score",
    "score > 5 > ratio",
    # boolean logic
    "flag and score > 5",
    "off or score > 5",
    "not off",
    "not flag",
    "flag and not off and score",
    "off or nothing or zero",
    "not (score > 5 and off)",
    "flag",
    "empty",
    # membership
    "'a' in tags",
    "'z' in tags",
    "'z' not in tags",
    "'math' in scores",
    "name in ['ada', 'bob']",
    "name in ('ada',)",
    "name in {'ada', 'bob'}",
    "name in {'ada': 1}",
    "'d' in name",
    # identity
    "nothing is None",
    "nothing is not None",
    "name is None",
    "name is not None",
    "flag is True",
    "off is False",
    # unary minus and plus
    "-score < 0",
    "score > -1",
    "-score == -7",
    "+score == 7",
    "--score == 7",
    # literals
    "tags == ['a', 'b']",
    "tags != ['b', 'a']",
    "(1, 2) == (1, 2)",
    "{1, 2} == {2, 1}",
    "{'a': 1} == {'a': 1}",
    "[] == []",
    "() == ()",
    "{} == {}",
    "[score, name] == [7, 'ada']",
    "{'s': score} == {'s': 7}",
    "None == nothing",
    "1.5 > ratio",
    # subscripts
    "scores['math'] >= 8",
    "scores['art'] >= 8",
    "scores[1] == 'one'",
    "tags[0] == 'a'",
    "nested['a']['b'][1] == 20",
    "matrix[1][0] == 3",
    "scores['math'] > scores['art']",
    "scores['math'] in [9, 10] and tags[1] == 'b'",
]


@pytest.mark.parametrize("source", ALLOWED)
def test_allowed_condition_evaluates_like_python(source: str) -> None:
    assert parse_condition(source)(DATA) is _python(source)


def test_condition_returns_a_bool_for_truthy_values() -> None:
    assert parse_condition("tags")(DATA) is True
    assert parse_condition("empty")(DATA) is False


def test_and_short_circuits_like_python() -> None:
    # The right side would fail on a missing key; Python never evaluates it.
    assert parse_condition("off and missing > 1")(DATA) is False


def test_or_short_circuits_like_python() -> None:
    assert parse_condition("flag or missing > 1")(DATA) is True


def test_chained_comparison_stops_at_the_first_false_link() -> None:
    assert parse_condition("score < 0 < missing")(DATA) is False


def test_negative_literal_index_reads_from_the_end() -> None:
    assert parse_condition("tags[-1] == 'b'")({"tags": ["a", "b"]}) is True


def test_or_inside_a_comparison_yields_the_operand_like_python() -> None:
    source = "(empty or 'anon') == 'anon'"

    assert parse_condition(source)(DATA) is _python(source)


def test_surrounding_whitespace_is_ignored() -> None:
    assert parse_condition("  score == 7\n")(DATA) is True


def test_condition_keeps_its_source() -> None:
    condition = parse_condition("score >= 7")

    assert condition.source == "score >= 7"
    assert str(condition) == "score >= 7"


def test_evaluator_returns_the_raw_result() -> None:
    assert parse_condition("score == 7").evaluator(DATA) is True


# -------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("score > 1", {"score"}),
        ("scores['math'] >= 8", {"scores"}),
        ("a and b or not c", {"a", "b", "c"}),
        ("x in [y, 1] and {'k': z} == w", {"x", "y", "z", "w"}),
        ("1 < lo < hi", {"lo", "hi"}),
        ("nested['a']['b'][0] == -other", {"nested", "other"}),
        ("1 == 1", set()),
        ("flag", {"flag"}),
    ],
)
def test_names_lists_every_state_key_read(source: str, names: set[str]) -> None:
    assert parse_condition(source).names == frozenset(names)


def test_names_do_not_include_subscript_keys() -> None:
    assert "math" not in parse_condition("scores['math'] > 1").names


# ------------------------------------------------------------------ rejected

REJECTED = [
    ("len(tags) > 1", "function call", "len(tags)"),
    ("tags.count('a') == 1", "function call", "tags.count('a')"),
    ("name.upper == 1", "attribute access", "name.upper"),
    ("score + 1 > 2", "arithmetic", "score + 1"),
    ("score * 2 > 2", "arithmetic", "score * 2"),
    ("score % 2 == 0", "arithmetic", "score % 2"),
    ("score ** 2 > 1", "arithmetic", "score ** 2"),
    ("(lambda: 1) == 1", "lambda", "lambda: 1"),
    ("[t for t in tags] == tags", "comprehension", "[t for t in tags]"),
    ("{t for t in tags}", "comprehension", "{t for t in tags}"),
    ("{t: 1 for t in tags}", "comprehension", "{t: 1 for t in tags}"),
    ("any(t for t in tags)", "function call", "any(t for t in tags)"),
    ("f'{name}' == 'ada'", "f-string", "f'{name}'"),
    ("(x := 1) == 1", "assignment expression", "x := 1"),
    ("__builtins__", "a dunder name", "__builtins__"),
    ("__x > 1", "a dunder name", "__x"),
    ("scores['__class__'] == 1", "a dunder key", "scores['__class__']"),
    ("nested['a']['__dict__']", "a dunder key", "nested['a']['__dict__']"),
    ("[1, 2][0] == 1", "a subscript of something other than a state key", "[1, 2][0]"),
    ("'abc'[0] == 'a'", "a subscript of something other than a state key", "'abc'[0]"),
    ("{'a': 1}['a'] == 1", "a subscript of something other than a state key", "{'a': 1}['a']"),
    ("scores[name] == 1", "a subscript with a non-literal index", "scores[name]"),
    ("tags[-x] == 'b'", "a subscript with a non-literal index", "tags[-x]"),
    ("tags[0:1] == ['a']", "a subscript with a non-literal index", "tags[0:1]"),
    ("tags[0.5]", "a subscript with a non-literal index", "tags[0.5]"),
    ("__import__('os').system('true')", "function call", "__import__('os').system('true')"),
    ("eval('1') == 1", "function call", "eval('1')"),
    ("exec('x = 1')", "function call", "exec('x = 1')"),
    ("1 if flag else 2", "conditional expression", "1 if flag else 2"),
    ("~score", "bitwise inversion", "~score"),
    ("score & 1", "arithmetic", "score & 1"),
    ("{**scores} == {}", "dict unpacking", "{**scores}"),
    ("[*tags] == tags", "unpacking", "*tags"),
    ("b'x' == name", "a bytes literal", "b'x'"),
    ("1j == score", "a complex literal", "1j"),
    ("... == score", "a ellipsis literal", "..."),
]


@pytest.mark.parametrize(("source", "kind", "segment"), REJECTED)
def test_forbidden_construct_is_rejected_naming_it(source: str, kind: str, segment: str) -> None:
    with pytest.raises(ConditionSyntaxError) as info:
        parse_condition(source)

    error = info.value
    assert error.source == source
    assert f"{kind} is not allowed" in error.problem
    assert repr(segment) in error.problem
    assert source in str(error)


def test_rejection_names_the_column_of_the_offending_part() -> None:
    with pytest.raises(ConditionSyntaxError, match="at column 13"):
        parse_condition("score > 1 or len(tags) > 1")


@pytest.mark.parametrize("source", ["", "   ", "\n\t"])
def test_empty_condition_is_rejected(source: str) -> None:
    with pytest.raises(ConditionSyntaxError, match="a condition must be a non-empty string"):
        parse_condition(source)


@pytest.mark.parametrize("source", [None, 3, b"x > 1"])
def test_a_condition_that_is_not_a_string_is_rejected(source: Any) -> None:
    with pytest.raises(ConditionSyntaxError, match="non-empty string"):
        parse_condition(source)


@pytest.mark.parametrize("source", ["score ==", "score > > 1", "(score", "import os", "x = 1"])
def test_bad_syntax_is_rejected(source: str) -> None:
    with pytest.raises(ConditionSyntaxError, match="invalid syntax") as info:
        parse_condition(source)

    assert info.value.source == source


def test_condition_syntax_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="condition"):
        parse_condition("f(x)")


# -------------------------------------------------------- evaluation errors


def test_missing_key_raises_key_error_naming_it() -> None:
    with pytest.raises(KeyError, match="'missing'"):
        parse_condition("missing > 1")(DATA)


def test_missing_key_in_a_chained_comparison_raises_key_error() -> None:
    with pytest.raises(KeyError, match="'missing'"):
        parse_condition("1 < missing < 3")(DATA)


def test_missing_subscript_key_raises_key_error() -> None:
    with pytest.raises(KeyError, match="'physics'"):
        parse_condition("scores['physics'] > 1")(DATA)


def test_a_bare_builtin_name_is_a_state_key_not_the_builtin() -> None:
    with pytest.raises(KeyError, match="'len'"):
        parse_condition("len")({})


def test_engine_turns_a_missing_key_into_an_edge_error() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {"x": 1})
    graph.add_edge("a", END, condition="missing > 1")
    graph.add_edge("a", END)
    graph.set_entry("a")

    with pytest.raises(EdgeError) as info:
        graph.run({})

    assert "state has no key 'missing'" in str(info.value)
    assert info.value.node == "a"
    assert isinstance(info.value.__cause__, KeyError)


def test_engine_routes_on_a_safe_condition() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {"scores": {"math": 9}})
    graph.add_node("high", lambda state: {"route": "high"}, next_node=END)
    graph.add_node("low", lambda state: {"route": "low"}, next_node=END)
    graph.add_edge("a", "high", condition="scores['math'] >= 8")
    graph.add_edge("a", "low")
    graph.set_entry("a")

    result = graph.run({})

    assert result.node_order == ["a", "high"]


def test_engine_rejects_an_unsafe_condition_when_the_graph_is_built() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: None)
    graph.add_edge("a", END, condition="len(x) > 1")
    graph.add_edge("a", END)
    graph.set_entry("a")

    with pytest.raises(GraphBuildError) as info:
        graph.compile()

    assert "unsafe_condition" in info.value.categories
    assert "function call" in str(info.value)


# ------------------------------------------------------------ never eval


def test_parse_and_evaluate_never_call_eval_or_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("eval/exec was called")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)

    results = [parse_condition(source)(DATA) for source in ALLOWED]

    assert len(results) == len(ALLOWED)
    assert results[0] is True


def test_a_condition_with_side_effects_under_eval_has_none() -> None:
    calls: list[str] = []
    data = {"log": calls, "hook": lambda: calls.append("hook ran")}

    for source in ("log.append('x') is None", "hook() is None", "log.clear() or True"):
        with pytest.raises(ConditionSyntaxError):
            parse_condition(source)(data)

    assert calls == []


def test_a_state_value_is_never_called_or_attribute_accessed() -> None:
    class Tripwire:
        touched = False

        def __call__(self) -> bool:
            Tripwire.touched = True
            return True

        def __getattr__(self, name: str) -> Any:
            Tripwire.touched = True
            raise AttributeError(name)

    condition = parse_condition("probe is not None and probe != 1")

    assert condition({"probe": Tripwire()}) is True
    assert Tripwire.touched is False


def test_condition_is_immutable() -> None:
    condition = parse_condition("score > 1")

    assert isinstance(condition, Condition)
    with pytest.raises(AttributeError):
        condition.source = "other"  # type: ignore[misc]


def test_graph_state_data_can_be_passed_directly() -> None:
    state = GraphState(data={"score": 3})

    assert parse_condition("score == 3")(state.data) is True
