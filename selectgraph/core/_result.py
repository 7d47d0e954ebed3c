"""Results: what a run returns — final state, trace, usage and run quality."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from selectgraph.core._event import GraphEvent, GraphEventType
from selectgraph.core._node_result import NodeResult
from selectgraph.core._sentinels import EndType
from selectgraph.core._usage import Usage

if TYPE_CHECKING:
    from selectgraph.core._interrupts import Interrupt
    from selectgraph.core._policies import Quality, StopReason
    from selectgraph.core._state import GraphState

__all__ = ["GraphResult"]


# GraphResult is built on every run, and a frozen dataclass costs about three times as
# much to build; treat it as read-only.
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
    """True when the run was cut off by ``max_steps`` (RETURN_LAST or RETURN_WITH_FLAG)."""
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
        return [
            e.node_name  # type: ignore[misc]  # a node event always names its node
            for e in self.trace
            if e.type is GraphEventType.NODE_START and not e.namespace
        ]

    @property
    def fired_edges(self) -> list[tuple[str, str | EndType]]:
        """``(source, target)`` of every edge this graph took, in order."""
        return [
            (e.source, e.target)  # type: ignore[attr-defined]  # EdgeFired's fields
            for e in self.trace
            if e.type is GraphEventType.ROUTING and not e.namespace
        ]
