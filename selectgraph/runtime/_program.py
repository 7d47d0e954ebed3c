"""The compiled graph as the runtime reads it.

A :class:`~selectgraph.GraphProgram` is data: compile fills it in, and the runtime
reads it through :class:`GraphProgram`, which names every attribute the loop and its
parts use. The runtime never imports compile, so what a run can depend on is this
list and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from selectgraph.core._sentinels import EndType
from selectgraph.core._serialization import StateSerializer
from selectgraph.nodes._spec import NodeSpec
from selectgraph.observe._recorder import Listener
from selectgraph.routing._edges import Edge, NodeRoutes
from selectgraph.runtime._settings import GraphSettings
from selectgraph.runtime._shape import GraphShape
from selectgraph.state._merge import Merger
from selectgraph.state._schema import StateSchema

__all__ = ["GraphProgram"]


class GraphProgram(Protocol):
    """What a run reads of its compiled graph."""

    name: str
    """The graph's name (events, errors)."""
    entry: str
    """The node every run starts at."""
    nodes: Mapping[str, NodeSpec]
    """Every node, by name."""
    routes: Mapping[str, NodeRoutes]
    """Each node's outgoing edges, ready for routing."""
    edges: tuple[Edge, ...]
    """Every edge, in declaration order (where fan-outs join)."""
    schema: StateSchema
    """Fields, reducers and validation."""
    settings: GraphSettings
    """Limits, policies, detection, budgets, gates."""
    serializer: StateSerializer
    """How checkpoints encode the state, and which classes they may restore."""
    listeners: tuple[Listener, ...]
    """The graph's own observers, told every event of every run."""
    is_async: bool
    """Whether running needs an event loop."""
    direct_calls: Mapping[str, Callable[[Any], Any]]
    """Plain synchronous function nodes the loop calls itself, without their adapter."""
    direct_async: Mapping[str, Callable[[Any], Any]]
    """Plain async function nodes the loop awaits itself."""
    retried_directly: frozenset[str]
    """Plain functions under ErrorPolicy.RETRY: called directly, retried after a failure."""
    plain_merger: Merger | None
    """A merger runs may share while the state has no reducer fields."""
    join_points: dict[tuple[str, ...], str | EndType]
    """Where fan-outs starting at these nodes join (found on first use, kept here)."""
    quick_branches: dict[tuple[str, Any, bool], Any]
    """Branches that need no walk of their own (found on first use, kept here)."""
    post_dominators: Mapping[Any, set[Any]] | None
    """For each node, the nodes every path from it to END passes (computed on first use)."""

    @property
    def shape(self) -> GraphShape:
        """What checkpoints record of the graph, and its hash (made once, on first use).

        Node names and kinds, where each node can lead, the state's fields and
        their types, the state version.
        """
        ...
