"""Nodes: the declared shape of a node (NodeSpec) and what it is told when it runs (NodeContext)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from selectgraph.core._policies import ErrorPolicy, RetryPolicy
from selectgraph.core._sentinels import EndType
from selectgraph.core._usage import Usage

if TYPE_CHECKING:
    from selectgraph.core._branch import BranchRef
    from selectgraph.core._node_result import NodeResult
    from selectgraph.observe._events import GraphEvent
    from selectgraph.routing._parallel import ParallelGroup
    from selectgraph.state._views import StateView

__all__ = ["NodeAdapter", "NodeContext", "NodeSpec"]

_NO_CONFIG: Mapping[str, Any] = MappingProxyType({})


class NodeContext:
    """Run facts a node may ask for by taking a second parameter: ``def node(state, context)``.

    Built once per step for nodes that take it, so it is a plain slotted class
    and ``previous`` is looked up only when read.
    """

    __slots__ = (
        "attempt",
        "branch",
        "emit",
        "goal",
        "graph",
        "namespace",
        "node",
        "run_id",
        "runtime",
        "step",
        "visit",
    )

    def __init__(
        self,
        node: str,
        step: int,
        visit: int,
        attempt: int,
        run_id: str,
        graph: str,
        namespace: tuple[str, ...] = (),
        goal: str = "",
        emit: Callable[[GraphEvent], None] | None = None,
        runtime: Any = None,
        branch: BranchRef | None = None,
    ) -> None:
        self.node = node
        """This node's name."""
        self.step = step
        """The run step (1-based)."""
        self.visit = visit
        """How many times this node has run in this run, this time included."""
        self.attempt = attempt
        """1 for the first attempt, 2 for the first retry, ..."""
        self.run_id = run_id
        """The run's identifier."""
        self.graph = graph
        """The graph's name."""
        self.namespace = namespace
        """Subgraph path of the graph this node belongs to."""
        self.goal = goal
        """The graph's goal (``AgentGraph(goal=...)``)."""
        self.emit = emit
        """Publishes an event into the run's stream (used by agent and subgraph nodes)."""
        self.runtime = runtime
        """Engine internals for built-in node kinds; not part of the public contract."""
        self.branch = branch
        """The fan-out branch this node runs in, if any (its label, index and lineage)."""

    @property
    def config(self) -> Mapping[str, Any]:
        """Run-time values the caller passed, read-only.

        What ``run(..., config={...})`` was given, or every key of LangGraph's
        ``config["configurable"]`` (``thread_id`` included).
        """
        config: Mapping[str, Any] = getattr(self.runtime, "config", None) or _NO_CONFIG
        return config if isinstance(config, MappingProxyType) else MappingProxyType(dict(config))

    @property
    def thread_id(self) -> str | None:
        """The thread this run belongs to (``run(..., thread_id=...)``), if any."""
        durable = getattr(self.runtime, "durable", None)
        return getattr(durable, "thread_id", None)

    @property
    def previous(self) -> NodeResult | None:
        """This node's result from its previous visit, if any."""
        runtime = self.runtime
        return None if runtime is None else runtime.previous_result(self.node)

    @property
    def task_id(self) -> str:
        """This visit's stable id in the run: ``"<step>:<node>"``, under its branch and subgraph.

        The same when the visit runs again (a resume, a worker taking a run over),
        so ``f"{context.run_id}/{context.task_id}"`` is an idempotency key for a
        side effect the node must not make twice.
        """
        runtime = self.runtime
        if runtime is not None:
            return str(runtime.task_id(self.node, self.branch))
        task = f"{self.step}:{self.node}"
        if self.branch is not None:
            task = f"{self.branch.task_id}/{task}"
        return "/".join((*self.namespace, task))

    @property
    def usage(self) -> Usage:
        """The run's model usage so far: every call made, this node's included.

        Inside subgraphs and branches it is the whole run's. A decision node can
        read it to route to an exit before a budget is reached.
        """
        from selectgraph.core._control import current_control

        control = current_control()
        if control is not None:
            return control.usage
        runtime = self.runtime
        return runtime.usage if runtime is not None else Usage()

    @property
    def run_usage(self) -> Usage:
        """The model usage of this graph's own run so far, failed calls included.

        In a subgraph it is the subgraph's run only (``usage`` is the whole run's),
        so a loop running as one branch of a fan-out can budget itself.
        """
        runtime = self.runtime
        return runtime.usage if runtime is not None else Usage()

    @property
    def elapsed(self) -> float:
        """Seconds since the run started."""
        from selectgraph.core._control import current_control

        control = current_control()
        return control.elapsed if control is not None else 0.0

    def publish(self, kind: type[GraphEvent], **fields: Any) -> None:
        """Emit an event of class ``kind`` from this node, the rest of its fields in ``fields``.

        Run, graph, step, time, namespace and branch come from the context. Does
        nothing when the run has no stream to publish to.
        """
        if self.emit is None:
            return
        # On the run's clock, so the event sits in time where it sits in the trace.
        recorder = getattr(self.runtime, "recorder", None)
        self.emit(
            kind(
                run_id=self.run_id,
                graph=self.graph,
                step=self.step,
                timestamp=recorder.now() if recorder is not None else time.time(),
                namespace=self.namespace,
                branch=self.branch,
                **fields,
            )
        )

    def emit_custom(self, data: Any) -> None:
        """Publish ``data`` to the run's stream: astream's ``"custom"`` mode yields it.

        Observers see it as a CustomEvent. Without listeners it is kept in the trace.
        """
        from selectgraph.observe._events import CustomEvent

        self.publish(CustomEvent, node=self.node, data=data)

    def once(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, run once for this visit of this node, even across restarts.

        For generator nodes that pause: when the run resumes in a new process,
        the node starts over and its yields get their recorded answers, but a
        step wrapped in ``once`` returns its saved result instead of running
        again. Its result must be JSON data (or a type the serializer allows).
        An async ``fn`` gives an awaitable: ``draft = await context.once("draft", write)``.
        """
        runtime = self.runtime
        memo: dict[str, Any] | None = None
        if runtime is not None and hasattr(runtime, "memo_for"):
            memo = runtime.memo_for(runtime.task_id(self.node, self.branch))
        if memo is not None and name in memo:
            value = memo[name]
            if inspect.iscoroutinefunction(fn):
                return _ready(value)
            return value
        result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            return _remember(memo, name, result)
        if memo is not None:
            memo[name] = result
        return result

    def __repr__(self) -> str:
        return (
            f"NodeContext(node={self.node!r}, step={self.step}, visit={self.visit}, "
            f"attempt={self.attempt}, run_id={self.run_id!r}, graph={self.graph!r})"
        )


async def _ready(value: Any) -> Any:
    return value


async def _remember(memo: dict[str, Any] | None, name: str, pending: Awaitable[Any]) -> Any:
    value = await pending
    if memo is not None:
        memo[name] = value
    return value


class NodeAdapter(Protocol):
    """How the engine calls one kind of node (function, agent, graph...)."""

    kind: str
    """Shown in diagrams: ``"function"``, ``"agent"``, ``"graph"``, ``"subgraph"``."""
    is_async: bool
    """Whether calling it needs an event loop."""
    executor_retries: bool
    """Whether ErrorPolicy.RETRY applies (agents retry through their judge instead)."""
    wants_context: bool
    """Whether it should be given a NodeContext."""

    async def __call__(self, state: StateView, context: NodeContext | None) -> Any:
        """Run the node on ``state``; returns the node's raw output."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSpec:
    """A node as compiled: what to call and the rules around calling it."""

    name: str
    """Unique within the graph."""
    adapter: NodeAdapter
    """How to call it."""
    reads: frozenset[str] | None = None
    """Declared inputs: must exist before it runs; reading others is an error."""
    writes: frozenset[str] | None = None
    """Declared required outputs; writing an undeclared key is an error."""
    optional_writes: frozenset[str] = frozenset()
    """Declared outputs it may skip; cleared on a revisit that does not write them."""
    max_visits: int | None = None
    """How many times it may run in one run; ``None`` is unlimited."""
    error_policy: ErrorPolicy | None = None
    """Overrides the graph's policy when set."""
    retry: RetryPolicy | None = None
    """Overrides the graph's retry policy when set."""
    destinations: tuple[str | EndType, ...] | None = None
    """Where a goto() from this node may lead (checked at run time, drawn in diagrams)."""
    description: str = ""
    """What the node does, for diagrams and llm_decide prompts."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form data for tools built on top (not used by the engine)."""
    timeout: float | None = None
    """Seconds the node may run; past them it fails with NodeTimeout (``None``: no limit)."""
    group: ParallelGroup | None = None
    """For a parallel group: its members and merge rules (the node runs them at once)."""
    offload: bool = False
    """A blocking function: run it on a worker thread inside branches and under a timeout."""

    @property
    def declared_outputs(self) -> frozenset[str] | None:
        """Every key the node may write, or ``None`` when undeclared."""
        if self.writes is None:
            return None
        return self.writes | self.optional_writes
