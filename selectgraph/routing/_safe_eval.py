"""Safe expressions: parse an edge condition once, at compile time, into a fast evaluator.

Allowed: comparisons (``== != < <= > >= in not in is is not``), ``and`` / ``or``
/ ``not``, unary minus, literals (numbers, strings, booleans, None, lists,
tuples, sets, dicts), state keys as bare names, and subscripts of state keys
with a literal index (``scores['math'] >= 8``). Everything else — calls,
attribute access, arithmetic, comprehensions, lambdas, names starting with
``__`` — is rejected when the graph is built, naming the offending part.
Nothing is ever passed to ``eval``.

Two rules catch conditions that would parse but go wrong later: ``is`` / ``is not``
compare only with ``None``, ``True`` or ``False`` (identity with any other literal
depends on interning), and a list, dict or set literal may not be an element of a
set literal, a key of a dict literal, or tested for membership in either (it is
unhashable and would fail at run time).

Limits, so hostile or generated text cannot exhaust the stack or memory: a condition
is at most :data:`MAX_CONDITION_LENGTH` characters, checked before parsing, and nests
at most :data:`MAX_CONDITION_DEPTH` expressions deep, measured without recursion.
Text past either limit, or that Python's own parser cannot nest, is a
:class:`ConditionSyntaxError` like any other bad condition.

Evaluation reads state keys and applies the allowed operators; it raises
``KeyError`` (:class:`MissingStateKey` for an absent state key), ``IndexError`` or
``TypeError`` on data that does not fit, and whatever a state value's own comparison
or membership method raises.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "MAX_CONDITION_DEPTH",
    "MAX_CONDITION_LENGTH",
    "Condition",
    "ConditionSyntaxError",
    "parse_condition",
]

MAX_CONDITION_LENGTH: Final = 10_000
"""Longest condition accepted, in characters (checked before the text is parsed)."""

MAX_CONDITION_DEPTH: Final = 50
"""Deepest nesting of expressions accepted: ``x`` is 1 deep, ``not x`` 2, ``a == 1`` 2."""

_SHOWN: Final = 120  # characters of a condition or a part quoted in an error message

Evaluator = Callable[[Mapping[str, Any]], Any]

_COMPARE: Final[dict[type[ast.cmpop], Callable[[Any, Any], Any]]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}

_DESCRIBE: Final[dict[type[ast.AST], str]] = {
    ast.Call: "function call",
    ast.Attribute: "attribute access",
    ast.BinOp: "arithmetic",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehension",
    ast.SetComp: "comprehension",
    ast.DictComp: "comprehension",
    ast.GeneratorExp: "generator expression",
    ast.IfExp: "conditional expression",
    ast.NamedExpr: "assignment expression",
    ast.Starred: "unpacking",
    ast.JoinedStr: "f-string",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.Slice: "slice",
}

_ALLOWED_HINT: Final = (
    "allowed: comparisons, and/or/not, in, literals, state keys and state_key['literal']"
)

_IS_HINT: Final = "'is' and 'is not' test identity; compare values with == and !="

_UNHASHABLE: Final = (ast.List, ast.Dict, ast.Set)


def _shown(text: str) -> str:
    """``repr`` of ``text``, shortened so an error message stays readable."""
    if len(text) <= _SHOWN:
        return repr(text)
    return f"{text[:_SHOWN]!r}... ({len(text):,} characters)"


class ConditionSyntaxError(ValueError):
    """A condition string is malformed or uses something outside the safe subset."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"condition {_shown(source)}: {problem}")
        self.source = source
        """The condition as written."""
        self.problem = problem
        """What is wrong and where."""


class MissingStateKey(KeyError):
    """A condition names a state key the state does not have."""


ALIASES: Final = {"last_output": "__last_output__"}
"""Names conditions may use for engine keys (dunder names are not allowed)."""


