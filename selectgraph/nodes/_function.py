"""Adapters: turn whatever was passed to add_node() into something the runner can await."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from selectgraph.core._callables import (
    callable_name,
    is_async_callable,
    is_generator_callable,
    positional_arity,
    takes_context,
)
from selectgraph.nodes._spec import NodeAdapter, NodeContext
from selectgraph.state._views import StateView

__all__ = ["FunctionAdapter", "make_adapter", "reject_class"]


class FunctionAdapter:
    """A plain function node: ``fn(state)`` or ``fn(state, context)``, sync or async."""

    kind = "function"
    executor_retries = True

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        arity = positional_arity(fn)
        if arity == 0:
            raise TypeError(
                f"node {name!r}: {callable_name(fn)} takes no arguments; a node function "
                "takes the state: def node(state) or def node(state, context)"
            )
        required = _required_parameters(fn)
        if len(required) > 2:
            raise TypeError(
                f"node {name!r}: {callable_name(fn)} requires {len(required)} arguments "
                f"({', '.join(required)}); a node function is called with the state and "
                "at most a context: def node(state) or def node(state, context). Give the "
                "others defaults, or bind them first (functools.partial)"
            )
        self.fn = fn
        self.name = callable_name(fn)
        self.is_async = is_async_callable(fn)
        self.wants_context = takes_context(fn)

    async def __call__(self, state: StateView, context: NodeContext | None) -> Any:
        result = self.fn(state, context) if self.wants_context else self.fn(state)
        if self.is_async:
            return await result
        return result

    def __repr__(self) -> str:
        return f"FunctionAdapter({self.name})"


def _required_parameters(fn: Callable[..., Any]) -> list[str]:
    """Names of the parameters a call must supply (no default, not ``*args``/``**kwargs``)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [
        parameter.name
        for parameter in signature.parameters.values()
        if parameter.default is inspect.Parameter.empty
        and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def reject_class(name: str, node: Any) -> None:
    """Refuse a class passed where a node belongs (``add_node("w", Agent)``).

    Calling a class with the state would build an instance instead of an update,
    and fail only when the run reached the node.

    Raises:
        TypeError: ``node`` is a class.
    """
    if isinstance(node, type):
        kind = "an Agent" if hasattr(node, "__selectgraph_node__") else "a node"
        raise TypeError(
            f"node {name!r}: got the class {node.__name__}, not {kind}; pass an instance "
            f"(e.g. {node.__name__}(...)) or a function of the state"
        )


def make_adapter(name: str, node: Any) -> NodeAdapter:
    """The adapter for ``node``: an agent, a graph, or a function.

    Objects that know how to be a node (agents, graphs) implement
    ``__selectgraph_node__(name) -> NodeAdapter``; anything else callable is a
    function node.

    Raises:
        TypeError: ``node`` cannot be a node, naming it and why.
    """
    reject_class(name, node)
    hook = getattr(node, "__selectgraph_node__", None)
    if hook is not None:
        adapter: NodeAdapter = hook(name)
        return adapter
    if callable(node):
        if is_generator_callable(node):
            from selectgraph.nodes._generator import GeneratorAdapter

            return GeneratorAdapter(name, node)
        return FunctionAdapter(name, node)
    raise TypeError(
        f"node {name!r}: expected an Agent, a graph, or a function of the state, "
        f"got {type(node).__name__} {node!r}"
    )
