"""Safe expressions: parse an edge condition once, at compile time, into a fast evaluator.

Allowed: comparisons (``== != < <= > >= in not in is is not``), ``and`` / ``or``
/ ``not``, unary minus, literals (numbers, strings, booleans, None, lists,
tuples, sets, dicts), state keys as bare names, and subscripts of state keys
with a literal index (``scores['math'] >= 8``). Everything else — calls,
attribute access, arithmetic, comprehensions, lambdas, names starting with
``__`` — is rejected when the graph is built, naming the offending part.
Nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["Condition", "ConditionSyntaxError", "parse_condition"]

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


class ConditionSyntaxError(ValueError):
    """A condition string is malformed or uses something outside the safe subset."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"condition {source!r}: {problem}")
        self.source = source
        """The condition as written."""
        self.problem = problem
        """What is wrong and where."""


class MissingStateKey(KeyError):
    """A condition names a state key the state does not have."""


ALIASES: Final = {"last_output": "__last_output__"}
"""Names conditions may use for engine keys (dunder names are not allowed)."""


def _lookup(data: Mapping[str, Any], name: str) -> Any:
    try:
        return data[name]
    except KeyError:
        alias = ALIASES.get(name)
        if alias is not None and alias in data:
            return data[alias]
        raise MissingStateKey(name) from None


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
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        detail = "" if exc.msg == "invalid syntax" else f": {exc.msg}"
        raise ConditionSyntaxError(source, f"invalid syntax{where}{detail}") from None
    names: set[str] = set()
    evaluate = _Compiler(source.strip(), names).compile(tree.body)
    return Condition(source, frozenset(names), evaluate)


class _Compiler:
    def __init__(self, source: str, names: set[str]) -> None:
        self._source = source
        self._names = names

    def _reject(self, node: ast.AST, what: str | None = None) -> ConditionSyntaxError:
        segment = ast.get_source_segment(self._source, node) or type(node).__name__
        kind = what or _DESCRIBE.get(type(node), type(node).__name__)
        column = getattr(node, "col_offset", 0)
        return ConditionSyntaxError(
            self._source, f"{kind} is not allowed ({segment!r} at column {column}); {_ALLOWED_HINT}"
        )

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
        return lambda data: {item(data) for item in items}

    def _compile_Dict(self, node: ast.Dict) -> Evaluator:
        if any(key is None for key in node.keys):
            raise self._reject(node, "dict unpacking")
        pairs = [
            (self.compile(key), self.compile(value))
            for key, value in zip(node.keys, node.values, strict=True)
            if key is not None
        ]
        return lambda data: {key(data): value(data) for key, value in pairs}
