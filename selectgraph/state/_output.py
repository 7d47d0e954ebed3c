"""Output: what a node produced, normalised for the merge (a NodeOutput)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from selectgraph.core._sentinels import EndType
from selectgraph.core._usage import Usage
from selectgraph.state._views import ViewWrites

__all__ = ["NodeOutput"]

NO_UPDATE: Final[Mapping[str, Any]] = {}
"""The update of an output that updates nothing (shared, never changed)."""


class NodeOutput:
    """A node's output, normalised for the merge.

    A plain slotted class: one is built per step, and a dataclass with
    default factories would cost several times more.
    """

    __slots__ = ("agent_result", "goto", "update", "usage", "writes")

    def __init__(
        self,
        update: Mapping[str, Any] = NO_UPDATE,
        writes: ViewWrites | None = None,
        goto: str | EndType | None = None,
        usage: Usage | None = None,
        agent_result: Any = None,
    ) -> None:
        self.update = update
        """The partial update, merged through the field reducers."""
        self.writes = writes
        """Whole-value writes made through the view (``None`` when there were none)."""
        self.goto = goto
        """An explicit next node, overriding the node's edges."""
        self.usage = usage
        """Model usage of the node (agent and graph nodes)."""
        self.agent_result = agent_result
        """The AgentResult, for agent nodes."""

    def written_keys(self) -> set[str]:
        """Every ``data`` key this output touches."""
        keys = set(self.update)
        if self.writes is not None:
            keys.update(self.writes.assignments)
            keys.update(self.writes.deletions)
        return keys