RUN_NAMES: Final = frozenset({"usage", "elapsed_seconds"})
"""Names a condition may use for the run itself, when the state has no key of that name:
``usage`` (``usage["total_tokens"]``, ``usage["cost_usd"]``...) and ``elapsed_seconds``."""


def _lookup(data: Mapping[str, Any], name: str) -> Any:
    try:
        return data[name]
    except KeyError:
        alias = ALIASES.get(name)
        if alias is not None and alias in data:
            return data[alias]
        if name in RUN_NAMES:
            found = _run_value(name)
            if found is not None:
                return found
        raise MissingStateKey(name) from None


def _run_value(name: str) -> Any:
    from selectgraph.core._control import current_control

    control = current_control()
    if control is None:
        return None
    if name == "elapsed_seconds":
        return control.elapsed
    usage = control.usage
    return {**usage.to_dict(), "total_tokens": usage.total_tokens}


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed condition; call it with ``state.data`` to get a bool."""

    source: str
    """The condition as written."""
    names: frozenset[str]
    """State keys the condition reads."""
    _evaluate: Evaluator

    def __call__(self, data: Mapping[str, Any]) -> bool:
        return bool(self._evaluate(data))

    @property
    def evaluator(self) -> Evaluator:
        """The raw evaluator (truthy/falsy result), for the runner's fast path."""
        return self._evaluate

    def __str__(self) -> str:
        return self.source


def parse_condition(source: str) -> Condition:
    """Parse ``source`` into a :class:`Condition`.

    Raises:
        ConditionSyntaxError: the text is not a valid, safe condition.
    """
    if not isinstance(source, str) or not source.strip():
        raise ConditionSyntaxError(str(source), "a condition must be a non-empty string")
    if len(source) > MAX_CONDITION_LENGTH:  # before parsing: the parser's cost grows with it
        raise ConditionSyntaxError(
            source,
            f"it is {len(source):,} characters long; the limit is {MAX_CONDITION_LENGTH:,} "
            "(MAX_CONDITION_LENGTH)",
        )
    text = source.strip()
    # Columns in messages count from the condition as written, not from ``text``.
    lead = source[: len(source) - len(source.lstrip())]
    shift = len(lead) - (lead.rfind("\n") + 1)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        column = (exc.offset or 0) + (shift if exc.lineno == 1 else 0)
        where = f" at column {column}" if exc.offset else ""
        detail = "" if exc.msg == "invalid syntax" else f": {exc.msg}"
        raise ConditionSyntaxError(source, f"invalid syntax{where}{detail}") from None
    except (RecursionError, MemoryError):
        # CPython's parser reports nesting past its own stack this way.
        raise ConditionSyntaxError(source, _too_deep("")) from None
    except ValueError as exc:  # e.g. a lone surrogate, which cannot be encoded to parse
        raise ConditionSyntaxError(source, f"unreadable text: {exc}") from None
    _check_depth(source, tree.body, shift)
    names: set[str] = set()
    evaluate = _Compiler(source, text, shift, names).compile(tree.body)
    return Condition(source, frozenset(names), evaluate)


def _too_deep(where: str) -> str:
    return (
        f"it nests deeper than {MAX_CONDITION_DEPTH} levels{where} (MAX_CONDITION_DEPTH); "
        "split it into several edges or compute the value in a node"
    )


def _column(node: ast.AST, shift: int) -> int:
    """``node``'s column in the condition as written (``shift``: whitespace stripped on line 1)."""
    return getattr(node, "col_offset", 0) + (shift if getattr(node, "lineno", 1) == 1 else 0)


