"""Compiled graph: the validated, immutable graph compile builds, what a step needs precomputed.

Its run methods (run, arun, astream...) come from :class:`~selectgraph.compile._runs.RunMethods`,
which AgentGraph shares; the types of their options are in ``_options``.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from selectgraph.compile._options import GraphInput
from selectgraph.compile._runs import RunnableGraph
from selectgraph.core._errors import Diagnostic
from selectgraph.core._policies import ErrorPolicy
from selectgraph.core._sentinels import EndType
from selectgraph.core._serialization import StateSerializer, default_serializer
from selectgraph.core._state import GraphState
from selectgraph.nodes._function import FunctionAdapter
from selectgraph.nodes._spec import NodeSpec
from selectgraph.observe._observer import Observer, as_listener
from selectgraph.observe._recorder import EventRecorder, Listener
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.routing._edges import Edge, NodeRoutes
from selectgraph.routing._reach import possible_targets
from selectgraph.runtime._run import Run, Sleep
from selectgraph.runtime._settings import GraphSettings
from selectgraph.runtime._shape import GraphShape, graph_shape
from selectgraph.runtime._start import prepare_state, start_run
from selectgraph.state._merge import Merger
from selectgraph.state._schema import StateSchema

__all__ = ["CompiledGraph"]


class CompiledGraph(RunnableGraph):
    """A validated graph, ready to run. Build one with ``AgentGraph.compile()``."""

    def __init__(
        self,
        *,
        name: str,
        entry: str,
        nodes: Mapping[str, NodeSpec],
        routes: Mapping[str, NodeRoutes],
        edges: Sequence[Edge],
        schema: StateSchema,
        settings: GraphSettings,
        observers: Sequence[Observer | Listener] = (),
        warnings: Sequence[Diagnostic] = (),
        description: str = "",
        serializer: StateSerializer | None = None,
        state_type: type[Any] | None = None,
    ) -> None:
        self.name = name
        """The graph's name (traces, events, diagrams)."""
        self.entry = entry
        """The node every run starts at."""
        self.nodes: Mapping[str, NodeSpec] = dict(nodes)
        """Every node as compiled, by name, in declaration order."""
        self.routes: Mapping[str, NodeRoutes] = dict(routes)
        """Each node's outgoing edges, ready for routing."""
        self.edges: tuple[Edge, ...] = tuple(edges)
        """Every edge, in declaration order."""
        self.schema = schema
        """The state schema (fields, reducers, validation)."""
        self.settings = settings
        """Run-time rules: step limit, error policy, budgets, pause gates..."""
        self.observers = tuple(observers)
        """Told every event of every run."""
        self.warnings: tuple[Diagnostic, ...] = tuple(warnings)
        """Non-fatal problems compile found."""
        self.checkpointer: CheckpointStore | None = None
        """The store runs use when none is passed (``AgentGraph.compile(checkpointer=...)``)."""
        self.description = description
        """What the graph does (diagrams, parent graphs)."""
        self.serializer = serializer or default_serializer()
        """Encodes states for checkpoints and restores them: the library's types plus the
        state schema's own (a run may pass another)."""
        self.is_async = any(
            spec.adapter.is_async or spec.timeout is not None for spec in self.nodes.values()
        ) or any(route.is_async for route in self.routes.values())
        """Whether running needs an event loop (some node or edge is async, or has a timeout)."""
        if settings.input_guardrails is not None and settings.input_guardrails.is_async:
            self.is_async = True
        self.listeners = tuple(as_listener(o) for o in observers)
        """The observers as event listeners (what runs call)."""
        plain = {
            name: spec.adapter
            for name, spec in self.nodes.items()
            if isinstance(spec.adapter, FunctionAdapter)
            and not spec.adapter.wants_context
            and not spec.reads
            and spec.timeout is None
        }
        self.direct_calls: Mapping[str, Callable[[GraphState], Any]] = {
            name: adapter.fn for name, adapter in plain.items() if not adapter.is_async
        }
        """Nodes the runner may call directly: plain sync functions."""
        self.direct_async: Mapping[str, Callable[[GraphState], Any]] = {
            name: adapter.fn for name, adapter in plain.items() if adapter.is_async
        }
        """Plain async functions, awaited directly by the runner."""
        self.retried_directly: frozenset[str] = frozenset(
            name
            for name, spec in self.nodes.items()
            if name in plain and (spec.error_policy or settings.error_policy) is ErrorPolicy.RETRY
        )
        """Plain functions under ErrorPolicy.RETRY: called directly, retried after a failure."""
        self.plain_merger = None if schema.reducers else Merger(schema, None)
        """A merger runs may share while they have no reducer fields nor fingerprints."""
        self.join_points: dict[tuple[str, ...], Any] = {}
        """Fan-out join points found so far, by the branches' start nodes."""
        self.quick_branches: dict[tuple[str, Any, bool], Any] = {}
        """Start nodes of branches that need no walk of their own (found on first use)."""
        self.post_dominators: Mapping[Any, set[Any]] | None = None
        """For each node, the nodes every path from it to END passes (computed on first use)."""
        self.state_type = state_type
        """The Pydantic model or TypedDict the state schema was declared with, if any."""

    @functools.cached_property
    def shape(self) -> GraphShape:
        """What checkpoints record of this graph, and its hash (made on first use, then kept).

        Its nodes and their kinds, where each can lead, the state's fields and
        their types, the state version: see ``runtime/_shape.py``.
        """
        return graph_shape(
            self.name, self.nodes, self.edges, self.state_type, self.settings.state_version
        )

    # ----------------------------------------------------------------- input
    def prepare_state(self, value: GraphInput) -> GraphState:
        """The engine-owned state a run starts from.

        Raises:
            StateValidationError: the input does not satisfy the state schema.
        """
        return prepare_state(self, value)

    def start_run(
        self,
        input: GraphInput,
        *,
        run_id: str | None = None,
        namespace: tuple[str, ...] = (),
        listeners: Sequence[Listener] = (),
        parent: EventRecorder | None = None,
        sleep: Sleep = asyncio.sleep,
        track_writes: bool = False,
    ) -> Run:
        """A run of this graph, ready to :meth:`~Run.execute` (see ``runtime.start_run``)."""
        return start_run(
            self,
            input,
            run_id=run_id,
            namespace=namespace,
            listeners=listeners,
            parent=parent,
            sleep=sleep,
            track_writes=track_writes,
        )

    # ------------------------------------------------------- LangGraph's spellings
    def with_checkpointer(self, checkpointer: CheckpointStore | None) -> CompiledGraph:
        """This graph, with ``checkpointer`` as the store of runs given none."""
        if checkpointer is not None:
            self.shape  # noqa: B018 - made now: the copies (LangGraph configs) share it
        bound = copy.copy(self)
        bound.checkpointer = checkpointer
        return bound

    # --------------------------------------------------------- inspection
    def targets_of(self, node: str) -> list[str | EndType]:
        """Every place ``node`` can route to, as far as compile can tell."""
        return possible_targets(self.edges, self.nodes, node)

    def __repr__(self) -> str:
        return f"CompiledGraph(name={self.name!r}, entry={self.entry!r}, nodes={len(self.nodes)})"
