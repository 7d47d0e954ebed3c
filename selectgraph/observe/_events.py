"""Events: the one record of what a run did, read by the trace, astream() and observers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from selectgraph.core._event import GraphEvent, GraphEventType
from selectgraph.core._sentinels import EndType

if TYPE_CHECKING:
    from selectgraph.core._policies import Outcome, Quality, StopReason
    from selectgraph.core._result import GraphResult
    from selectgraph.core._state import GraphState

__all__ = [
    "BudgetExceeded",
    "CheckpointSaved",
    "CustomEvent",
    "EdgeFired",
    "GraphEvent",
    "GraphEventType",
    "InterruptRaised",
    "LLMCallFinished",
    "LLMCallStarted",
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
    "SupervisorReplanned",
    "ToolCallFinished",
    "ToolCallStarted",
]


class _Deferred(GraphEvent):
    """An event a recorder may hand out before filling its fields: they are filled on first read.

    Most listeners that take every event (a counter, a stream handed on) never read
    a field, so building each event in full would be wasted. The recorder sets
    ``_pending`` to the event's entry in the run's log instead (class code, base,
    step, timestamp, values); the first read of a field that is not set yet comes
    here and fills them all, with the filler the recorder registered in ``_FILLERS``.
    """

    __slots__ = ("_pending",)

    if not TYPE_CHECKING:  # type checkers must keep seeing only the declared fields

        def __getattr__(self, name: str) -> Any:
            try:
                pending = _get_pending(self)
            except AttributeError:  # built by its constructor: nothing is pending
                pending = None
            if pending is None:
                # Not a field, or one another thread has just filled: look again.
                return object.__getattribute__(self, name)
            _FILLERS[type(self), len(pending)](self, pending)
            _set_pending(self, None)
            return object.__getattribute__(self, name)


_FILLERS: dict[tuple[type[GraphEvent], int], Callable[[Any, tuple[Any, ...]], None]] = {}
"""Fillers of deferred events from their log entries, by (class, entry length): the
recorder registers one with each constructor it makes."""

_get_pending = _Deferred._pending.__get__  # type: ignore[attr-defined]
_set_pending = _Deferred._pending.__set__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(_Deferred):
    """A run began at ``entry``."""

    type: ClassVar[GraphEventType] = GraphEventType.GRAPH_START
    entry: str
    """The entry node."""
    state: GraphState | None = field(default=None, repr=False, compare=False)
    """The run's state (it goes on changing: copy what you keep)."""

    @property
    def node_name(self) -> str:
        """The entry node (the seed's GRAPH_START field)."""
        return self.entry


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeStarted(_Deferred):
    """A node began executing."""

    type: ClassVar[GraphEventType] = GraphEventType.NODE_START
    node: str
    """The node's name."""
    visit: int
    """How many times this node has run in this run, this time included."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRetried(_Deferred):
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
class NodeFinished(_Deferred):
    """A node finished, successfully or not, and its output was merged."""

    type: ClassVar[GraphEventType] = GraphEventType.NODE_END
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
    update: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    """What the node wrote (before reducers); set when the run has listeners."""
    state: GraphState | None = field(default=None, repr=False, compare=False)
    """The run's state after the node's writes were merged; set when the run has listeners.

    It is the run's own state object, which goes on changing: a listener that
    keeps it must copy what it needs when it receives the event.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgeFired(_Deferred):
    """Routing chose the next node."""

    type: ClassVar[GraphEventType] = GraphEventType.ROUTING
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

    @property
    def node_name(self) -> str:
        """The node routed from (the seed's ROUTING field)."""
        return self.source

    @property
    def next_node(self) -> str:
        """The node routed to, ``"END"`` for END (the seed's ROUTING field)."""
        return str(self.target)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeChunk(_Deferred):
    """A streaming node (an agent) produced more text."""

    type: ClassVar[GraphEventType] = GraphEventType.NODE_CHUNK
    node: str
    """The node's name (``node_path`` adds the subgraphs it runs in)."""
    delta: str
    """Text generated since the previous chunk."""

    @property
    def chunk(self) -> str:
        """The text (the seed's NODE_CHUNK field)."""
        return self.delta