def _check_depth(source: str, body: ast.expr, shift: int) -> None:
    """Refuse nesting past :data:`MAX_CONDITION_DEPTH`, walking with an explicit stack.

    The compiler and the evaluator recurse once per level, so this bounds both.
    """
    stack: list[tuple[ast.AST, int]] = [(body, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_CONDITION_DEPTH:
            column = _column(node, shift)
            raise ConditionSyntaxError(source, _too_deep(f" (at column {column})"))
        for child in ast.iter_child_nodes(node):
            # Only expressions count; helper nodes (operators, contexts) add no level.
            stack.append((child, depth + 1 if isinstance(child, ast.expr) else depth))


class _Compiler:
    def __init__(self, source: str, text: str, shift: int, names: set[str]) -> None:
        self._source = source  # as written, for errors
        self._text = text  # as parsed, for source segments
        self._shift = shift
        self._names = names

    def _reject(
        self, node: ast.AST, what: str | None = None, hint: str = _ALLOWED_HINT
    ) -> ConditionSyntaxError:
        segment = ast.get_source_segment(self._text, node) or type(node).__name__
        kind = what or _DESCRIBE.get(type(node), type(node).__name__)
        column = _column(node, self._shift)
        return ConditionSyntaxError(
            self._source, f"{kind} is not allowed ({_shown(segment)} at column {column}); {hint}"
        )

    def _check_hashable(self, node: ast.expr, role: str) -> None:
        """Refuse a literal that can never be hashed where a hash is needed.

        State keys are not checked: their values are only known at run time.
        """
        pending = [node]
        while pending:
            item = pending.pop()
            if isinstance(item, _UNHASHABLE):
                raise self._reject(
                    item,
                    f"an unhashable {type(item).__name__.lower()} literal as {role}",
                    "lists, dicts and sets cannot be hashed; use a tuple, or test membership "
                    "in a list ('x in [...]')",
                )
            if isinstance(item, ast.Tuple):
                pending.extend(item.elts)

    def _check_links(self, node: ast.Compare) -> None:
        """Per link of a (chained) comparison: identity only with singletons, hashable members."""
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, ast.Is | ast.IsNot) and (
                not (_is_singleton(left) or _is_singleton(right))
                or _is_other_literal(left)
                or _is_other_literal(right)
            ):
                word = "'is not'" if isinstance(op, ast.IsNot) else "'is'"
                raise self._reject(
                    node, f"{word} with something other than None, True or False", _IS_HINT
                )
            if isinstance(op, ast.In | ast.NotIn) and isinstance(right, ast.Set | ast.Dict):
                self._check_hashable(left, "a member tested against a set or dict literal")
            left = right

    def compile(self, node: ast.AST) -> Evaluator:
        method = getattr(self, f"_compile_{type(node).__name__}", None)
        if method is None:
            raise self._reject(node)
        return method(node)  # type: ignore[no-any-return]

    def _compile_Constant(self, node: ast.Constant) -> Evaluator:
        value = node.value
        if not isinstance(value, str | int | float | bool | type(None)):
            raise self._reject(node, f"a {type(value).__name__} literal")
        return lambda _data: value

    def _compile_Name(self, node: ast.Name) -> Evaluator:
        name = node.id
        if name.startswith("__"):
            raise self._reject(node, "a dunder name")
        self._names.add(name)

        def read(data: Mapping[str, Any]) -> Any:
            return _lookup(data, name)

        return read

    def _compile_Subscript(self, node: ast.Subscript) -> Evaluator:
        if not isinstance(node.value, ast.Name | ast.Subscript):
            raise self._reject(node, "a subscript of something other than a state key")
        index_node = node.slice
        index: Any
        if (
            isinstance(index_node, ast.UnaryOp)
            and isinstance(index_node.op, ast.USub)
            and isinstance(index_node.operand, ast.Constant)
            and type(index_node.operand.value) is int
        ):
            index = -index_node.operand.value  # items[-1]
        elif isinstance(index_node, ast.Constant) and isinstance(index_node.value, str | int):
            index = index_node.value
        else:
            raise self._reject(node, "a subscript with a non-literal index")
        if isinstance(index, str) and index.startswith("__"):
            raise self._reject(node, "a dunder key")
        container = self.compile(node.value)
        return lambda data: container(data)[index]

    def _compile_BoolOp(self, node: ast.BoolOp) -> Evaluator:
        parts = [self.compile(value) for value in node.values]
        # Python semantics: the operand that decided the outcome, not a bool
        # ("(name or 'anon') == 'anon'" must work as it does in Python).
        if isinstance(node.op, ast.And):

            def both(data: Mapping[str, Any]) -> Any:
                value: Any = True
                for part in parts:
                    value = part(data)
                    if not value:
                        return value
                return value

            return both

        def either(data: Mapping[str, Any]) -> Any:
            value: Any = False
            for part in parts:
                value = part(data)
                if value:
                    return value
            return value

        return either

    def _compile_UnaryOp(self, node: ast.UnaryOp) -> Evaluator:
        operand = self.compile(node.operand)
        if isinstance(node.op, ast.Not):
            return lambda data: not operand(data)
        if isinstance(node.op, ast.USub):
            return lambda data: -operand(data)
        if isinstance(node.op, ast.UAdd):
            return lambda data: +operand(data)
        raise self._reject(node, "bitwise inversion")

    def _compile_Compare(self, node: ast.Compare) -> Evaluator:
        self._check_links(node)
        if (
            len(node.ops) == 1
            and isinstance(node.left, ast.Name)
            and isinstance(node.comparators[0], ast.Constant)
            and not node.left.id.startswith("__")
        ):
            return self._compare_key_to_literal(node)
        left = self.compile(node.left)
        steps = [
            (_COMPARE[type(op)], self.compile(right))
            for op, right in zip(node.ops, node.comparators, strict=True)
        ]

        def compare(data: Mapping[str, Any]) -> bool:
            current = left(data)
            for test, right in steps:
                value = right(data)
                if not test(current, value):
                    return False
                current = value
            return True

        return compare

    def _compare_key_to_literal(self, node: ast.Compare) -> Evaluator:
        """``key OP literal``, the most common condition, as a single closure."""
        name = node.left.id  # type: ignore[attr-defined]
        self._compile_Constant(node.comparators[0])  # type: ignore[arg-type]  # validates it
        literal = node.comparators[0].value  # type: ignore[attr-defined]
        test = _COMPARE[type(node.ops[0])]
        self._names.add(name)

        def compare(data: Mapping[str, Any]) -> Any:
            try:
                value = data[name]
            except KeyError:
                value = _lookup(data, name)
            return test(value, literal)

        return compare

    def _compile_List(self, node: ast.List) -> Evaluator:
        items = [self.compile(item) for item in node.elts]
        return lambda data: [item(data) for item in items]

    def _compile_Tuple(self, node: ast.Tuple) -> Evaluator:
        items = [self.compile(item) for item in node.elts]
        return lambda data: tuple(item(data) for item in items)

    def _compile_Set(self, node: ast.Set) -> Evaluator:
        items = [self.compile(item) for item in node.elts]
        for item in node.elts:
            self._check_hashable(item, "a set element")
        return lambda data: {item(data) for item in items}

    def _compile_Dict(self, node: ast.Dict) -> Evaluator:
        if any(key is None for key in node.keys):
            raise self._reject(node, "dict unpacking")
        pairs = [
            (self.compile(key), self.compile(value))
            for key, value in zip(node.keys, node.values, strict=True)
            if key is not None
        ]
        for key in node.keys:
            self._check_hashable(key, "a dict key")  # type: ignore[arg-type]  # None refused above
        return lambda data: {key(data): value(data) for key, value in pairs}


def _is_singleton(node: ast.expr) -> bool:
    """Whether ``node`` is the literal None, True or False (what ``is`` may compare with)."""
    return isinstance(node, ast.Constant) and (node.value is None or type(node.value) is bool)


def _is_other_literal(node: ast.expr) -> bool:
    """Whether ``node`` is a literal other than None/True/False (``1``, ``-1``, ``'a'``, ``[]``)."""
    while isinstance(node, ast.UnaryOp):
        node = node.operand
    if isinstance(node, ast.Constant):
        return not _is_singleton(node)
    return isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict)
