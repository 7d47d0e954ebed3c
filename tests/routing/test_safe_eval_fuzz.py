"""Property tests for safe conditions: random expression trees and token soup.

Whatever text comes in, ``parse_condition`` either returns a condition or raises
``ConditionSyntaxError``. Whatever an accepted condition is evaluated against, it
never calls, imports, compiles or reads an attribute (an audit hook and a tripwire
value watch for that), it raises only ``KeyError``, ``IndexError`` or ``TypeError``,
and where it gives an answer, Python gives the same one.
"""

from __future__ import annotations

import ast
import contextlib
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

import pytest
from hypothesis import Phase, event, given, settings
from hypothesis import strategies as st

from selectgraph.graph import ConditionSyntaxError, parse_condition
from selectgraph.routing._safe_eval import MissingStateKey

EVALUATION_ERRORS: Final = (KeyError, IndexError, TypeError)
"""What evaluating an accepted condition may raise (documented in ``_safe_eval``)."""

NAMES: Final = ["x", "y", "tags", "score", "probe", "last_output", "len", "os", "eval"]
UNSAFE_NAMES: Final = ["__class__", "__import__", "__builtins__", "__dict__"]
ATTRIBUTES: Final = ["upper", "append", "__class__", "__globals__", "__subclasses__", "system"]

# No explain phase: it replays a failure under a Python trace function, whose frame
# reads the audit hook would report as the evaluator's.
_PHASES: Final = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
QUICK: Final = settings(max_examples=80, database=None, deadline=None, phases=_PHASES)
LONG: Final = settings(max_examples=1500, database=None, deadline=None, phases=_PHASES)


# ------------------------------------------------------------ the watchers


class Tripwire:
    """A state value that records any attribute read or call made on it."""

    log: list[str] = []  # noqa: RUF012  # shared on purpose: one log for every instance

    def __getattribute__(self, name: str) -> Any:
        Tripwire.log.append(f".{name}")
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        Tripwire.log.append(f"missing .{name}")
        raise AttributeError(name)

    def __call__(self, *args: object, **kwargs: object) -> bool:
        Tripwire.log.append("call")
        return True


_AUDIT: list[str] = []
_AUDITING: list[bool] = [False]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Audit hooks cannot be removed; outside a watched block this one does nothing.
    if _AUDITING[0]:
        _AUDIT.append(f"{event} {args!r:.100}")


sys.addaudithook(_audit)


@contextmanager
def _watched() -> Iterator[None]:
    """Record audit events (import, exec, compile, open, ...) and tripwire touches."""
    _AUDIT.clear()
    Tripwire.log.clear()
    _AUDITING[0] = True
    try:
        yield
    finally:
        _AUDITING[0] = False
    assert _AUDIT == [], f"evaluation raised audit events: {_AUDIT}"
    assert Tripwire.log == [], f"evaluation touched a state value: {Tripwire.log}"


# ------------------------------------------------------------ strategies

_LOAD: Final = ast.Load()
_STORE: Final = ast.Store()

safe_constants = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**30, max_value=10**60),
    st.floats(allow_nan=False),
    st.text(max_size=8),
).map(lambda value: ast.Constant(value))
constants = st.one_of(
    safe_constants,
    safe_constants,
    st.one_of(
        st.binary(max_size=4),
        st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=10),
        st.just(...),
    ).map(lambda value: ast.Constant(value)),
)

safe_names = st.sampled_from(NAMES).map(lambda name: ast.Name(name, _LOAD))
names = st.sampled_from(NAMES + UNSAFE_NAMES).map(lambda name: ast.Name(name, _LOAD))
_INDEXES = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "k"])).map(
    lambda value: ast.Constant(value)
)

_BOOL_OPS = st.sampled_from([ast.And(), ast.Or()])
_UNARY_OPS = st.sampled_from([ast.Not(), ast.USub(), ast.UAdd()])
_COMPARE_OPS = st.sampled_from(
    [
        *[ast.Eq(), ast.NotEq(), ast.Lt(), ast.LtE(), ast.Gt(), ast.GtE()],
        *[ast.In(), ast.NotIn(), ast.Is(), ast.IsNot()],
    ]
)
_BIN_OPS = st.sampled_from([ast.Add(), ast.Sub(), ast.Mult(), ast.Pow(), ast.Mod(), ast.BitAnd()])


