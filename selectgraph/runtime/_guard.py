"""How a run is let in and out: guardrails on its prompt and output, and the fast route."""

from __future__ import annotations

from typing import Any

from selectgraph.core._messages import Message, Role
from selectgraph.core._run_errors import RoutingError
from selectgraph.core._state import LAST_OUTPUT, GraphState

__all__ = ["aguard_input", "fast_route_target", "guard_input", "guard_output", "guard_start"]


def _last_user(state: GraphState) -> int | None:
    """Where the input guardrails look: the state's last user message (the prompt)."""
    for index in range(len(state.messages) - 1, -1, -1):
        if state.messages[index].role is Role.USER:
            return index
    return None


def _replace(state: GraphState, index: int, text: str) -> None:
    old = state.messages[index]
    if old.text != text:
        state.messages[index] = Message.user(text, name=old.name, metadata=dict(old.metadata))


def guard_input(pipeline: Any, state: GraphState) -> None:
    """Check a run's prompt in its (engine-owned) state; a rewrite replaces it.

    Raises:
        GuardrailBlocked: the prompt was refused; nothing has run.
    """
    index = _last_user(state)
    if index is not None:
        _replace(state, index, pipeline.check(state.messages[index].text, stage="input"))


async def aguard_input(pipeline: Any, state: GraphState) -> None:
    """:func:`guard_input` for pipelines with async guardrails."""
    index = _last_user(state)
    if index is not None:
        _replace(state, index, await pipeline.acheck(state.messages[index].text, stage="input"))


def guard_output(pipeline: Any, state: GraphState) -> None:
    """Check the run's final content; a rewrite replaces it in the state.

    Raises:
        GuardrailBlocked: the content was refused (it stays in ``state`` for the caller
            who catches this; the error's ``result`` carries the run's result).
    """
    content = state.data.get(LAST_OUTPUT)
    if not isinstance(content, str):
        return
    checked = pipeline.check(content, stage="output")
    if checked != content:
        state.last_output = checked


async def guard_start(graph: Any, state: GraphState) -> str | None:
    """Run the graph's input guardrails on ``state``; the node a fast route chose, if any."""
    guard = graph.settings.input_guardrails
    if guard is not None:
        if guard.is_async:
            await aguard_input(guard, state)
        else:
            guard_input(guard, state)
    return fast_route_target(graph, state)


def fast_route_target(graph: Any, state: GraphState) -> str | None:
    """Seed 004's shortcut: the one node ``fast_route_fn`` says to run, or ``None``.

    Raises:
        RoutingError: it returned something that is not a node of the graph.
    """
    fn = graph.settings.fast_route_fn
    if fn is None:
        return None
    chosen = fn(state)
    if chosen is None:
        return None
    if not isinstance(chosen, str) or chosen not in graph.nodes:
        raise RoutingError(
            f"fast_route_fn returned {chosen!r}, which is not a node of graph {graph.name!r}; "
            f"return a node name or None. Nodes: {', '.join(sorted(graph.nodes))}"
        )
    return chosen
