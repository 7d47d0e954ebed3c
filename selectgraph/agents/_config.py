"""Config: how an agent talks to its model, and how much of the conversation it sees."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from selectgraph.core._policies import Conversation
from selectgraph.providers._base import ToolChoice

__all__ = ["AgentConfig", "ContextMode", "Conversation"]


class ContextMode(StrEnum):
    """What part of the graph's conversation an agent node is shown."""

    LAST_MESSAGE = "last_message"
    """Only the most recent message (the previous node's output, or the user's prompt)."""
    LAST_N = "last_n"
    """The last ``context_n`` messages."""
    FULL = "full"
    """The whole conversation."""
    SUMMARY = "summary"
    """A model-written summary of older turns, then the last ``context_n`` verbatim."""
    CUSTOM = "custom"
    """Whatever the node's ``input_transform(state)`` returns."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """How an agent calls its model."""

    model: str | None = None
    """Model name; ``None`` uses the provider's default model."""
    name: str | None = None
    """The agent's name (also its node name in ``AgentGraph.chain``)."""
    identity: str = ""
    """Who the agent is: its persona, the outermost and stable prompt layer."""
    instructions: str = ""
    """What the agent always does, whatever node it runs as (the default focus)."""
    temperature: float | None = None
    """Sampling temperature; ``None`` leaves the model default."""
    max_tokens: int | None = None
    """Upper bound on tokens generated per model call."""
    max_tool_iterations: int = 8
    """Model calls that may request tools before the agent must answer in text."""
    tool_choice: ToolChoice | None = None
    """Tool-calling mode for the first call (``None``: provider default)."""
    output_schema: type[BaseModel] | None = None
    """Ask for JSON matching this model; the parsed instance is ``AgentResult.output``."""
    max_output_retries: int = 2
    """Times to re-ask when the answer does not match ``output_schema``."""
    extra: dict[str, Any] | None = None
    """Provider-specific request fields passed through unchanged."""

    def __post_init__(self) -> None:
        if self.max_tool_iterations < 0:
            raise ValueError("AgentConfig.max_tool_iterations must be >= 0")
        if self.max_output_retries < 0:
            raise ValueError("AgentConfig.max_output_retries must be >= 0")
