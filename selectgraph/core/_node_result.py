"""Node results: what one execution of one node produced."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from selectgraph.core._serialization import decode, encode, library_type
from selectgraph.core._usage import Usage

if TYPE_CHECKING:
    from selectgraph.core._policies import Outcome

__all__ = ["NodeResult"]


# A NodeResult is built on every step, and a frozen dataclass costs about three times
# as much to build; treat it as read-only.
@dataclass(slots=True)
class NodeResult:
    """What one execution of one node produced (read-only)."""

    node: str
    """The node's name."""
    step: int
    """The run step it ran at (1-based)."""
    visit: int
    """Which visit of this node it was (1-based)."""
    outcome: Outcome
    """``"success"``, ``"failure"`` or ``"skipped"``."""
    output: Mapping[str, Any] | None = None
    """The writes merged into ``data`` (partial update and assignments)."""
    content: Any = None
    """The node's ``last_output``, when it set one."""
    error: str | None = None
    """The failure, as ``Type: message``, when the node failed."""
    attempts: int = 1
    """Attempts made."""
    duration_ms: float = 0.0
    """Wall time, retries included."""
    usage: Usage | None = None
    """Model usage, for nodes that call models."""
    agent_result: Any = None
    """The AgentResult, for agent nodes."""

    def to_dict(self, path: str = "result") -> dict[str, Any]:
        """A JSON-safe dict; ``path`` names this result in serialization errors."""
        return {
            "node": self.node,
            "step": self.step,
            "visit": self.visit,
            "outcome": self.outcome,
            "output": None if self.output is None else encode(dict(self.output), f"{path}.output"),
            "content": encode(self.content, f"{path}.content"),
            "error": self.error,
            "attempts": self.attempts,
            "duration_ms": self.duration_ms,
            "usage": None if self.usage is None else self.usage.to_dict(),
            "agent_result": encode(self.agent_result, f"{path}.agent_result"),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NodeResult:
        """Rebuild a result written by :meth:`to_dict`."""
        return cls(
            node=raw["node"],
            step=raw["step"],
            visit=raw["visit"],
            outcome=raw["outcome"],
            output=None if raw.get("output") is None else decode(raw["output"]),
            content=decode(raw.get("content")),
            error=raw.get("error"),
            attempts=raw.get("attempts", 1),
            duration_ms=raw.get("duration_ms", 0.0),
            usage=None if raw.get("usage") is None else Usage.from_dict(raw["usage"]),
            agent_result=decode(raw.get("agent_result")),
        )


library_type(NodeResult, formerly=["selectgraph.graph._result"])
