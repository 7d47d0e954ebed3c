"""The seed's trace steps: ``result.trace.steps``, a view of the events in ten kinds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from selectgraph.observe._events import (
    CheckpointSaved,
    EdgeFired,
    GraphEvent,
    InterruptRaised,
    LoopDetected,
    NodeFinished,
    NodeStarted,
    ParallelFinished,
    ParallelStarted,
    RunResumed,
    StallDetected,
)

__all__ = ["StepType", "TraceStep", "steps_of"]


class StepType(StrEnum):
    """The kind of a :class:`TraceStep` (seed 004, "Trace Steps")."""

    GRAPH_NODE_START = "graph_node_start"
    """A node began (:class:`~selectgraph.observe.NodeStarted`)."""
    GRAPH_NODE_END = "graph_node_end"
    """A node finished (:class:`~selectgraph.observe.NodeFinished`); has ``duration_ms``."""
    GRAPH_ROUTING = "graph_routing"
    """Routing chose the next node (:class:`~selectgraph.observe.EdgeFired`); has
    ``from_node`` and ``to_node``."""
    GRAPH_CHECKPOINT = "graph_checkpoint"
    """A checkpoint was written (:class:`~selectgraph.observe.CheckpointSaved`)."""
    GRAPH_INTERRUPT = "graph_interrupt"
    """A node asked a question (:class:`~selectgraph.observe.InterruptRaised`)."""
    GRAPH_RESUME = "graph_resume"
    """The run continued (:class:`~selectgraph.observe.RunResumed`)."""
    GRAPH_PARALLEL_START = "graph_parallel_start"
    """A fan-out started (:class:`~selectgraph.observe.ParallelStarted`); has
    ``children``."""
    GRAPH_PARALLEL_END = "graph_parallel_end"
    """A fan-out was joined (:class:`~selectgraph.observe.ParallelFinished`)."""
    GRAPH_STALL = "graph_stall"
    """The state stopped changing (:class:`~selectgraph.observe.StallDetected`)."""
    GRAPH_LOOP_DETECTED = "graph_loop_detected"
    """A node was about to rerun on an identical state
    (:class:`~selectgraph.observe.LoopDetected`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceStep:
    """One entry of ``result.trace.steps``; fields a kind does not have are ``None``."""

    type: StepType
    """What kind of step it is; it says which of the fields below are set."""
    step_number: int
    """The graph's step counter when it happened."""
    timestamp: float
    """Wall-clock time of the event it comes from (``time.time()``)."""
    node_name: str | None = None
    """The node it is about (a fan-out's or a routing's source node); ``None`` when there
    is none, as for GRAPH_CHECKPOINT."""
    duration_ms: float | None = None
    """GRAPH_NODE_END and GRAPH_PARALLEL_END."""
    from_node: str | None = None
    """GRAPH_ROUTING."""
    to_node: str | None = None
    """GRAPH_ROUTING (``"END"`` for END)."""
    checkpoint_id: str | None = None
    """GRAPH_CHECKPOINT and GRAPH_RESUME."""
    interrupt_key: str | None = None
    """GRAPH_INTERRUPT and GRAPH_RESUME: the interrupt id."""
    children: tuple[str, ...] = ()
    """GRAPH_PARALLEL_START: the branches."""
    namespace: tuple[str, ...] = ()
    """Subgraph path, as on the event."""


def steps_of(events: Iterable[GraphEvent]) -> list[TraceStep]:
    """The trace steps the seed defines, from a run's events, in order."""
    return [step for event in events if (step := _step(event)) is not None]


def _step(event: GraphEvent) -> TraceStep | None:
    match event:
        case NodeStarted():
            return _made(event, type=StepType.GRAPH_NODE_START, node_name=event.node)
        case NodeFinished():
            return _made(
                event,
                type=StepType.GRAPH_NODE_END,
                node_name=event.node,
                duration_ms=event.duration_ms,
            )
        case EdgeFired():
            return _made(
                event,
                type=StepType.GRAPH_ROUTING,
                node_name=event.source,
                from_node=event.source,
                to_node=event.next_node,
            )
        case CheckpointSaved():
            return _made(
                event,
                type=StepType.GRAPH_CHECKPOINT,
                checkpoint_id=event.checkpoint_id,
            )
        case InterruptRaised():
            return _made(
                event,
                type=StepType.GRAPH_INTERRUPT,
                node_name=event.node,
                interrupt_key=event.interrupt_id,
            )
        case RunResumed():
            return _made(
                event,
                type=StepType.GRAPH_RESUME,
                node_name=event.node,
                interrupt_key=event.interrupt_id,
                checkpoint_id=event.checkpoint_id,
            )
        case ParallelStarted():
            return _made(
                event,
                type=StepType.GRAPH_PARALLEL_START,
                node_name=event.source,
                children=event.branches,
            )
        case ParallelFinished():
            return _made(
                event,
                type=StepType.GRAPH_PARALLEL_END,
                node_name=event.source,
                duration_ms=event.duration_ms,
            )
        case StallDetected():
            return _made(event, type=StepType.GRAPH_STALL, node_name=event.node)
        case LoopDetected():
            return _made(event, type=StepType.GRAPH_LOOP_DETECTED, node_name=event.node)
    return None


def _made(event: GraphEvent, **fields: Any) -> TraceStep:
    return TraceStep(
        step_number=event.step, timestamp=event.timestamp, namespace=event.namespace, **fields
    )
