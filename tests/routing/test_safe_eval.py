"""Safe conditions: the allowed subset evaluates like Python; the rest fails at parse time."""

from __future__ import annotations

import ast
import builtins
from typing import Any

import pytest

from selectgraph import END, AgentGraph, EdgeError, GraphBuildError, GraphState
from selectgraph.graph import Condition, ConditionSyntaxError, parse_condition
from selectgraph.routing._safe_eval import MAX_CONDITION_DEPTH, MAX_CONDITION_LENGTH

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


@pytest.mark.parametrize(
    ("source", "column"),
    [("  len(x)", 2), ("\n\t len(x)", 2), (" x and (\n len(x))", 1), ("\t(x) +\t1", 1)],
)
def test_an_error_keeps_the_source_as_written_and_counts_columns_in_it(
    source: str, column: int
) -> None:
    with pytest.raises(ConditionSyntaxError) as info:
        parse_condition(source)

    assert info.value.source == source
    assert f"at column {column})" in info.value.problem


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


# ---------------------------------------------------- identity and hashing

IDENTITY_ALLOWED = [
    "nothing is None",
    "None is nothing",
    "flag is not False",
    "True is flag",
    "nothing is None is not flag",
    "score is not None and score == 7",
]


@pytest.mark.parametrize("source", IDENTITY_ALLOWED)
def test_identity_with_none_true_or_false_evaluates_like_python(source: str) -> None:
    assert parse_condition(source)(DATA) is _python(source)


@pytest.mark.parametrize(
    ("source", "word"),
    [
        ("score is 1000", "'is'"),
        ("1000 is score", "'is'"),
        ("name is not 'ada'", "'is not'"),
        ("score is ratio", "'is'"),
        ("tags is ()", "'is'"),
        ("nothing is None is 0", "'is'"),  # the second link compares with 0
        ("flag is 1", "'is'"),  # 1 == True, but it is not the literal True
        ("1 is None", "'is'"),  # Python itself warns about "is" with a literal
        ("-1 is not None", "'is not'"),
        ("[] is None", "'is'"),
    ],
)
def test_identity_with_any_other_operand_is_rejected(source: str, word: str) -> None:
    with pytest.raises(ConditionSyntaxError) as info:
        parse_condition(source)

    assert f"{word} with something other than None, True or False is not allowed" in str(info.value)
    assert "compare values with == and !=" in info.value.problem


UNHASHABLE = [
    ("name in {[1]}", "list literal as a set element", "[1]"),
    ("name in {'a', (1, [2])}", "list literal as a set element", "[2]"),
    ("{{1}, 2} == tags", "set literal as a set element", "{1}"),
    ("name in {1: 2, [1]: 3}", "list literal as a dict key", "[1]"),
    ("{{}: 1} == scores", "dict literal as a dict key", "{}"),
    ("[1] in {1}", "list literal as a member tested against a set or dict literal", "[1]"),
    ("(1, {2}) not in {1: 1}", "set literal as a member tested against a set or dict", "{2}"),
    ("score < 9 and [score] in {7}", "list literal as a member tested", "[score]"),
]


@pytest.mark.parametrize(("source", "kind", "segment"), UNHASHABLE)
def test_an_unhashable_literal_where_a_hash_is_needed_is_rejected(
    source: str, kind: str, segment: str
) -> None:
    with pytest.raises(ConditionSyntaxError) as info:
        parse_condition(source)

    assert f"an unhashable {kind}" in info.value.problem
    assert repr(segment) in info.value.problem
    assert "use a tuple" in info.value.problem


@pytest.mark.parametrize(
    "source",
    [
        "[1] in [[1]]",
        "name in {('ada', 1), 'bob'}",
        "{'a': [1]} == {'a': [1]}",
        "[tags] in [[['a', 'b']]]",
        "tags in [['a', 'b']]",
    ],
)
def test_unhashable_values_where_no_hash_is_needed_still_work(source: str) -> None:
    assert parse_condition(source)(DATA) is _python(source)


def test_engine_rejects_an_unhashable_literal_when_the_graph_is_built() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: None)
    graph.add_edge("a", END, condition="x in {[1]}")
    graph.add_edge("a", END)
    graph.set_entry("a")

    with pytest.raises(GraphBuildError) as info:
        graph.compile()

    assert "unsafe_condition" in info.value.categories


# --------------------------------------------------------------- limits

DEEP = [
    pytest.param("not " * 500 + "x", id="500 nots"),
    pytest.param("not " * 2000 + "x", id="2000 nots"),
    pytest.param("-" * 5000 + "x", id="5000 minuses"),
    pytest.param("-" * 10000 + "x", id="10000 minuses"),
    pytest.param(" and ".join(["(x or y"] * 500) + ")" * 500, id="500 nested and/or"),
    pytest.param(" and ".join(["(x or y"] * 60) + ")" * 60, id="60 nested and/or"),
    pytest.param("(" * 300 + "x" + ")" * 300, id="300 parentheses"),
    pytest.param("[" * 100 + "x" + "]" * 100 + " == y", id="100 nested lists"),
    pytest.param("x == " + "{'a': " * 100 + "1" + "}" * 100, id="100 nested dicts"),
    pytest.param("s" + "['k']" * 60 + " == 1", id="60 subscripts"),
]


@pytest.mark.parametrize("source", DEEP)
def test_a_deeply_nested_condition_is_a_syntax_error_not_a_crash(source: str) -> None:
    with pytest.raises(ConditionSyntaxError) as info:
        parse_condition(source)

    assert info.value.source == source
    assert len(str(info.value)) < 600  # the message quotes a shortened condition


@pytest.mark.parametrize("source", DEEP)
def test_compile_reports_a_deep_condition_as_unsafe_condition(source: str) -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: None)
    graph.add_edge("a", END, condition=source)
    graph.add_edge("a", END)
    graph.set_entry("a")

    with pytest.raises(GraphBuildError) as info:
        graph.compile()

    assert "unsafe_condition" in info.value.categories


def test_nesting_up_to_the_depth_limit_is_accepted_and_evaluates() -> None:
    source = "not " * (MAX_CONDITION_DEPTH - 1) + "flag"

    assert parse_condition(source)(DATA) is _python(source)
    with pytest.raises(ConditionSyntaxError, match=r"deeper than 50 levels \(at column 200\)"):
        parse_condition("not " + source)


def test_a_long_flat_condition_within_the_length_limit_is_accepted() -> None:
    source = " or ".join(["off"] * 1000) + " or flag"

    assert len(source) < MAX_CONDITION_LENGTH
    assert parse_condition(source)(DATA) is True


def test_length_is_checked_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("ast.parse was called")

    at_limit = "name == '" + "a" * (MAX_CONDITION_LENGTH - 10) + "'"
    assert len(at_limit) == MAX_CONDITION_LENGTH
    assert parse_condition(at_limit)(DATA) is False
    monkeypatch.setattr(ast, "parse", refuse)

    with pytest.raises(ConditionSyntaxError, match="10,001 characters long; the limit is 10,000"):
        parse_condition(at_limit + " ")


def test_a_huge_condition_keeps_its_source_but_not_in_the_message() -> None:
    source = "x == " + "1" * 100_000

    with pytest.raises(ConditionSyntaxError) as info:
        parse_condition(source)

    assert info.value.source == source
    assert "(100,005 characters)" in str(info.value)
    assert len(str(info.value)) < 400


def test_text_python_cannot_encode_is_a_syntax_error() -> None:
    with pytest.raises(ConditionSyntaxError, match="unreadable text"):
        parse_condition("name == '\ud800'")
