"""Output to outside (the server, evaluations): what a finished run answered."""

from __future__ import annotations

from typing import Any

from selectgraph.core._messages import Message, Role
from selectgraph.core._result import GraphResult

__all__ = ["final_output"]


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
