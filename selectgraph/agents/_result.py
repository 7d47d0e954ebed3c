"""Results: what one agent run produced — its answer, conversation, tools, usage and verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from selectgraph.core._messages import Message, ToolCall
from selectgraph.core._serialization import library_type
from selectgraph.core._usage import NO_USAGE, Usage

if TYPE_CHECKING:
    from selectgraph.agents._verdict import Verdict
    from selectgraph.providers._base import StructuredMode

__all__ = ["AgentChunk", "AgentResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResult:
    """The outcome of one agent run (every judge attempt included)."""

    content: str
    """The final answer's text (JSON text when an output schema was asked for)."""
    output: Any = None
    """The parsed ``output_schema`` instance, when one was asked for."""
    messages: tuple[Message, ...] = ()
    """The whole conversation sent and received, system prompt included."""
    new_messages: tuple[Message, ...] = ()
    """Messages this run added, in order: assistant turns, tool results, and the
    user turns it inserted itself (judge feedback, schema re-asks)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Every tool call the model made."""
    usage: Usage = NO_USAGE
    """Tokens and cost of every model call of the run."""
    model: str = ""
    """The model that answered."""
    duration_ms: float = 0.0
    """Wall time of the run."""
    iterations: int = 0
    """Model calls made."""
    attempts: int = 1
    """Answers produced (more than one when a judge asked for retries)."""
    verdicts: tuple[Verdict, ...] = ()
    """The judge's verdict on each attempt."""
    finish_reason: str | None = None
    """Why the last model call stopped."""
    structured_mode: StructuredMode | None = None
    """How the last model call asked for ``output_schema``: ``"json_schema"`` (the
    server enforced the schema), ``"json_object"`` (JSON only, schema sent along) or
    ``"instructions"`` (the prompt alone); ``None`` without an output schema. Either
    way the answer was validated against the schema."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe summary (messages included)."""
        output = (
            self.output.model_dump(mode="json")
            if hasattr(self.output, "model_dump")
            else self.output
        )
        return {
            "content": self.content,
            "output": output,
            "messages": [m.to_dict() for m in self.messages],
            "new_messages": [m.to_dict() for m in self.new_messages],
            "tool_calls": [c.model_dump(mode="json") for c in self.tool_calls],
            "usage": self.usage.to_dict(),
            "model": self.model,
            "duration_ms": self.duration_ms,
            "iterations": self.iterations,
            "attempts": self.attempts,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "finish_reason": self.finish_reason,
            "structured_mode": self.structured_mode,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentChunk:
    """A piece of a streamed agent run."""

    delta: str = ""
    """Text generated since the previous chunk."""
    tool_call: ToolCall | None = None
    """A tool call the model just made (before it runs)."""
    tool_result: Message | None = None
    """A tool's result, as sent back to the model."""
    result: AgentResult | None = field(default=None, repr=False)
    """Set on the final chunk only."""


library_type(AgentResult)
