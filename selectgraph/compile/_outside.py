"""A compiled graph as the outside sees it: where text input goes, what a finished run answered.

The CLI, the studio, the server, evaluations and graphs used as tools all start
runs from text and read an answer back; these two rules keep them in agreement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from selectgraph.core._messages import Message, Role
from selectgraph.core._state import GraphState

if TYPE_CHECKING:
    from selectgraph.core._result import GraphResult
    from selectgraph.runtime._program import GraphProgram

__all__ = ["final_output", "input_field", "text_state"]


def input_field(graph: GraphProgram) -> str | None:
    """The state field text input goes to, if the graph names one.

    ``AgentGraph(input_field=...)`` names it; else a Pydantic state schema may, with
    ``input_field: ClassVar[str] = "question"``. None when neither does (text is then
    only the first user message).
    """
    declared = graph.settings.input_field
    if declared is not None:
        return declared
    model = graph.schema.model
    field = getattr(model, "input_field", None) if model is not None else None
    return field if isinstance(field, str) and field else None


def text_state(graph: GraphProgram, text: str) -> Any:
    """What a run given ``text`` starts from.

    An ``add_messages`` ``messages`` field (a ``MessagesState``) gets it as a user
    message; otherwise it is the run's first user message, and the declared input
    field's value too.
    """
    reducer = graph.schema.reducers.get("messages")
    if getattr(reducer, "name", None) == "add_messages":
        return {"messages": [{"role": "user", "content": text}]}
    field = input_field(graph)
    return GraphState.from_prompt(text, data={field: text}) if field else text


def final_output(result: GraphResult) -> Any:
    """What a run answered: its last output, else its last assistant message, else its data.

    An agent's answer is its last output; a graph of functions in LangGraph's style
    answers with the message it added to ``messages``, or with the state it made.
    """
    if result.content is not None:
        return result.content
    state = result.state
    field = state.data.get("messages")
    messages = field if isinstance(field, list) and field else state.messages
    last = messages[-1] if messages else None
    if isinstance(last, Message) and last.role is Role.ASSISTANT:
        return last.text
    return {k: v for k, v in state.data.items() if not k.startswith("__")}
