"""Results: what a run returns — final state, per-node results, trace and run quality."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from selectgraph.core._sentinels import EndType
from selectgraph.core._serialization import decode, encode, library_type
from selectgraph.core._usage import Usage

if TYPE_CHECKING:
    from selectgraph.core._interrupts import Interrupt
    from selectgraph.core._policies import Outcome, Quality, StopReason
    from selectgraph.core._state import GraphState
    from selectgraph.observe._events import GraphEvent

__all__ = ["GraphResult", "NodeResult"]


# NodeResult and GraphResult are built on every step / run, and a frozen
# dataclass costs about three times as much to build; treat them as read-only.
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


@dataclass(slots=True, kw_only=True)
class GraphResult:
    """The outcome of a run (read-only)."""

    state: GraphState
    """The final state."""
    steps: int
    """Nodes executed by this graph (a subgraph counts as one)."""
    trace: Sequence[GraphEvent]
    """Every event of the run, nested subgraph events included, in order."""
    quality: Quality
    """``"clean"``, ``"degraded"`` or ``"failed"``."""
    stop_reason: StopReason
    """Why the run stopped."""
    run_id: str
    """Identifier of the run (shared by its events)."""
    duration_ms: float
    """Wall time of the run."""
    stalls: int = 0
    """Stall events detected."""
    loops_detected: int = 0
    """Loop events detected."""
    max_steps_reached: bool = False
    """True when the run was cut off by ``MaxStepsAction.RETURN_WITH_FLAG``."""
    total_usage: Usage = field(default_factory=Usage)
    """Model usage summed over every node (subgraphs included)."""
    history_start: int = 0
    """Entries of ``state.history`` that predate this run (from an input state)."""
    interrupts: tuple[Interrupt, ...] = ()
    """The questions the run is waiting on, when it stopped at an interrupt."""
    checkpoint_id: str | None = None
    """The run's last checkpoint, when it has a checkpoint store."""
    observer_errors: int = 0
    """Calls to synchronous observers that raised during the run (each was logged and the
    run went on); async observers' errors are counted by ``drain()``."""

    @property
    def interrupted(self) -> bool:
        """Whether a generator node paused the run for an answer (see ``interrupts``)."""
        return bool(self.interrupts)

    @property
    def interrupt_id(self) -> str | None:
        """The first pending interrupt's id: ``graph.resume(result.interrupt_id, answer)``."""
        return self.interrupts[0].id if self.interrupts else None

    @property
    def paused(self) -> bool:
        """Whether the run stopped at a pause gate, a PauseToken or an interrupt."""
        return self.stop_reason in ("paused", "interrupted")

    @property
    def node_results(self) -> dict[str, list[NodeResult]]:
        """Every execution of every node in this run, by node name, in order."""
        grouped: dict[str, list[NodeResult]] = {}
        for name, result in list(self.state.history)[self.history_start :]:
            if isinstance(result, NodeResult):
                grouped.setdefault(name, []).append(result)
        return grouped

    @property
    def content(self) -> Any:
        """The last node output (``state.last_output``)."""
        return self.state.last_output

    @property
    def node_order(self) -> list[str]:
        """Names of the nodes this graph ran, in order (subgraph internals excluded)."""
        from selectgraph.observe._events import NodeStarted

        return [e.node for e in self.trace if isinstance(e, NodeStarted) and not e.namespace]

    @property
    def fired_edges(self) -> list[tuple[str, str | EndType]]:
        """``(source, target)`` of every edge this graph took, in order."""
        from selectgraph.observe._events import EdgeFired

        return [
            (e.source, e.target) for e in self.trace if isinstance(e, EdgeFired) and not e.namespace
        ]


library_type(NodeResult, formerly=["selectgraph.graph._result"])