def _comprehension(target: str, source: ast.expr) -> list[ast.comprehension]:
    return [ast.comprehension(ast.Name(target, _STORE), source, [], 0)]


def _allowed(children: st.SearchStrategy[ast.expr]) -> st.SearchStrategy[ast.expr]:
    """One level of the grammar's allowed constructs (some draws still break a rule)."""
    some = st.lists(children, min_size=1, max_size=3)
    few = st.lists(children, max_size=3)
    return st.one_of(
        st.builds(ast.BoolOp, _BOOL_OPS, st.lists(children, min_size=2, max_size=3)),
        st.builds(ast.UnaryOp, _UNARY_OPS, children),
        some.flatmap(
            lambda rights: st.builds(
                ast.Compare,
                children,
                st.lists(_COMPARE_OPS, min_size=len(rights), max_size=len(rights)),
                st.just(rights),
            )
        ),
        st.builds(ast.List, few, st.just(_LOAD)),
        st.builds(ast.Tuple, few, st.just(_LOAD)),
        st.builds(ast.Set, some),
        few.flatmap(
            lambda keys: st.builds(
                ast.Dict,
                st.just(keys),
                st.lists(children, min_size=len(keys), max_size=len(keys)),
            )
        ),
        st.builds(ast.Subscript, children, children, st.just(_LOAD)),
        st.builds(ast.Subscript, safe_names, _INDEXES, st.just(_LOAD)),
    )


def _extend(children: st.SearchStrategy[ast.expr]) -> st.SearchStrategy[ast.expr]:
    """One level of the expression grammar, allowed and disallowed constructs alike."""
    few = st.lists(children, max_size=3)
    allowed = _allowed(children)
    disallowed = st.one_of(
        st.builds(ast.Call, children, few, st.just([])),
        st.builds(ast.Attribute, children, st.sampled_from(ATTRIBUTES), st.just(_LOAD)),
        st.builds(ast.BinOp, children, _BIN_OPS, children),
        st.builds(
            ast.Lambda,
            st.just(ast.arguments([], [], None, [], [], None, [])),
            children,
        ),
        st.builds(ast.ListComp, children, children.map(lambda it: _comprehension("t", it))),
        st.builds(ast.SetComp, children, children.map(lambda it: _comprehension("t", it))),
        st.builds(ast.GeneratorExp, children, children.map(lambda it: _comprehension("t", it))),
        st.builds(
            ast.DictComp, children, children, children.map(lambda it: _comprehension("t", it))
        ),
        st.builds(ast.IfExp, children, children, children),
        st.builds(ast.NamedExpr, st.just(ast.Name("w", _STORE)), children),
        st.builds(ast.Starred, children, st.just(_LOAD)).map(lambda s: ast.List([s], _LOAD)),
        st.builds(
            ast.Dict, st.just([None]), st.lists(children, min_size=1, max_size=1)
        ),  # {**value}
        names.map(
            lambda name: ast.JoinedStr([ast.Constant("v="), ast.FormattedValue(name, -1, None)])
        ),
        st.builds(ast.Subscript, names, st.builds(ast.Slice, children, children), st.just(_LOAD)),
        st.builds(ast.Await, children),
        st.builds(ast.UnaryOp, st.just(ast.Invert()), children),
    )
    return st.one_of(allowed, allowed, allowed, disallowed)


expressions = st.one_of(
    # Mostly accepted: the evaluator's answers get checked against Python's.
    st.recursive(st.one_of(safe_constants, safe_names), _allowed, max_leaves=12),
    # Anything: refusals get checked.
    st.recursive(st.one_of(constants, names), _extend, max_leaves=12),
)


def _render(tree: ast.expr) -> str:
    return ast.unparse(ast.fix_missing_locations(ast.Expression(tree)))


TOKENS: Final = [
    *NAMES,
    *UNSAFE_NAMES,
    *ATTRIBUTES,
    "0", "1", "-1", "1000", "1.5", "1e309", "0x10", "1j", "10" * 30,
    "'a'", '"b"', "''", "b'x'", "f'{x}'", "'''", '"', "'", "\\", "\\n",
    "==", "!=", "<", "<=", ">", ">=", "in", "not", "is", "and", "or",
    "(", ")", "[", "]", "{", "}", ",", ":", ".", "...", "*", "**",
    "+", "-", "/", "//", "%", "~", "&", "|", "^", "<<", ">>", ":=", "=", "@",
    "lambda", "if", "else", "for", "async", "await", "yield", "import", "from",
    "None", "True", "False", "#", ";", "\n", "\t", "\x00", "\ufeff", "\ud800",
]  # fmt: skip

