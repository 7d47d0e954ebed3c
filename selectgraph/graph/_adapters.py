"""Adapters: turn whatever was passed to add_node() into something the runner can await."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from selectgraph._callables import (
    callable_name,
    is_async_callable,
    is_generator_callable,
    positional_arity,
)
from selectgraph.graph._nodes import NodeAdapter, NodeContext
from selectgraph.graph._views import StateView

__all__ = ["FunctionAdapter", "make_adapter"]


class FunctionAdapter:
    """A plain function node: ``fn(state)`` or ``fn(state, context)``, sync or async."""

    kind = "function"
    executor_retries = True

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        if is_generator_callable(fn):
            raise TypeError(
                f"node {name!r}: {callable_name(fn)} is a generator function; generator "
                "nodes (pausing for human input) are not supported yet — return a mapping "
                "of updates instead"
            )
        arity = positional_arity(fn)
        if arity == 0:
            raise TypeError(
                f"node {name!r}: {callable_name(fn)} takes no arguments; a node function "
                "takes the state: def node(state) or def node(state, context)"
            )
        self.fn = fn
        self.name = callable_name(fn)
        self.is_async = is_async_callable(fn)
        self.wants_context = arity is not None and arity >= 2

    async def __call__(self, state: StateView, context: NodeContext | None) -> Any:
        result = self.fn(state, context) if self.wants_context else self.fn(state)
        if self.is_async:
            return await result
        return result

    def __repr__(self) -> str:
        return f"FunctionAdapter({self.name})"


def make_adapter(name: str, node: Any) -> NodeAdapter:
    """The adapter for ``node``: an agent, a graph, or a function.

    Objects that know how to be a node (agents, graphs) implement
    ``__selectgraph_node__(name) -> NodeAdapter``; anything else callable is a
    function node.

    Raises:
        TypeError: ``node`` cannot be a node, naming it and why.
    """
    hook = getattr(node, "__selectgraph_node__", None)
    if hook is not None and not isinstance(node, type):
        adapter: NodeAdapter = hook(name)
        return adapter
    if callable(node):
        return FunctionAdapter(name, node)
    raise TypeError(
        f"node {name!r}: expected an Agent, a graph, or a function of the state, "
        f"got {type(node).__name__} {node!r}"
    )
