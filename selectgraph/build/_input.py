"""Input from outside (the CLI, the studio): where text goes, and how deep JSON may nest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from selectgraph.compile._outside import input_field, text_state
from selectgraph.core._state import GraphState

if TYPE_CHECKING:
    from selectgraph.build._builder import AgentGraph

__all__ = ["MAX_INPUT_DEPTH", "graph_input", "input_field_of", "json_depth", "text_input"]

MAX_INPUT_DEPTH: Final = 100
"""How deeply JSON from outside may nest: as deep as a state is stored (its serializer's
``max_depth``), so what is accepted can be saved."""


def input_field_of(graph: AgentGraph) -> str | None:
    """The state field text input goes to: its state schema's ``input_field`` ClassVar."""
    return input_field(graph.compile())


def text_input(graph: AgentGraph, text: str) -> Any:
    """What a run given ``text`` starts from: the user's message, in the input field too."""
    field = input_field_of(graph)
    return GraphState.from_prompt(text, data={field: text}) if field else text


def graph_input(graph: AgentGraph, source: Any, value: Any) -> Any:
    """What a run starts from, given input from outside: text, or a JSON object (the state).

    A ``source`` with a ``graph_input`` (a SupervisorAgent's task, a research app's
    question) shapes it. Otherwise text goes to an ``add_messages`` ``messages`` field
    as a user message when the state has one (a ``MessagesState``), else to the graph's
    declared input field (see :func:`input_field_of`), or is the first user message;
    a mapping is the state (or, on a thread, an update of it).
    """
    if value is None:
        return None
    shape = getattr(source, "graph_input", None)
    if callable(shape):
        return shape(value)
    if not isinstance(value, str):
        return value
    return text_state(graph.compile(), value)


def json_depth(value: Any) -> int:
    """How many containers deep ``value`` nests; iterative, as it may be deep."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest
