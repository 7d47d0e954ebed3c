"""Nodes: the declared shape of a node (NodeSpec) and what it is told when it runs (NodeContext)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from selectgraph._sentinels import EndType
from selectgraph.graph._policies import ErrorPolicy, RetryPolicy

if TYPE_CHECKING:
    from selectgraph.graph._result import NodeResult
    from selectgraph.graph._views import StateView
    from selectgraph.observe._events import GraphEvent

__all__ = ["NodeAdapter", "NodeContext", "NodeSpec"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeContext:
    """Run facts a node may ask for by taking a second parameter: ``def node(state, context)``."""

    node: str
    """This node's name."""
    step: int
    """The run step (1-based)."""
    visit: int
    """How many times this node has run in this run, this time included."""
    attempt: int
    """1 for the first attempt, 2 for the first retry, ..."""
    run_id: str
    """The run's identifier."""
    graph: str
    """The graph's name."""
    namespace: tuple[str, ...] = ()
    """Subgraph path of the graph this node belongs to."""
    goal: str = ""
    """The graph's goal (``AgentGraph(goal=...)``)."""
    previous: NodeResult | None = None
    """This node's result from its previous visit, if any."""
    emit: Callable[[GraphEvent], None] | None = field(default=None, repr=False, compare=False)
    """Publishes an event into the run's stream (used by agent and subgraph nodes)."""
    runtime: Any = field(default=None, repr=False, compare=False)
    """Engine internals for built-in node kinds; not part of the public contract."""


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

    @property
    def declared_outputs(self) -> frozenset[str] | None:
        """Every key the node may write, or ``None`` when undeclared."""
        if self.writes is None:
            return None
        return self.writes | self.optional_writes
