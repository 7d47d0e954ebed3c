"""Events: the one record of what a run did, read by the trace, astream() and observers."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from selectgraph._sentinels import EndType

if TYPE_CHECKING:
    from selectgraph.graph._policies import Outcome, Quality, StopReason
    from selectgraph.graph._result import GraphResult
    from selectgraph.runtime._branches import BranchRef

__all__ = [
    "CheckpointSaved",
    "EdgeFired",
    "GraphEvent",
    "GraphEventType",
    "InterruptRaised",
    "LoopDetected",
    "NodeCacheHit",
    "NodeChunk",
    "NodeFinished",
    "NodeRetried",
    "NodeStarted",
    "ParallelFinished",
    "ParallelStarted",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunPaused",
    "RunResumed",
    "RunStarted",
    "StallDetected",
]


class GraphEventType(StrEnum):
    """The kind of a :class:`GraphEvent`, for code that prefers comparing to isinstance."""

    RUN_STARTED = "run_started"
    NODE_STARTED = "node_started"
    NODE_FINISHED = "node_finished"
    NODE_RETRIED = "node_retried"
    NODE_CHUNK = "node_chunk"
    EDGE_FIRED = "edge_fired"
    STALL_DETECTED = "stall_detected"
    LOOP_DETECTED = "loop_detected"
    RUN_FINISHED = "run_finished"
    RUN_FAILED = "run_failed"
    RUN_CANCELLED = "run_cancelled"
    PARALLEL_STARTED = "parallel_started"
    PARALLEL_FINISHED = "parallel_finished"
    INTERRUPT_RAISED = "interrupt_raised"
    RUN_PAUSED = "run_paused"
    RUN_RESUMED = "run_resumed"
    CHECKPOINT_SAVED = "checkpoint_saved"
    NODE_CACHE_HIT = "node_cache_hit"


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


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(GraphEvent):
    """A run began at ``entry``."""

    type: ClassVar[GraphEventType] = GraphEventType.RUN_STARTED
    entry: str
    """The entry node."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeStarted(GraphEvent):
    """A node began executing."""

    type: ClassVar[GraphEventType] = GraphEventType.NODE_STARTED
    node: str
    """The node's name."""
    visit: int
    """How many times this node has run in this run, this time included."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRetried(GraphEvent):
    """A node attempt failed and will be retried after ``delay_s``."""

    type: ClassVar[GraphEventType] = GraphEventType.NODE_RETRIED
    node: str
    """The node's name."""
    attempt: int
    """The attempt that failed (1-based)."""
    error: str
    """The failure, as ``Type: message``."""
    delay_s: float
    """Seconds until the next attempt."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeFinished(GraphEvent):
    """A node finished, successfully or not, and its output was merged."""

    type: ClassVar[GraphEventType] = GraphEventType.NODE_FINISHED
    node: str
    """The node's name."""
    visit: int
    """Which visit of this node it was."""
    duration_ms: float
    """Wall time of the node, retries included."""
    outcome: Outcome
    """``"success"``, ``"failure"`` (an on_failure edge took over) or ``"skipped"``."""
    attempts: int = 1
    """Attempts made (more than 1 when retried)."""
    error: str | None = None
    """The failure, as ``Type: message``, when the outcome is not success."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgeFired(GraphEvent):
    """Routing chose the next node."""

    type: ClassVar[GraphEventType] = GraphEventType.EDGE_FIRED
    source: str
    """The node routed from."""
    target: str | EndType
    """The node routed to, or END."""
    kind: str
    """``"static"``, ``"condition"``, ``"router"``, ``"goto"`` or ``"llm"``."""
    label: str = ""
    """The condition text or router name."""
    reason: str = ""
    """For llm_decide edges: the model's reasoning, or why the fallback fired."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeChunk(GraphEvent):
    """A streaming node (an agent) produced more text."""

    type: ClassVar[GraphEventType] = GraphEventType.NODE_CHUNK
    node: str
    """The node's name."""
    delta: str
    """Text generated since the previous chunk."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StallDetected(GraphEvent):
    """The state has not changed for ``unchanged_steps`` consecutive steps."""

    type: ClassVar[GraphEventType] = GraphEventType.STALL_DETECTED
    node: str
    """The node whose step completed the stall."""
    unchanged_steps: int
    """How many steps in a row left the state unchanged."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopDetected(GraphEvent):
    """A node was about to run again on a state identical to an earlier visit."""

    type: ClassVar[GraphEventType] = GraphEventType.LOOP_DETECTED
    node: str
    """The node about to repeat itself."""
    first_step: int
    """The step at which the same node saw the same state before."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(GraphEvent):
    """The run stopped and produced a result."""

    type: ClassVar[GraphEventType] = GraphEventType.RUN_FINISHED
    steps: int
    """Nodes executed."""
    duration_ms: float
    """Wall time of the run."""
    quality: Quality
    """``"clean"``, ``"degraded"`` or ``"failed"``."""
    stop_reason: StopReason
    """Why the run stopped."""
    result: GraphResult | None = field(default=None, repr=False, compare=False)
    """The run's result, on the event listeners and ``astream()`` receive.

    ``None`` on the copy kept in the trace: the result holds the trace, and a
    cycle between them would keep every finished run's state alive until the
    cyclic garbage collector ran.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFailed(GraphEvent):
    """The run raised."""

    type: ClassVar[GraphEventType] = GraphEventType.RUN_FAILED
    error: str
    """The failure, as ``Type: message``."""
    category: str
    """The error's category, e.g. ``"node_exception"``."""
    node: str | None = None
    """The node at fault, when known."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCancelled(GraphEvent):
    """The run was stopped from outside before it could finish or fail.

    Emitted when the task running the graph is cancelled (``task.cancel()``, a
    timeout such as ``asyncio.wait_for``, an ``astream()`` consumer that stops
    reading) or the process is interrupted (``KeyboardInterrupt``). Every run
    ends with exactly one of RunFinished, RunFailed, RunCancelled or RunPaused,
    so an observer that opened a span for the run can always close it.
    """

    type: ClassVar[GraphEventType] = GraphEventType.RUN_CANCELLED
    reason: str
    """What stopped the run: ``"cancelled"``, ``"interrupted"`` or ``"closed"``."""
    node: str | None = None
    """The node that was running, if any."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelStarted(GraphEvent):
    """A fan-out started its branches (the seed's PARALLEL_START)."""

    type: ClassVar[GraphEventType] = GraphEventType.PARALLEL_STARTED
    source: str
    """The parallel group, or the node whose edge or router fanned out."""
    branches: tuple[str, ...]
    """Each branch's label, in merge order (members, or ``node[i]`` for Scatter)."""
    failure_mode: str = "fail_all"
    """What a branch's failure does to the others."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelFinished(GraphEvent):
    """A fan-out's branches finished and what they wrote was merged (the seed's PARALLEL_END)."""

    type: ClassVar[GraphEventType] = GraphEventType.PARALLEL_FINISHED
    source: str
    """The parallel group, or the node that fanned out."""
    succeeded: tuple[str, ...]
    """Branches whose writes were merged, in merge order."""
    failed: tuple[str, ...] = ()
    """Branches that failed."""
    cancelled: tuple[str, ...] = ()
    """Branches cancelled before they finished (fail_all)."""
    duration_ms: float = 0.0
    """Wall time from the first branch's start to the merge."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptRaised(GraphEvent):
    """A generator node yielded an InterruptRequest that has no answer yet."""

    type: ClassVar[GraphEventType] = GraphEventType.INTERRUPT_RAISED
    node: str
    """The node waiting for an answer."""
    interrupt_id: str
    """What to pass to ``resume()``; unique within the run, branches included."""
    prompt: str = ""
    """The question the node asked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPaused(GraphEvent):
    """The run stopped at a point it can continue from (its last event until resumed)."""

    type: ClassVar[GraphEventType] = GraphEventType.RUN_PAUSED
    reason: str
    """``"interrupt"``, ``"pause_before"``, ``"pause_after"`` or ``"requested"`` (a PauseToken)."""
    next: tuple[str, ...] = ()
    """The nodes that run when the run continues."""
    checkpoint_id: str | None = None
    """The checkpoint holding the paused run, when it has a store."""
    result: GraphResult | None = field(default=None, repr=False, compare=False)
    """The paused run's result, on the event listeners and ``astream()`` receive."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResumed(GraphEvent):
    """A run continued from a checkpoint or from its live paused state."""

    type: ClassVar[GraphEventType] = GraphEventType.RUN_RESUMED
    checkpoint_id: str | None
    """The checkpoint it continued from."""
    live: bool = False
    """True when the paused generator was still in memory (nothing before its yield re-ran)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSaved(GraphEvent):
    """A checkpoint of the run was written (or, with ``durability="async"``, handed to a writer)."""

    type: ClassVar[GraphEventType] = GraphEventType.CHECKPOINT_SAVED
    checkpoint_id: str
    """Its id."""
    trigger: str
    """``"input"``, ``"node_complete"``, ``"interrupt"``, ``"pause"``, ``"cancel"``,
    ``"error"``, ``"end"``, ``"answer"`` or ``"update"``."""
    version: int
    """The run head's version after this write."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCacheHit(GraphEvent):
    """A node's cached output was used instead of running it."""

    type: ClassVar[GraphEventType] = GraphEventType.NODE_CACHE_HIT
    node: str
    """The node."""
    key: str
    """The cache key its input gave."""
