"""Prompts: the layered system prompt (identity, narrative, focus) and the text agents are fed.

The system prompt is an onion. The outer layer, identity, is the agent's
persona and never changes. The middle layer, narrative, is the graph's goal
and where this step stands in the workflow. The inner layer, focus, is this
node's own instructions and output requirements. Every node of a graph shares
the outer two and brings its own focus.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from selectgraph.core._messages import Message

__all__ = [
    "PromptLayers",
    "output_requirements",
    "revision_note",
    "transition_marker",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptLayers:
    """The three layers of an agent's system prompt."""

    identity: str = ""
    """Who the agent is (its persona); stable across nodes."""
    narrative: str = ""
    """The graph's goal and the workflow around this step."""
    focus: str = ""
    """This node's instructions, output requirements and revision notes."""

    def render(self) -> str:
        """The system prompt, outermost layer first; empty layers are left out."""
        sections = [
            ("Identity", self.identity),
            ("Goal", self.narrative),
            ("Your task", self.focus),
        ]
        return "\n\n".join(f"# {title}\n{text.strip()}" for title, text in sections if text.strip())

    def message(self) -> Message | None:
        """The system message, or ``None`` when every layer is empty."""
        text = self.render()
        return Message.system(text) if text else None


def narrative_for(goal: str, graph: str, node: str, workflow: list[str]) -> str:
    """The middle layer: the graph's goal and where ``node`` stands in it."""
    lines = []
    if goal.strip():
        lines.append(goal.strip())
    if workflow:
        others = ", ".join(step for step in workflow if step != node)
        lines.append(
            f"You are step {node!r} of the workflow {graph!r}"
            + (f" (other steps: {others})." if others else ".")
        )
    return "\n".join(lines)


def output_requirements(schema: dict[str, Any] | None) -> str:
    """Focus-layer text asking for JSON matching ``schema`` (empty without one)."""
    if schema is None:
        return ""
    return (
        "Answer with a single JSON object, and nothing else, that matches this JSON schema:\n"
        + json.dumps(schema, ensure_ascii=False)
    )


def revision_note(node: str, visit: int, previous: Any) -> str:
    """Focus-layer text for a node running again: which visit, and what it said last time."""
    note = (
        f"This is visit {visit} of step {node!r}. Build on your previous answer rather than "
        "starting over, and take into account everything said since."
    )
    if previous is not None and str(previous).strip():
        note += f"\nYour previous answer was:\n{previous}"
    return note


def transition_marker(previous_node: str | None, node: str, focus: str) -> Message:
    """The marker inserted into a continuous conversation when the next node takes over."""
    done = f"Step {previous_node!r} is done. " if previous_node else ""
    task = focus.strip().splitlines()[0] if focus.strip() else "continue the work above"
    return Message.user(
        f"[workflow] {done}Step {node!r} takes over now: {task}",
        metadata={"transition": True, "node": node},
    )
