"""Events: the record every event of a run shares, and the kinds of events there are.

The event classes themselves (NodeStarted, RunFinished...) are in ``observe/_events.py``;
results and errors read a trace through this base alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from selectgraph.core._branch import BranchRef

__all__ = ["GraphEvent", "GraphEventType"]


class GraphEventType(StrEnum):
    """The kind of a :class:`GraphEvent`, for code that prefers comparing to isinstance.

    The seed's twelve names (``GRAPH_START`` ... ``ERROR``) are the members;
    selectgraph's own names (``RUN_STARTED``, ``NODE_FINISHED``...) are aliases
    of the same members, so ``GraphEventType.NODE_START is GraphEventType.NODE_STARTED``.
    Kinds the seed has no name for (retries, stalls, LLM calls...) have their own.
    """

    # The seed's twelve (seed 004, "GraphEventType").
    GRAPH_START = "graph_start"
    """A run began: :class:`RunStarted`."""
    GRAPH_END = "graph_end"
    """A run produced its result: :class:`RunFinished`."""
    NODE_START = "node_start"
    """A node began: :class:`NodeStarted`."""
    NODE_END = "node_end"
    """A node finished and its output was merged: :class:`NodeFinished`."""
    NODE_CHUNK = "node_chunk"
    """A streaming node produced more text: :class:`NodeChunk`."""
    ROUTING = "routing"
    """Routing chose the next node: :class:`EdgeFired`."""
    GRAPH_INTERRUPT = "graph_interrupt"
    """A generator node asked a question: :class:`InterruptRaised`."""
    GRAPH_RESUME = "graph_resume"
    """A paused or stopped run continued: :class:`RunResumed`."""
    PARALLEL_START = "parallel_start"
    """A fan-out started its branches: :class:`ParallelStarted`."""
    PARALLEL_END = "parallel_end"
    """A fan-out's branches finished and were joined: :class:`ParallelFinished`."""
    CHECKPOINT = "checkpoint"
    """A checkpoint was written: :class:`CheckpointSaved`."""
    ERROR = "error"
    """The run raised: :class:`RunFailed`."""
    # selectgraph's own kinds.
    NODE_RETRIED = "node_retried"
    """A node attempt failed and will be retried: :class:`NodeRetried`."""
    STALL_DETECTED = "stall_detected"
    """The state stopped changing: :class:`StallDetected`."""
    LOOP_DETECTED = "loop_detected"
    """A node was about to rerun on an identical state: :class:`LoopDetected`."""
    RUN_CANCELLED = "run_cancelled"
    """The run was stopped from outside: :class:`RunCancelled`."""
    RUN_PAUSED = "run_paused"
    """The run stopped where it can continue from: :class:`RunPaused`."""
    NODE_CACHE_HIT = "node_cache_hit"
    """A node's cached output was used: :class:`NodeCacheHit`."""
    LLM_CALL_STARTED = "llm_call_started"
    """An agent is about to call its model: :class:`LLMCallStarted`."""
    LLM_CALL_FINISHED = "llm_call_finished"
    """A model call returned or failed: :class:`LLMCallFinished`."""
    TOOL_CALL_STARTED = "tool_call_started"
    """An agent started a tool: :class:`ToolCallStarted`."""
    TOOL_CALL_FINISHED = "tool_call_finished"
    """A tool call ended: :class:`ToolCallFinished`."""
    BUDGET_EXCEEDED = "budget_exceeded"
    """A budget refused the next model call or step: :class:`BudgetExceeded`."""
    CUSTOM = "custom"
    """Data a node published: :class:`CustomEvent`."""
    SUPERVISOR_REPLAN = "supervisor_replan"
    """A supervisor made a new plan: :class:`SupervisorReplanned`."""
    # Aliases: the names these kinds had before the seed's were adopted.
    RUN_STARTED = "graph_start"
    """Alias of :attr:`GRAPH_START`."""
    RUN_FINISHED = "graph_end"
    """Alias of :attr:`GRAPH_END`."""
    NODE_STARTED = "node_start"
    """Alias of :attr:`NODE_START`."""
    NODE_FINISHED = "node_end"
    """Alias of :attr:`NODE_END`."""
    EDGE_FIRED = "routing"
    """Alias of :attr:`ROUTING`."""
    INTERRUPT_RAISED = "graph_interrupt"
    """Alias of :attr:`GRAPH_INTERRUPT`."""
    RUN_RESUMED = "graph_resume"
    """Alias of :attr:`GRAPH_RESUME`."""
    PARALLEL_STARTED = "parallel_start"
    """Alias of :attr:`PARALLEL_START`."""
    PARALLEL_FINISHED = "parallel_end"
    """Alias of :attr:`PARALLEL_END`."""
    CHECKPOINT_SAVED = "checkpoint"
    """Alias of :attr:`CHECKPOINT`."""
    RUN_FAILED = "error"
    """Alias of :attr:`ERROR`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphEvent:
    """Something that happened in a run."""

    type: ClassVar[GraphEventType]
    run_id: str
    """The run this event belongs to."""
    graph: str
    """Name of the graph that emitted it (a subgraph's own name inside a subgraph)."""
    step: int
    """The emitting graph's step counter (0 before the first node)."""
    timestamp: float
    """Wall-clock time (``time.time()``)."""
    namespace: tuple[str, ...] = ()
    """Path of subgraph nodes from the outermost graph; empty for the top-level graph."""
    branch: BranchRef | None = None
    """The fan-out branch the event comes from (its label, index and enclosing branches);
    ``None`` outside any branch."""

    @property
    def node_name(self) -> str | None:
        """The node the event is about (the seed's field name); ``None`` when there is none."""
        return getattr(self, "node", None)

    @property
    def node_path(self) -> tuple[str, ...]:
        """Where the node sits: subgraph nodes from the outermost graph, then the node itself."""
        node = self.node_name
        return self.namespace if node is None else (*self.namespace, node)
