"""Text input: which state field a graph takes it in, for the CLI and the studio alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from selectgraph.core._state import GraphState

if TYPE_CHECKING:
    from selectgraph.build._builder import AgentGraph

__all__ = ["input_field_of", "text_input"]


def input_field_of(graph: AgentGraph) -> str | None:
    """The state field text input goes to: its state schema's ``input_field`` ClassVar.

    A graph declares it on its Pydantic state schema, e.g. ``input_field: ClassVar[str]
    = "question"``; None when it declares none (text is then the first user message).
    """
    model = graph.compile().schema.model
    field = getattr(model, "input_field", None) if model is not None else None
    return field if isinstance(field, str) and field else None


def text_input(graph: AgentGraph, text: str) -> Any:
    """What a run given ``text`` starts from: the user's message, in the input field too."""
    field = input_field_of(graph)
    return GraphState.from_prompt(text, data={field: text}) if field else text
