"""Builder: AgentGraph, where nodes and edges are declared before compile() validates them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

from selectgraph.build._checks import (
    check_fast_route,
    check_input_field,
    check_node_cache,
    check_options,
    check_state_version,
    check_sync_nodes,
    check_timeout,
    check_token,
    describe_node,
    input_pipeline,
    make_budget,
    node_names,
    output_pipeline,
    retry_policy,
    unique_names,
)
from selectgraph.build._edges import EdgeDeclarations
from selectgraph.compile._compile import compile_graph, validate_graph
from selectgraph.compile._compiled import CompiledGraph
from selectgraph.compile._declarations import Blueprint, NodeDecl, SubgraphDecl
from selectgraph.compile._runs import RunMethods
from selectgraph.core._control import CancellationToken
from selectgraph.core._errors import Diagnostic
from selectgraph.core._policies import (
    Conversation,
    ErrorPolicy,
    LoopAction,
    MaxStepsAction,
    RetryPolicy,
    SyncNodes,
)
from selectgraph.core._sentinels import END, UNSET, EndType, Unset
from selectgraph.nodes._cache import check_cacheable
from selectgraph.nodes._function import make_adapter, reject_class
from selectgraph.nodes._middleware import Middleware, check_middleware
from selectgraph.nodes._spec import NodeAdapter
from selectgraph.observe._observer import Observer
from selectgraph.observe._recorder import Listener
from selectgraph.persistence._node_cache import CachePolicy, NodeCache
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.routing._parallel import (
    FailureMode,
    GroupAdapter,
    MergeFn,
    MergePolicy,
    ParallelGroup,
)
from selectgraph.runtime._settings import GraphSettings

__all__ = ["AgentGraph", "SpecReader", "read_specs_with"]


class AgentGraph(EdgeDeclarations, RunMethods):
    """A graph of agents and functions sharing one state.

    This example is complete:

    >>> from selectgraph import AgentGraph, END
    >>> def draft(state):
    ...     return {"text": "a first draft", "revisions": state.get("revisions", 0)}
    >>> def review(state):
    ...     return {"revisions": state["revisions"] + 1}
    >>> graph = AgentGraph("essay")
    >>> _ = graph.add_node("draft", draft, next_node="review")
    >>> _ = graph.add_node("review", review)
    >>> _ = graph.add_edge("review", "draft", condition="revisions < 2")
    >>> _ = graph.add_edge("review", END)
    >>> _ = graph.set_entry("draft")
    >>> result = graph.run()
    >>> result.node_order
    ['draft', 'review', 'draft', 'review']
    >>> result.state["revisions"]
    2

    Args:
        name: Shown in traces, events and diagrams.
        state_schema: A Pydantic model (validated at entry and exit) or a
            TypedDict describing ``state.data``; reducers are declared with
            ``Annotated[type, reducer]``.
        reducers: Reducers by field, for graphs without a schema (or on top of one).
        max_steps: Nodes a run may execute (default 50); ``None`` for no limit.
        on_max_steps: What happens at the limit.
        error_policy: What happens when a node raises (per-node overrides win).
        retry: Backoff for ErrorPolicy.RETRY.
        error_retry_limit: Shorthand for ``retry=RetryPolicy(max_retries=...)``.
        enable_loop_detection: Detect a node about to rerun on an identical state.
        on_loop: What happens when a loop is detected.
        stall_threshold: Unchanged steps in a row that count as a stall; ``None`` disables.
        observers: Objects with ``on_event(event)`` (or plain callables) told every event.
        goal: What the graph is for; agents and llm_decide edges are told it.
        description: What the graph does, for diagrams and parent graphs.
        input_field: The state field that text given from outside (the CLI, the
            studio, a server, a graph tool's ``input``) goes to, besides the first
            user message; a Pydantic state schema may say it instead with an
            ``input_field`` ClassVar.
        conversation: ``"isolated"`` (each agent node builds its own context)
            or ``"continuous"`` (agent nodes share one growing thread).
        compact_at_tokens: In a continuous conversation, summarise older
            turns once the thread is longer than this.
        strict_entry: Require ``set_entry()`` (OpenArmature's rule). By default
            the first node added is the entry when none is set.
        max_concurrency: Branches of one fan-out running at once, unless the
            group or edge sets its own limit (``None``: no limit).
        node_cache: Where nodes added with ``cache=CachePolicy(...)`` keep their
            outputs (e.g. a SQLiteNodeCache shared across processes); by default
            an InMemoryNodeCache of this graph object's own.
        pause_before: Nodes a run with a checkpoint store pauses before (a human
            gate; seed 000's ``pause_nodes``); continue it with
            ``run(None, checkpoint_store=..., run_id=...)``.
        pause_after: Nodes a run with a checkpoint store pauses after.
        pause_nodes: Seed 000's spelling of ``pause_before`` (the two are joined).
        max_total_tokens: Token budget of a run (every model call of every
            agent in it, subgraphs and branches included); checked before each
            call, the run stops with ``stop_reason="token_budget"``.
        max_cost_usd: Cost budget in US dollars (``stop_reason="cost_budget"``).
        max_duration: Wall-clock budget in seconds (``stop_reason="time_budget"``).
        cancellation_token: A CancellationToken; ``token.cancel()`` stops the run
            at once (``stop_reason="cancelled"``).
        input_guardrails: A GuardrailsPipeline (or a list of guardrails) run on
            the input prompt before the first node; a block raises GuardrailBlocked.
        output_guardrails: The same for the run's final content.
        fast_route_fn: ``fn(state) -> node name | None``: when it names a node,
            only that node runs (seed 004).
        state_version: The version of the state schema (default 1), stored with
            every checkpoint. Raise it when a change to the schema makes states
            stored before it unfit, and give the migration.
        state_migrations: ``{n: fn}``: ``fn(data) -> data`` turns the data of a state
            stored at version ``n`` into version ``n + 1``'s. A run continued from an
            older checkpoint goes through the chain before its state is checked
            against the schema (see docs/persistence.md).
        middleware: Functions ``(call, proceed) -> output`` wrapped around every
            node's calls, outermost first: time, log, cache, retry or short-circuit
            a node (see ``NodeCall`` and docs/concepts.md).
        sync_nodes: Where synchronous nodes run when the run has an event loop
            (``arun``, ``astream``): ``"thread"`` (default; a worker thread, so a
            blocking node does not stall concurrent runs or the stream) or
            ``"loop"`` (the event loop's thread).
    """

    END: ClassVar[EndType] = END
    """The routing target that stops a run (``selectgraph.END``)."""

    def __init__(
        self,
        name: str = "graph",
        *,
        state_schema: type[Any] | None = None,
        reducers: Mapping[str, Any] | None = None,
        max_steps: int | Unset | None = UNSET,
        on_max_steps: MaxStepsAction = MaxStepsAction.RETURN_LAST,
        error_policy: ErrorPolicy = ErrorPolicy.ABORT,
        retry: RetryPolicy | None = None,
        error_retry_limit: int | None = None,
        enable_loop_detection: bool = True,
        on_loop: LoopAction = LoopAction.RAISE,
        stall_threshold: int | None = 3,
        observers: Sequence[Observer | Listener] = (),
        goal: str = "",
        description: str = "",
        input_field: str | None = None,
        conversation: Conversation = "isolated",
        compact_at_tokens: int = 8000,
        strict_entry: bool = False,
        max_concurrency: int | None = None,
        node_cache: NodeCache | None = None,
        pause_before: Iterable[str] = (),
        pause_after: Iterable[str] = (),
        pause_nodes: Iterable[str] = (),
        max_total_tokens: int | None = None,
        max_cost_usd: float | None = None,
        max_duration: float | None = None,
        cancellation_token: CancellationToken | None = None,
        input_guardrails: Any = None,
        output_guardrails: Any = None,
        fast_route_fn: Callable[[Any], Any] | None = None,
        state_version: int = 1,
        state_migrations: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
        middleware: Sequence[Middleware] | None = None,
        sync_nodes: SyncNodes = "thread",
    ) -> None:
        """Create an empty graph; its arguments are described on the class."""
        check_options("AgentGraph", max_concurrency=max_concurrency)
        check_sync_nodes(sync_nodes)
        migrations = check_state_version(state_version, state_migrations)
        cache = check_node_cache(node_cache)
        retry = retry_policy(retry, error_retry_limit)
        settings = GraphSettings(
            max_steps=50 if isinstance(max_steps, Unset) else max_steps,
            on_max_steps=on_max_steps,
            error_policy=error_policy,
            retry=retry,
            detect_loops=enable_loop_detection,
            on_loop=on_loop,
            stall_threshold=stall_threshold,
            goal=goal,
            input_field=check_input_field(input_field),
            conversation=conversation,
            compact_at_tokens=compact_at_tokens,
            max_concurrency=max_concurrency,
            sync_nodes=sync_nodes,
            # seed 000's pause_nodes: pause before each of them
            pause_before=node_names("pause_before", [*pause_before, *pause_nodes]),
            pause_after=node_names("pause_after", pause_after),
            budget=make_budget(max_total_tokens, max_cost_usd, max_duration),
            cancellation_token=check_token(cancellation_token),
            input_guardrails=input_pipeline(input_guardrails),
            output_guardrails=output_pipeline(output_guardrails),
            fast_route_fn=check_fast_route(fast_route_fn),
            state_version=state_version,
            state_migrations=migrations,
        )
        self._blueprint = Blueprint(
            name=name,
            description=description,
            settings=settings,
            state_schema=state_schema,
            reducers=dict(reducers) if reducers else None,
            observers=tuple(observers),
            node_cache=cache,
            strict_entry=strict_entry,
            middleware=check_middleware("AgentGraph", middleware),
        )
        """Everything declared so far: what compile() reads."""
        self._compiled: CompiledGraph | None = None
        self._compiled_key: tuple[Any, ...] | None = None
        self._version = 0

    @property
    def name(self) -> str:
        """Shown in traces, events and diagrams."""
        return self._blueprint.name

    @name.setter
    def name(self, value: str) -> None:
        self._blueprint.name = value

    @property
    def description(self) -> str:
        """What the graph does, for diagrams and parent graphs."""
        return self._blueprint.description

    @description.setter
    def description(self, value: str) -> None:
        self._blueprint.description = value

    # ------------------------------------------------------------ building
    def _changed(self) -> None:
        self._compiled = None
        self._version += 1

    def _children(self) -> list[AgentGraph]:
        """The builders of graphs nested in this one (as nodes or subgraphs)."""
        nested: list[AgentGraph] = []
        for decl in self._blueprint.nodes.values():
            if isinstance(decl.graph_node, AgentGraph):
                nested.append(decl.graph_node)
            elif decl.subgraph is not None and isinstance(decl.subgraph.graph, AgentGraph):
                nested.append(decl.subgraph.graph)
        return nested

    def _cache_key(self) -> tuple[Any, ...]:
        """Changes whenever this graph or any graph nested in it changes."""
        return (self._version, *(child._cache_key() for child in self._children()))

    def _declare(self, decl: NodeDecl, next_node: str | EndType | Unset) -> None:
        name = decl.name
        if not isinstance(name, str) or not name:
            raise TypeError(f"a node name must be a non-empty string, got {name!r}")
        if name in self._blueprint.nodes:
            self._blueprint.problems.append(
                Diagnostic(
                    category="duplicate_node",
                    message=f"node {name!r} is declared twice; node names must be unique",
                    node=name,
                )
            )
            self._changed()
            return
        self._blueprint.nodes[name] = decl
        if not isinstance(next_node, Unset):
            self.add_edge(name, next_node)
        self._changed()

    def add_node(
        self,
        name: str,
        node: Any,
        *,
        next_node: str | EndType | Unset = UNSET,
        reads: Sequence[str] | None = None,
        writes: Sequence[str] | None = None,
        optional_writes: Sequence[str] | None = None,
        max_visits: int | None = None,
        max_iterations: int | None = None,
        error_policy: ErrorPolicy | None = None,
        retry: RetryPolicy | None = None,
        destinations: Sequence[str | EndType] | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        cache: CachePolicy | None = None,
        middleware: Sequence[Middleware] | None = None,
        **options: Any,
    ) -> Self:
        """Add a node: an Agent, a graph, or a function ``(state) -> update``.

        Args:
            name: Unique node name.
            node: What runs. Functions take ``state`` (and optionally ``context``)
                and return a mapping of updates, a GraphState, None, or goto()/update().
            next_node: Shorthand for ``add_edge(name, next_node)``.
            reads: Keys the node needs; they must exist, and reading others is an error.
            writes: Keys the node must write; writing others is an error.
            optional_writes: Keys the node may write; cleared on a revisit that skips them.
            max_visits: Times the node may run per run (``None``/0: unlimited).
            max_iterations: Seed 004's name for ``max_visits`` (give one of the two).
            error_policy: Overrides the graph's error policy for this node.
            retry: Overrides the graph's retry policy for this node.
            destinations: Targets the node may goto(); checked at run time, drawn in diagrams.
            description: What the node does (diagrams, llm_decide prompts).
            metadata: Free-form data kept on the node spec.
            timeout: Seconds the node may run; past them it fails with NodeTimeout,
                which goes through its error policy (retries included).
            cache: Reuse the node's output for an input it has already run on,
                within a run and across runs (kept in the graph's ``node_cache``).
            middleware: Functions ``(call, proceed) -> output`` wrapped around this
                node's calls, inside the graph's own middleware (see ``NodeCall``).
            **options: Node-kind options (e.g. ``context_mode`` for agents).

        Returns:
            The graph, so calls can be chained.

        Raises:
            TypeError: ``node`` cannot be a node, or options do not apply to it.
        """
        reject_class(name, node)
        check_timeout(name, timeout)
        max_visits = _visits(name, max_visits, max_iterations)
        if cache is not None:
            if not isinstance(cache, CachePolicy):
                raise TypeError(
                    f"node {name!r}: cache must be a CachePolicy, got {type(cache).__name__}"
                )
            check_cacheable(name, node)
        hook = getattr(node, "__selectgraph_node__", None)
        if options and hook is None:
            raise TypeError(
                f"node {name!r}: options {', '.join(sorted(options))} only apply to agent "
                "nodes; a function node takes none"
            )
        graph_node = node if isinstance(node, AgentGraph) and not options else None
        adapter: NodeAdapter | None
        if graph_node is not None:
            adapter = None  # built at compile time, from the graph as it is then
        elif hook is not None and options:
            adapter = hook(name, **options)
        else:
            adapter = make_adapter(name, node)
        self._declare(
            NodeDecl(
                name=name,
                adapter=adapter,
                graph_node=graph_node,
                reads=list(reads) if reads is not None else None,
                writes=list(writes) if writes is not None else None,
                optional_writes=list(optional_writes) if optional_writes is not None else None,
                max_visits=max_visits,
                error_policy=error_policy,
                retry=retry,
                destinations=list(destinations) if destinations is not None else None,
                description=description or describe_node(node, adapter),
                metadata=dict(metadata or {}),
                timeout=timeout,
                cache=cache,
                middleware=check_middleware(f"node {name!r}", middleware),
            ),
            next_node,
        )
        return self

    def add_parallel_nodes(
        self,
        name: str,
        nodes: Sequence[str],
        *,
        merge_policy: MergePolicy = MergePolicy.LAST_WINS,
        merge_fn: MergeFn | None = None,
        failure_mode: FailureMode = "fail_all",
        max_concurrency: int | None = None,
        description: str | None = None,
    ) -> Self:
        """Register a parallel group: ``nodes`` run at once, and what they write is merged.

        Edges into and out of ``name`` work like any node's; the node after the
        group runs once, after every member has finished. Each member runs once
        on its own view of the state (its own edges are not followed), and the
        members' writes are merged in the order listed here.

        Args:
            name: The group's node name.
            nodes: The member nodes (added with add_node), in merge order.
            merge_policy: How keys without a reducer that several members wrote are
                settled; keys with a reducer always take every member's write.
            merge_fn: ``merge_fn(branch_states) -> GraphState``; replaces the merge.
            failure_mode: ``"fail_all"``, ``"continue_others"`` or ``"wait_all"``.
            max_concurrency: Members running at once (``None``: the graph's limit).
            description: What the group does (diagrams, llm_decide prompts).

        Raises:
            TypeError, ValueError: an option is not of the kind it must be, naming it.
        """
        check_options(
            f"add_parallel_nodes({name!r})",
            merge_policy=merge_policy,
            failure_mode=failure_mode,
            max_concurrency=max_concurrency,
            merge_fn=merge_fn,
        )
        if isinstance(nodes, str) or not isinstance(nodes, Sequence):
            raise TypeError(
                f"add_parallel_nodes({name!r}): nodes must be a list of node names, got {nodes!r}"
            )
        group = ParallelGroup(
            name=name,
            members=tuple(nodes),
            merge_policy=merge_policy,
            merge_fn=merge_fn,
            failure_mode=failure_mode,
            max_concurrency=max_concurrency,
            description=description or "",
        )
        self._declare(
            NodeDecl(
                name=name,
                adapter=GroupAdapter(group),
                description=description or f"parallel: {', '.join(map(str, nodes))}",
                group=group,
            ),
            UNSET,
        )
        return self

    def add_subgraph(
        self,
        name: str,
        graph: AgentGraph | CompiledGraph,
        *,
        input_map: Mapping[str, str] | None = None,
        output_map: Mapping[str, str] | None = None,
        projects_in: Sequence[str] | None = None,
        projects_out: Sequence[str] | None = None,
        next_node: str | EndType | Unset = UNSET,
        max_visits: int | None = None,
        error_policy: ErrorPolicy | None = None,
        retry: RetryPolicy | None = None,
        description: str | None = None,
        timeout: float | None = None,
    ) -> Self:
        """Add ``graph`` as one node behind an explicit state boundary.

        With no mapping, the subgraph starts from its own defaults and every
        subgraph field whose name matches a parent field is merged back through
        the parent's reducers.

        Args:
            name: Unique node name.
            graph: The graph to run.
            input_map: ``{parent_field: subgraph_field}`` copied in at entry.
            output_map: ``{subgraph_field: parent_field}`` merged out at exit
                (replaces name matching).
            projects_in: Same-named fields copied in (declared-boundary form).
            projects_out: Same-named fields merged out (declared-boundary form;
                nothing else crosses).
            next_node: Shorthand for ``add_edge(name, next_node)``.
            max_visits: Times the node may run per run.
            error_policy: Overrides the graph's error policy.
            retry: Overrides the graph's retry policy.
            description: Shown in diagrams.
            timeout: Seconds the subgraph may run; past them the node fails with
                NodeTimeout, through its error policy.
        """
        check_timeout(name, timeout)
        if not isinstance(graph, AgentGraph | CompiledGraph):
            raise TypeError(f"add_subgraph({name!r}, ...) needs an AgentGraph, got {graph!r}")
        self._declare(
            NodeDecl(
                name=name,
                subgraph=SubgraphDecl(
                    node=name,
                    graph=graph,
                    input_map=dict(input_map) if input_map is not None else None,
                    output_map=dict(output_map) if output_map is not None else None,
                    projects_in=list(projects_in) if projects_in is not None else None,
                    projects_out=list(projects_out) if projects_out is not None else None,
                ),
                max_visits=max_visits,
                error_policy=error_policy,
                retry=retry,
                description=description or f"subgraph {graph.name}",
                timeout=timeout,
            ),
            next_node,
        )
        return self

    @classmethod
    def from_spec(cls, spec: Any, *, allowed_modules: Iterable[str] | None = None) -> AgentGraph:
        """Build a graph from a GraphSpec, a mapping, or a YAML/JSON file path.

        A spec is code: it names functions to import and call. ``allowed_modules``
        limits which modules its references may import (see ``GraphSpec.from_dict``;
        ``None`` allows any, which is right only for specs you wrote yourself).

        Raises:
            GraphSpecError: the spec is invalid, naming where.
        """
        if _spec_reader is None:  # pragma: no cover - importing selectgraph loads the reader
            raise RuntimeError("AgentGraph.from_spec: selectgraph.build._spec is not loaded")
        return _spec_reader(spec, allowed_modules)

    @classmethod
    def chain(
        cls,
        *nodes: Any,
        names: Sequence[str] | None = None,
        name: str = "chain",
        **graph_options: Any,
    ) -> AgentGraph:
        """A linear graph running ``nodes`` in order, in one line.

        Example:
            >>> from selectgraph import AgentGraph
            >>> def shout(state):
            ...     return {"text": state["text"].upper()}
            >>> def exclaim(state):
            ...     return {"text": state["text"] + "!"}
            >>> AgentGraph.chain(shout, exclaim).run({"text": "hi"}).state["text"]
            'HI!'

        Args:
            *nodes: Agents, graphs or functions, in order.
            names: Node names (default: derived from each node, made unique).
            name: The graph's name.
            **graph_options: Passed to AgentGraph().
        """
        if not nodes:
            raise ValueError("chain() needs at least one node")
        if names is not None and len(names) != len(nodes):
            raise ValueError(f"chain() got {len(nodes)} nodes but {len(names)} names")
        graph = cls(name, **graph_options)
        chosen = list(names) if names is not None else unique_names(nodes)
        for node_name, node in zip(chosen, nodes, strict=True):
            graph.add_node(node_name, node)
        targets: list[str | EndType] = [*chosen[1:], END]
        for source, target in zip(chosen, targets, strict=True):
            graph.add_edge(source, target)
        graph.set_entry(chosen[0])
        return graph

    # ------------------------------------------------------------ compiling
    def validate(self) -> list[Diagnostic]:
        """Check the graph and return every problem found, without raising (seed 004).

        Each :class:`Diagnostic` has its ``severity``: an ``"error"`` (an unreachable
        node, a dangling edge...) is what :meth:`compile` and the run methods refuse
        with :class:`GraphBuildError`; a ``"warning"`` (a cycle with no way out...)
        compiles. An empty list: nothing to say.
        """
        return validate_graph(self._blueprint)

    def compile(self, *, checkpointer: CheckpointStore | None = None) -> CompiledGraph:
        """The validated, immutable graph (cached until the graph changes).

        Args:
            checkpointer: A store for runs given none (LangGraph's spelling): the
                compiled graph's ``run``, ``invoke``, ``get_state``... use it.

        Raises:
            GraphBuildError: listing every error found.
        """
        key = self._cache_key()
        if self._compiled is None or self._compiled_key != key:
            self._compiled = compile_graph(self._blueprint)
            self._compiled_key = key
        if checkpointer is not None:
            return self._compiled.with_checkpointer(checkpointer)
        return self._compiled

    def _compiled_graph(self) -> CompiledGraph:
        """What the run methods run: this graph, compiled (cached until it changes)."""
        return self.compile()

    @property
    def nodes(self) -> list[str]:
        """Declared node names, in order."""
        return list(self._blueprint.nodes)

    def __repr__(self) -> str:
        nodes, entry = list(self._blueprint.nodes), self._blueprint.entry
        return f"AgentGraph(name={self.name!r}, nodes={nodes}, entry={entry!r})"


SpecReader = Callable[[Any, Iterable[str] | None], "AgentGraph"]
"""``reader(spec, allowed_modules)``: the graph a GraphSpec, a mapping or a file path describes."""

_spec_reader: SpecReader | None = None


def read_specs_with(reader: SpecReader) -> None:
    """Make ``reader`` what :meth:`AgentGraph.from_spec` builds graphs with.

    The spec module builds AgentGraphs, so this module does not import it: it
    hands over its reader as it loads (``import selectgraph`` loads it).
    """
    global _spec_reader
    _spec_reader = reader


def _visits(name: str, max_visits: int | None, max_iterations: int | None) -> int | None:
    """``max_visits``, or seed 004's ``max_iterations`` for it.

    Raises:
        ValueError: both are given, differently.
    """
    if max_iterations is None:
        return max_visits
    if max_visits is not None and max_visits != max_iterations:
        raise ValueError(
            f"node {name!r}: max_iterations is seed 004's name for max_visits; give one of "
            f"them, not max_visits={max_visits} and max_iterations={max_iterations}"
        )
    return max_iterations