_NESTERS: Final = ["not ", "-", "+", "~", "(", "[", "{", "x and (", "y or [", "{'k': ", "s['k']"]

token_soup = st.lists(st.sampled_from(TOKENS), max_size=25).flatmap(
    lambda tokens: st.lists(
        st.sampled_from(["", " ", " ", "  ", "\n"]), min_size=len(tokens), max_size=len(tokens)
    ).map(lambda gaps: "".join(gap + token for gap, token in zip(gaps, tokens, strict=True)))
)
character_soup = st.text(alphabet=st.characters(), max_size=40)
deep_soup = st.builds(
    lambda prefix, times, middle, closing: prefix * times + middle + closing * times,
    st.sampled_from(_NESTERS),
    st.integers(min_value=0, max_value=4000),
    st.sampled_from(["x", "1", "None", "x == 1", "tags"]),
    st.sampled_from(["", ")", "]", "}", " == 1"]),
)
soups = st.one_of(token_soup, token_soup, character_soup, deep_soup)

values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=5),
        st.builds(Tripwire),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), inner, max_size=3),
    ),
    max_leaves=6,
)
states = st.lists(st.dictionaries(st.sampled_from(NAMES), values), min_size=1, max_size=3)


# ------------------------------------------------------------ the properties


def _python(source: str, data: Mapping[str, Any]) -> tuple[bool, Any]:
    """Python's own answer, for a source the safe evaluator accepted: (raised, value)."""
    try:
        return False, bool(eval(source.strip(), {"__builtins__": {}}, dict(data)))
    except (NameError, *EVALUATION_ERRORS):
        return True, None


def _check(source: str, datas: list[dict[str, Any]]) -> None:
    try:
        condition = parse_condition(source)
    except ConditionSyntaxError as exc:
        refused: ConditionSyntaxError | None = exc
    else:
        refused = None
    event("refused" if refused else "accepted")
    if refused is not None:
        assert refused.source == source
        return
    for data in datas:
        raised: BaseException | None = None
        answer: bool | None = None
        with _watched():
            try:
                answer = condition(data)
            except EVALUATION_ERRORS as exc:
                raised = exc
        if isinstance(raised, KeyError) and not isinstance(raised, MissingStateKey):
            assert "[" in source, f"a KeyError without a subscript: {raised!r}"
        python_raised, python_answer = _python(source, data)
        assert (raised is not None) == python_raised, (source, data, raised)
        if raised is None:
            assert answer is python_answer, (source, data, answer, python_answer)


@QUICK
@given(expressions, states)
def test_a_random_expression_is_parsed_or_refused_and_evaluates_safely(
    tree: ast.expr, datas: list[dict[str, Any]]
) -> None:
    _check(_render(tree), datas)


@QUICK
@given(soups, states)
def test_token_soup_is_parsed_or_refused_and_evaluates_safely(
    source: str, datas: list[dict[str, Any]]
) -> None:
    _check(source, datas)


@pytest.mark.slow
@LONG
@given(expressions, states)
def test_many_random_expressions(tree: ast.expr, datas: list[dict[str, Any]]) -> None:
    _check(_render(tree), datas)


@pytest.mark.slow
@LONG
@given(soups, states)
def test_much_token_soup(source: str, datas: list[dict[str, Any]]) -> None:
    _check(source, datas)


def test_the_watchers_see_what_they_watch_for() -> None:
    """The audit hook and the tripwire do notice a call, an attribute read and an import."""
    with pytest.raises(AssertionError, match=r"audit events: \[.compile "), _watched():
        compile("1", "<condition>", "eval")
    with (
        pytest.raises(AssertionError, match=r"audit events: \[.import "),
        _watched(),
        contextlib.suppress(ModuleNotFoundError),
    ):
        __import__("selectgraph_no_such_module")
    with pytest.raises(AssertionError, match="touched a state value"), _watched():
        Tripwire()()
    with pytest.raises(AssertionError, match="touched a state value"), _watched():
        _ = Tripwire().__class__
