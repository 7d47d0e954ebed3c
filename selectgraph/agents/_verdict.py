"""Verdicts: what a judge decides about one answer (accept, retry, escalate)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from selectgraph.core._serialization import library_type
from selectgraph.core._usage import Usage

__all__ = ["JudgeDecision", "Verdict"]


class JudgeDecision(StrEnum):
    """What a judge decides about an answer."""

    ACCEPT = "accept"
    """The answer stands."""
    RETRY = "retry"
    """Try again, told the judge's feedback."""
    ESCALATE = "escalate"
    """Give up: the agent (node) fails, so on_failure edges apply."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """A judge's decision about one answer."""

    decision: JudgeDecision
    """Accept, retry or escalate."""
    feedback: str = ""
    """What to change (for RETRY) or why (for ESCALATE)."""
    usage: Usage | None = None
    """Tokens and cost of judging, for judges that call a model."""

    @classmethod
    def accept(cls, feedback: str = "") -> Verdict:
        """An ACCEPT verdict."""
        return cls(decision=JudgeDecision.ACCEPT, feedback=feedback)

    @classmethod
    def retry(cls, feedback: str) -> Verdict:
        """A RETRY verdict with the feedback the agent will be given."""
        return cls(decision=JudgeDecision.RETRY, feedback=feedback)

    @classmethod
    def escalate(cls, feedback: str) -> Verdict:
        """An ESCALATE verdict."""
        return cls(decision=JudgeDecision.ESCALATE, feedback=feedback)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict."""
        return {
            "decision": self.decision.value,
            "feedback": self.feedback,
            "usage": None if self.usage is None else self.usage.to_dict(),
        }


library_type(JudgeDecision, formerly=["selectgraph.agents._judge"])
library_type(Verdict, formerly=["selectgraph.agents._judge"])
