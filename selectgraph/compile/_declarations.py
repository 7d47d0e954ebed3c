"""Declarations: what a graph's builder records, node by node and edge by edge, for compile.

The builder (``AgentGraph``) fills a :class:`Blueprint`; compile reads nothing else,
so it never needs the builder itself. A graph nested in another is seen here as
:class:`GraphDeclaration`: something compile can ask to compile itself.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from selectgraph.compile._compiled import CompiledGraph
from selectgraph.core._errors import Diagnostic
from selectgraph.core._policies import ErrorPolicy, RetryPolicy
from selectgraph.core._sentinels import EndType
from selectgraph.core._state import GraphState
from selectgraph.nodes._spec import NodeAdapter
from selectgraph.observe._observer import Observer
from selectgraph.observe._recorder import Listener
from selectgraph.persistence._node_cache import CachePolicy, NodeCache
from selectgraph.routing._edges import EdgeKind, Trigger
from selectgraph.routing._parallel import DEFAULT_FANOUT, Branches, FanOutOptions, ParallelGroup
from selectgraph.runtime._settings import GraphSettings

__all__ = ["Blueprint", "EdgeDecl", "GraphDeclaration", "NodeDecl", "SubgraphDecl"]


class GraphDeclaration(Protocol):
    """A graph still being declared (an AgentGraph), nested in another as a node or subgraph."""

    def compile(self) -> CompiledGraph:
        """The graph as it is now, compiled.

        Raises:
            GraphBuildError: listing every error found.
        """
        ...


@dataclass(slots=True, kw_only=True)
class SubgraphDecl:
    """A subgraph node as declared with add_subgraph()."""

    node: str
    graph: GraphDeclaration | CompiledGraph
    input_map: Mapping[str, str] | None = None
    output_map: Mapping[str, str] | None = None
    projects_in: Sequence[str] | None = None
    projects_out: Sequence[str] | None = None


@dataclass(slots=True, kw_only=True)
class NodeDecl:
    """A node as declared with add_node() or add_subgraph()."""

    name: str
    adapter: NodeAdapter | None = None
    graph_node: GraphDeclaration | None = None
    """A graph used as a node; compiled with its parent, so later changes count."""
    subgraph: SubgraphDecl | None = None
    reads: Sequence[str] | None = None
    writes: Sequence[str] | None = None
    optional_writes: Sequence[str] | None = None
    max_visits: int | None = None
    error_policy: ErrorPolicy | None = None
    retry: RetryPolicy | None = None
    destinations: Sequence[str | EndType] | None = None
    description: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    group: ParallelGroup | None = None
    cache: CachePolicy | None = None
    middleware: tuple[Any, ...] = ()


@dataclass(slots=True, kw_only=True)
class EdgeDecl:
    """An edge as declared."""

    source: str | EndType
    kind: EdgeKind
    trigger: Trigger = "success"
    target: str | EndType | Branches | None = None
    condition: str | Callable[[GraphState], Any] | None = None
    router: Callable[..., Any] | None = None
    """A router function, or an llm_decide edge's decider."""
    path_map: Mapping[Hashable, Any] | Sequence[Any] | None = None
    label: str | None = None
    order: int = 0
    fanout: FanOutOptions = DEFAULT_FANOUT


@dataclass(slots=True, kw_only=True)
class Blueprint:
    """Everything a graph's builder declared: what compile checks and turns into a CompiledGraph."""

    name: str
    """Shown in traces, events and diagrams."""
    description: str = ""
    """What the graph does, for diagrams and parent graphs."""
    settings: GraphSettings
    """Run-time rules, as the builder's options set them."""
    state_schema: type[Any] | None = None
    """The Pydantic model or TypedDict describing ``state.data``, if any."""
    reducers: dict[str, Any] | None = None
    """Reducers by field, given on top of (or without) a schema."""
    observers: tuple[Observer | Listener, ...] = ()
    """Told every event of every run."""
    node_cache: NodeCache
    """Where nodes declared with ``cache=`` keep their outputs."""
    strict_entry: bool = False
    """Whether the entry must be declared (otherwise the first node added is the entry)."""
    middleware: tuple[Any, ...] = ()
    """Wrapped around every node's calls, outermost first (``AgentGraph(middleware=)``)."""
    nodes: dict[str, NodeDecl] = field(default_factory=dict)
    """The nodes, by name, in declaration order."""
    edges: list[EdgeDecl] = field(default_factory=list)
    """The edges, in declaration order."""
    entry: str | None = None
    """The node declared with set_entry(), if any."""
    problems: list[Diagnostic] = field(default_factory=list)
    """Mistakes found while declaring (a node declared twice), reported by compile."""
