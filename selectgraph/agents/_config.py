"""Config: how an agent talks to its model, and how much of the conversation it sees."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from selectgraph.agents._defaults import DEFAULT_MAX_TOKENS
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
    max_tokens: int | None = DEFAULT_MAX_TOKENS
    """Upper bound on tokens generated per model call: answers, structured answers and
    tool calls alike (default 1024). ``None`` sends no bound, so the model may write
    until its context is full (some servers then apply their own default)."""
    max_tool_iterations: int = 8
    """Model calls that may request tools before the agent must answer in text."""
    tool_choice: ToolChoice | None = None
    """Tool-calling mode for the first call (``None``: provider default): ``"auto"``,
    ``"required"``, ``"none"``, or ``{"type": "function", "name": "calculator"}`` to make
    the model call that tool. Later calls of the same answer are ``auto``, so the
    model can answer from the tool's result."""
    output_schema: type[BaseModel] | None = None
    """Ask for JSON matching this model; the parsed instance is ``AgentResult.output``."""
    max_output_retries: int = 2
    """Times to re-ask when the answer does not match ``output_schema``."""
    extra: dict[str, Any] | None = None
    """Provider-specific request fields passed through unchanged."""

    @property
    def default_max_tokens(self) -> bool:
        """Whether ``max_tokens`` is the default bound (a budget may lower it to fit)."""
        return self.max_tokens == DEFAULT_MAX_TOKENS

    def __post_init__(self) -> None:
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool)
            or not isinstance(self.max_tokens, int)
            or self.max_tokens < 1
        ):
            raise ValueError(
                f"AgentConfig.max_tokens must be an integer >= 1 or None (no bound), "
                f"got {self.max_tokens!r}"
            )
        if self.max_tool_iterations < 0:
            raise ValueError("AgentConfig.max_tool_iterations must be >= 0")
        if self.max_output_retries < 0:
            raise ValueError("AgentConfig.max_output_retries must be >= 0")