@dataclass(frozen=True, slots=True, kw_only=True)
class StallDetected(_Deferred):
    """The state has not changed for ``unchanged_steps`` consecutive steps."""

    type: ClassVar[GraphEventType] = GraphEventType.STALL_DETECTED
    node: str
    """The node whose step completed the stall."""
    unchanged_steps: int
    """How many steps in a row left the state unchanged."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopDetected(_Deferred):
    """A node was about to run again on a state identical to an earlier visit."""

    type: ClassVar[GraphEventType] = GraphEventType.LOOP_DETECTED
    node: str
    """The node about to repeat itself."""
    first_step: int
    """The step at which the same node saw the same state before."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(_Deferred):
    """The run stopped and produced a result."""

    type: ClassVar[GraphEventType] = GraphEventType.GRAPH_END
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

    @property
    def state(self) -> GraphState | None:
        """The final state (the seed's GRAPH_END field), on delivered events."""
        return None if self.result is None else self.result.state


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFailed(_Deferred):
    """The run raised."""

    type: ClassVar[GraphEventType] = GraphEventType.ERROR
    error: str
    """The failure, as ``Type: message``."""
    category: str
    """The error's category, e.g. ``"node_exception"``."""
    node: str | None = None
    """The node at fault, when known."""
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    """The exception itself, on delivered events (not kept in the trace)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCancelled(_Deferred):
    """The run was stopped from outside before it could finish or fail.

    Emitted when the task running the graph is cancelled (``task.cancel()``, a
    timeout such as ``asyncio.wait_for``, an ``astream()`` consumer that stops
    reading) or the process is interrupted (``KeyboardInterrupt``). Every run
    ends with exactly one of RunFinished, RunFailed, RunCancelled or RunPaused,
    so an observer that opened a span for the run can always close it.
    """

    type: ClassVar[GraphEventType] = GraphEventType.RUN_CANCELLED
    reason: str
    """What stopped the run: ``"cancelled"``, ``"interrupted"``, ``"closed"``, or
    ``"superseded"`` (a newer input took its thread over)."""
    node: str | None = None
    """The node that was running, if any."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelStarted(_Deferred):
    """A fan-out started its branches (the seed's PARALLEL_START)."""

    type: ClassVar[GraphEventType] = GraphEventType.PARALLEL_START
    source: str
    """The parallel group, or the node whose edge or router fanned out."""
    branches: tuple[str, ...]
    """Each branch's label, in merge order (members, or ``node[i]`` for Scatter)."""
    failure_mode: str = "fail_all"
    """What a branch's failure does to the others."""

    @property
    def node_name(self) -> str:
        """The group or fanning-out node (the seed's PARALLEL_START field)."""
        return self.source


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelFinished(_Deferred):
    """A fan-out's branches finished and what they wrote was merged (the seed's PARALLEL_END)."""

    type: ClassVar[GraphEventType] = GraphEventType.PARALLEL_END
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
    state: GraphState | None = field(default=None, repr=False, compare=False)
    """The run's state after the merge, on delivered events (it goes on changing)."""

    @property
    def node_name(self) -> str:
        """The group or fanning-out node (the seed's PARALLEL_END field)."""
        return self.source


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptRaised(_Deferred):
    """A generator node yielded an InterruptRequest that has no answer yet."""

    type: ClassVar[GraphEventType] = GraphEventType.GRAPH_INTERRUPT
    node: str
    """The node waiting for an answer."""
    interrupt_id: str
    """What to pass to ``resume()``; unique within the run, branches included."""
    prompt: str = ""
    """The question the node asked."""
    branch_label: str | None = None
    """The fan-out branch that asked (``member`` or ``node[i]``), None outside fan-outs."""
    fan_out_index: int | None = None
    """That branch's index in its fan-out (its item's position), None outside fan-outs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPaused(_Deferred):
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
class RunResumed(_Deferred):
    """A run continued from a checkpoint or from its live paused state."""

    type: ClassVar[GraphEventType] = GraphEventType.GRAPH_RESUME
    checkpoint_id: str | None
    """The checkpoint it continued from."""
    live: bool = False
    """True when the paused generator was still in memory (nothing before its yield re-ran)."""
    node: str | None = None
    """The node whose interrupt was answered (the first, when several were)."""
    interrupt_id: str | None = None
    """The interrupt that was answered (the first, when several were)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSaved(_Deferred):
    """A checkpoint of the run was written (or, with ``durability="async"``, handed to a writer)."""

    type: ClassVar[GraphEventType] = GraphEventType.CHECKPOINT
    checkpoint_id: str
    """Its id."""
    trigger: str
    """``"input"``, ``"node_complete"``, ``"interrupt"``, ``"pause"``, ``"cancel"``,
    ``"error"``, ``"end"``, ``"answer"`` or ``"update"``."""
    version: int
    """The run head's version after this write."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCacheHit(_Deferred):
    """A node's cached output was used instead of running it."""

    type: ClassVar[GraphEventType] = GraphEventType.NODE_CACHE_HIT
    node: str
    """The node."""
    key: str
    """The cache key its input gave."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMCallStarted(_Deferred):
    """An agent is about to call its model (after the run's budgets allowed it)."""

    type: ClassVar[GraphEventType] = GraphEventType.LLM_CALL_STARTED
    node: str | None
    """The agent node making the call; ``None`` for an agent called outside a node."""
    call_id: str
    """Pairs this event with its LLMCallFinished."""
    provider: str
    """The provider's name (``"openai"``, ``"anthropic"``, ``"local"``...)."""
    model: str
    """The model asked for."""
    agent: str = ""
    """The agent's name."""
    streaming: bool = False
    """Whether the reply is streamed."""
    request: Any = field(default=None, repr=False, compare=False)
    """The CompletionRequest, on delivered events only (tracing with content capture reads it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMCallFinished(_Deferred):
    """A model call returned (or failed); its usage is counted against the run's budgets."""

    type: ClassVar[GraphEventType] = GraphEventType.LLM_CALL_FINISHED
    node: str | None
    """The agent node that made the call."""
    call_id: str
    """The id its LLMCallStarted carried."""
    provider: str
    """The provider's name."""
    model: str
    """The model asked for."""
    duration_ms: float
    """Wall time of the call."""
    input_tokens: int = 0
    """Prompt tokens the provider reported."""
    output_tokens: int = 0
    """Completion tokens the provider reported."""
    cost_usd: float | None = None
    """What the call cost, when the model's price is known."""
    response_model: str = ""
    """The model that answered, as the provider reported it."""
    finish_reason: str = ""
    """Why generation stopped (``"stop"``, ``"length"``, ``"tool_calls"``...)."""
    error: str | None = None
    """The failure, as ``Type: message``, when the call failed."""
    completion: Any = field(default=None, repr=False, compare=False)
    """The Completion, on delivered events only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted(_Deferred):
    """An agent started running a tool its model asked for."""

    type: ClassVar[GraphEventType] = GraphEventType.TOOL_CALL_STARTED
    node: str | None
    """The agent node."""
    tool: str
    """The tool's name."""
    call_id: str
    """The model's id for this tool call."""
    arguments: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    """The arguments, on delivered events only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallFinished(_Deferred):
    """A tool call ended."""

    type: ClassVar[GraphEventType] = GraphEventType.TOOL_CALL_FINISHED
    node: str | None
    """The agent node."""
    tool: str
    """The tool's name."""
    call_id: str
    """The model's id for this tool call."""
    duration_ms: float
    """Wall time of the call."""
    error: str | None = None
    """What went wrong, when the tool failed (the model was told)."""
    result: str | None = field(default=None, repr=False, compare=False)
    """The tool's answer as the model sees it, on delivered events only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExceeded(_Deferred):
    """A budget refused the next model call (or step); the run stops with ``stop_reason=budget``."""

    type: ClassVar[GraphEventType] = GraphEventType.BUDGET_EXCEEDED
    budget: str
    """``"token_budget"``, ``"cost_budget"`` or ``"time_budget"``."""
    limit: float
    """The limit that would have been passed."""
    used: float
    """What the run had used before the refused call."""
    needed: float = 0.0
    """What the refused call was estimated to need."""
    node: str | None = None
    """The node that wanted to make the call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomEvent(_Deferred):
    """Data a node published with ``context.emit_custom(data)`` (astream's ``"custom"`` mode)."""

    type: ClassVar[GraphEventType] = GraphEventType.CUSTOM
    node: str
    """The node that published it."""
    data: Any = None
    """What it published."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SupervisorReplanned(_Deferred):
    """A supervisor threw its plan away after stalling and made a new one (seed 004)."""

    type: ClassVar[GraphEventType] = GraphEventType.SUPERVISOR_REPLAN
    stall_count: int
    """Rounds without progress that led to the replan (0 when a failed step led to it)."""
    new_plan: str
    """The new plan, as text."""
    node: str = ""
    """The supervisor node that made the new plan."""
    reason: str = ""
    """Why the plan was remade: ``"stalled"`` or ``"step_failed"``."""
