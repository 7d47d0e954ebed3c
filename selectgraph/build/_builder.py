"""Builder: AgentGraph, where nodes and edges are declared before compile() validates them."""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Generator,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self, Unpack

from selectgraph.compile._compile import compile_graph, validate_graph
from selectgraph.compile._compiled import (
    NO_RESPONSE,
    CompiledGraph,
    GraphInput,
    ResumeOptions,
    RunOptions,
    StreamOptions,
)
from selectgraph.core._callables import callable_name
from selectgraph.core._control import Budget, CancellationToken
from selectgraph.core._errors import Diagnostic, GraphBuildError
from selectgraph.core._policies import (
    Conversation,
    ErrorPolicy,
    LoopAction,
    MaxStepsAction,
    RetryPolicy,
)
from selectgraph.core._result import GraphResult
from selectgraph.core._sentinels import END, START, UNSET, EndType, StartType, Unset
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.nodes._cache import check_cacheable
from selectgraph.nodes._function import make_adapter, reject_class
from selectgraph.nodes._spec import NodeAdapter
from selectgraph.observe._delivery import DrainSummary
from selectgraph.observe._observer import Observer
from selectgraph.observe._recorder import Listener
from selectgraph.observe._stream import StreamMode
from selectgraph.persistence._node_cache import CachePolicy, InMemoryNodeCache, NodeCache
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.routing._edges import EdgeKind, Trigger
from selectgraph.routing._parallel import (
    DEFAULT_FANOUT,
    Branches,
    FailureMode,
    FanOutOptions,
    GroupAdapter,
    MergeFn,
    MergePolicy,
    ParallelGroup,
    check_fanout_options,
)
from selectgraph.runtime._resume import StateSnapshot
from selectgraph.runtime._settings import GraphSettings

__all__ = ["AgentGraph"]


@dataclass(slots=True, kw_only=True)
class SubgraphDecl:
    """A subgraph node as declared with add_subgraph()."""

    node: str
    graph: AgentGraph | CompiledGraph
    input_map: Mapping[str, str] | None = None
    output_map: Mapping[str, str] | None = None
    projects_in: Sequence[str] | None = None
    projects_out: Sequence[str] | None = None


@dataclass(slots=True, kw_only=True)
class NodeDecl:
    """A node as declared with add_node() or add_subgraph()."""

    name: str
    adapter: NodeAdapter | None = None
    graph_node: AgentGraph | None = None
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


class AgentGraph:
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
        conversation: Conversation = "isolated",
        compact_at_tokens: int = 8000,
        strict_entry: bool = False,
        max_concurrency: int | None = None,
        node_cache: NodeCache | None = None,
        pause_before: Iterable[str] = (),
        pause_after: Iterable[str] = (),
        max_total_tokens: int | None = None,
        max_cost_usd: float | None = None,
        max_duration: float | None = None,
        cancellation_token: CancellationToken | None = None,
        input_guardrails: Any = None,
        output_guardrails: Any = None,
        fast_route_fn: Callable[[Any], Any] | None = None,
    ) -> None:
        """Create an empty graph.

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
        """
        _check_options("AgentGraph", max_concurrency=max_concurrency)
        if node_cache is not None and not isinstance(node_cache, NodeCache):
            raise TypeError(
                "AgentGraph: node_cache must be a NodeCache (InMemoryNodeCache, "
                f"SQLiteNodeCache...), got {type(node_cache).__name__}"
            )
        self._node_cache: NodeCache = node_cache if node_cache is not None else InMemoryNodeCache()
        self.name = name
        self.description = description
        if retry is None:
            retry = (
                RetryPolicy()
                if error_retry_limit is None
                else RetryPolicy(max_retries=error_retry_limit)
            )
        self._settings = GraphSettings(
            max_steps=50 if isinstance(max_steps, Unset) else max_steps,
            on_max_steps=on_max_steps,
            error_policy=error_policy,
            retry=retry,
            detect_loops=enable_loop_detection,
            on_loop=on_loop,
            stall_threshold=stall_threshold,
            goal=goal,
            conversation=conversation,
            compact_at_tokens=compact_at_tokens,
            max_concurrency=max_concurrency,
            pause_before=_names("pause_before", pause_before),
            pause_after=_names("pause_after", pause_after),
            budget=_budget(max_total_tokens, max_cost_usd, max_duration),
            cancellation_token=_token(cancellation_token),
            input_guardrails=_guardrails(input_guardrails),
            output_guardrails=_output_guardrails(output_guardrails),
            fast_route_fn=_fast_route(fast_route_fn),
        )
        self._state_schema = state_schema
        self._reducers = dict(reducers) if reducers else None
        self._observers = tuple(observers)
        self._nodes: dict[str, NodeDecl] = {}
        self._edges: list[EdgeDecl] = []
        self._entry: str | None = None
        self._strict_entry = strict_entry
        self._problems: list[Diagnostic] = []
        self._compiled: CompiledGraph | None = None
        self._compiled_key: tuple[Any, ...] | None = None
        self._version = 0

    # ------------------------------------------------------------ building
    def _changed(self) -> None:
        self._compiled = None
        self._version += 1

    def _children(self) -> list[AgentGraph]:
        """The builders of graphs nested in this one (as nodes or subgraphs)."""
        nested: list[AgentGraph] = []
        for decl in self._nodes.values():
            if decl.graph_node is not None:
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
        if name in self._nodes:
            self._problems.append(
                Diagnostic(
                    category="duplicate_node",
                    message=f"node {name!r} is declared twice; node names must be unique",
                    node=name,
                )
            )
            self._changed()
            return
        self._nodes[name] = decl
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
        error_policy: ErrorPolicy | None = None,
        retry: RetryPolicy | None = None,
        destinations: Sequence[str | EndType] | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        cache: CachePolicy | None = None,
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
            error_policy: Overrides the graph's error policy for this node.
            retry: Overrides the graph's retry policy for this node.
            destinations: Targets the node may goto(); checked at run time, drawn in diagrams.
            description: What the node does (diagrams, llm_decide prompts).
            metadata: Free-form data kept on the node spec.
            timeout: Seconds the node may run; past them it fails with NodeTimeout,
                which goes through its error policy (retries included).
            cache: Reuse the node's output for an input it has already run on,
                within a run and across runs (kept in the graph's ``node_cache``).
            **options: Node-kind options (e.g. ``context_mode`` for agents).

        Returns:
            The graph, so calls can be chained.

        Raises:
            TypeError: ``node`` cannot be a node, or options do not apply to it.
        """
        reject_class(name, node)
        _check_timeout(name, timeout)
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
                description=description or _describe_node(node, adapter),
                metadata=dict(metadata or {}),
                timeout=timeout,
                cache=cache,
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
        _check_options(
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
        _check_timeout(name, timeout)
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

    def add_edge(
        self,
        source: str | EndType | StartType,
        target: str | EndType | Sequence[str],
        *,
        condition: str | Callable[[GraphState], Any] | None = None,
        on: Trigger = "success",
        label: str | None = None,
        merge_policy: MergePolicy = MergePolicy.LAST_WINS,
        failure_mode: FailureMode = "fail_all",
        max_concurrency: int | None = None,
    ) -> Self:
        """Add an edge. Conditional edges are tried in declaration order; the first match wins.

        Args:
            source: The node the edge leaves.
            target: The next node, or END.
            condition: A safe expression over state keys (``"score >= 0.8"``) or a
                predicate ``(state) -> bool``. Without one, the edge is the
                unconditional fallback, taken only when no conditional edge matches.
            on: ``"success"`` (default), ``"failure"`` (route a failed node to
                recovery) or ``"always"``.
            label: Text for diagrams and traces (defaults to the condition).
            merge_policy: For a list of targets: how keys without a reducer that
                several branches wrote are settled.
            failure_mode: For a list of targets: what a branch's failure does.
            max_concurrency: For a list of targets: branches running at once.

        A list of targets fans out: each target starts a branch, the branches
        run at once on their own views of the state, each follows its edges
        until the nearest node all of them lead to (the join), and that node
        runs once, after all of them, on their merged writes.
        """
        if source is START:
            # LangGraph's spelling of the entry: add_edge(START, "first").
            if condition is not None or not isinstance(target, str):
                raise TypeError(
                    "add_edge(START, ...) names the one node every run starts at; "
                    f"got {target!r}" + (" with a condition" if condition is not None else "")
                )
            return self.set_entry(target)
        declared: str | EndType | Branches
        if isinstance(target, list | tuple):
            _check_options(
                f"add_edge({source!r}, {list(target)!r})",
                merge_policy=merge_policy,
                failure_mode=failure_mode,
                max_concurrency=max_concurrency,
            )
            options = FanOutOptions(
                merge_policy=merge_policy,
                failure_mode=failure_mode,
                max_concurrency=max_concurrency,
            )
            declared = Branches(tuple(target), options, f"edge from {source!r}")
        else:
            declared = target  # type: ignore[assignment]  # checked at compile time
        if on not in ("success", "failure", "always"):
            raise ValueError(
                f"add_edge(on=...) must be 'success', 'failure' or 'always', got {on!r}"
            )
        if condition is not None and not (isinstance(condition, str) or callable(condition)):
            raise TypeError(
                f"add_edge({source!r}, {target!r}): condition must be a safe expression string "
                f"or a function of the state, got {condition!r}"
            )
        self._edges.append(
            EdgeDecl(
                source=source,
                target=declared,
                kind="static" if condition is None else "condition",
                trigger=on,
                condition=condition,
                label=label,
                order=len(self._edges),
            )
        )
        self._changed()
        return self

    def add_conditional_edge(
        self,
        source: str,
        router: Callable[[GraphState], Any],
        path_map: Mapping[Hashable, str | EndType] | Sequence[str | EndType] | None = None,
        *,
        on: Trigger = "success",
        merge_policy: MergePolicy = MergePolicy.LAST_WINS,
        failure_mode: FailureMode = "fail_all",
        max_concurrency: int | None = None,
    ) -> Self:
        """Route from ``source`` with a function of the state.

        Args:
            source: The node the router runs after.
            router: ``(state) -> target``; returns a node name, END, a path_map
                key, or ``goto(target, update)``. May be async.
            path_map: Allowed return values and the node each means (a list of
                node names maps each to itself). Checked when the graph is built.
                END is always allowed, listed or not: stopping needs no node.
            on: Which outcomes of ``source`` the router decides for.
            merge_policy: When the router returns a list (node names or Scatter):
                how keys without a reducer that several branches wrote are settled.
            failure_mode: When it returns a list: what a branch's failure does.
            max_concurrency: When it returns a list: branches running at once.
        """
        _check_options(
            f"add_conditional_edge({source!r}, ...)",
            merge_policy=merge_policy,
            failure_mode=failure_mode,
            max_concurrency=max_concurrency,
        )
        if not callable(router):
            raise TypeError(
                f"add_conditional_edge({source!r}, ...) needs a function, got {router!r}"
            )
        self._edges.append(
            EdgeDecl(
                source=source,
                kind="router",
                trigger=on,
                router=router,
                path_map=path_map,
                order=len(self._edges),
                fanout=FanOutOptions(
                    merge_policy=merge_policy,
                    failure_mode=failure_mode,
                    max_concurrency=max_concurrency,
                ),
            )
        )
        self._changed()
        return self

    def add_llm_edge(
        self,
        source: str,
        targets: Sequence[str | EndType],
        *,
        fallback: str | EndType,
        provider: Any = None,
        model: str | None = None,
        instructions: str = "",
        on: Trigger = "success",
    ) -> Self:
        """Let a (fast) model choose where to go after ``source``.

        The model is told the graph's goal, the node's output and each
        target's description, and answers with JSON naming a target and its
        reasoning. An unparseable answer, an unknown target or a failed call
        fires ``fallback``. The choice and the reasoning appear in the trace.

        Args:
            source: The node after which the model decides.
            targets: Nodes (or END) the model may choose among.
            fallback: Where to go when no valid choice is made.
            provider: The provider to ask (default: the offline-aware default provider).
            model: The model to ask (default: the provider's default model).
            instructions: Extra routing guidance for the model.
            on: Which outcomes of ``source`` the decision applies to.
        """
        from selectgraph.agents._decide import LLMDecider

        decider = LLMDecider(provider=provider, model=model, instructions=instructions)
        self._edges.append(
            EdgeDecl(
                source=source,
                kind="llm",
                trigger=on,
                target=fallback,
                router=decider,
                path_map=list(targets),
                order=len(self._edges),
            )
        )
        self._changed()
        return self

    def set_entry(self, name: str) -> Self:
        """Declare the node every run starts at."""
        self._entry = name
        self._changed()
        return self

    set_entry_point = set_entry

    def set_finish_point(self, name: str) -> Self:
        """End the run after ``name`` (LangGraph's spelling of ``add_edge(name, END)``)."""
        return self.add_edge(name, END)

    def add_conditional_edges(
        self,
        source: str,
        path: Callable[[GraphState], Any],
        path_map: Mapping[Hashable, str | EndType] | Sequence[str | EndType] | None = None,
        **options: Any,
    ) -> Self:
        """LangGraph's spelling of :meth:`add_conditional_edge`."""
        return self.add_conditional_edge(source, path, path_map, **options)

    @classmethod
    def from_spec(cls, spec: Any, *, allowed_modules: Iterable[str] | None = None) -> AgentGraph:
        """Build a graph from a GraphSpec, a mapping, or a YAML/JSON file path.

        A spec is code: it names functions to import and call. ``allowed_modules``
        limits which modules its references may import (see ``GraphSpec.from_dict``;
        ``None`` allows any, which is right only for specs you wrote yourself).

        Raises:
            GraphSpecError: the spec is invalid, naming where.
        """
        from selectgraph.build._spec import GraphSpec

        if isinstance(spec, GraphSpec):
            return spec.build(allowed_modules=allowed_modules)
        if isinstance(spec, Mapping):
            return GraphSpec.from_dict(spec, allowed_modules=allowed_modules).build()
        path = str(spec)
        if path.endswith(".json"):
            return GraphSpec.from_json(path, allowed_modules=allowed_modules).build()
        return GraphSpec.from_yaml(path, allowed_modules=allowed_modules).build()

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
        chosen = list(names) if names is not None else _unique_names(nodes)
        for node_name, node in zip(chosen, nodes, strict=True):
            graph.add_node(node_name, node)
        targets: list[str | EndType] = [*chosen[1:], END]
        for source, target in zip(chosen, targets, strict=True):
            graph.add_edge(source, target)
        graph.set_entry(chosen[0])
        return graph

    # ------------------------------------------------------------ compiling
    def validate(self) -> list[Diagnostic]:
        """Check the graph; return its warnings.

        Raises:
            GraphBuildError: listing every error found.
        """
        diagnostics = validate_graph(self)
        errors = [d for d in diagnostics if d.severity == "error"]
        if errors:
            raise GraphBuildError(errors)
        return [d for d in diagnostics if d.severity == "warning"]

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
            self._compiled = compile_graph(self)
            self._compiled_key = key
        if checkpointer is not None:
            return self._compiled.with_checkpointer(checkpointer)
        return self._compiled

    # --------------------------------------------------------------- running
    def run(self, input: GraphInput = None, **options: Unpack[RunOptions]) -> GraphResult:
        """Compile if needed and run to a stop; see :meth:`CompiledGraph.run` for the options."""
        return self.compile().run(input, **options)

    def arun(
        self, input: GraphInput = None, **options: Unpack[RunOptions]
    ) -> Coroutine[Any, Any, GraphResult]:
        """Compile if needed and run to a stop: ``await graph.arun(input)``.

        See :meth:`CompiledGraph.arun`; compiling and preparing the run happen
        when this is called, running when the coroutine is awaited.
        """
        return self.compile().arun(input, **options)

    def astream(
        self, input: GraphInput = None, **options: Unpack[StreamOptions]
    ) -> AsyncIterator[Any]:
        """Compile if needed and stream the run; see :meth:`CompiledGraph.astream`."""
        return self.compile().astream(input, **options)

    async def drain(self, timeout: float | None = None) -> DrainSummary:
        """Wait for async observers; see :meth:`CompiledGraph.drain`."""
        return await self.compile().drain(timeout)

    async def drain_events_for(self, run_id: str, *, timeout: float | None = None) -> DrainSummary:
        """Wait for async observers of one run; see :meth:`CompiledGraph.drain_events_for`."""
        return await self.compile().drain_events_for(run_id, timeout=timeout)

    def invoke(
        self, input: Any = None, config: Mapping[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Run and return the final state's data, as LangGraph does (see CompiledGraph.invoke)."""
        return self.compile().invoke(input, config, **options)

    async def ainvoke(
        self, input: Any = None, config: Mapping[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Async :meth:`invoke`."""
        return await self.compile().ainvoke(input, config, **options)

    def stream(
        self,
        input: Any = None,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: StreamMode | Sequence[StreamMode] = "updates",
        **options: Any,
    ) -> Generator[Any, None, None]:
        """Run and yield as it goes, from synchronous code; see :meth:`CompiledGraph.stream`."""
        return self.compile().stream(input, config, stream_mode=stream_mode, **options)

    def resume(
        self,
        interrupt_id: str | Mapping[str, Any],
        response: Any = NO_RESPONSE,
        **options: Unpack[ResumeOptions],
    ) -> GraphResult:
        """Answer an interrupt and continue the run; see :meth:`CompiledGraph.aresume`."""
        return self.compile().resume(interrupt_id, response, **options)

    def aresume(
        self,
        interrupt_id: str | Mapping[str, Any],
        response: Any = NO_RESPONSE,
        **options: Unpack[ResumeOptions],
    ) -> Coroutine[Any, Any, GraphResult]:
        """Answer an interrupt and continue the run: ``await graph.aresume(id, answer)``."""
        return self.compile().aresume(interrupt_id, response, **options)

    def get_state(
        self,
        run_id: str,
        *,
        checkpoint_store: CheckpointStore | None = None,
        serializer: StateSerializer | None = None,
    ) -> StateSnapshot:
        """The run's latest checkpoint; see :meth:`CompiledGraph.get_state`."""
        return self.compile().get_state(
            run_id, checkpoint_store=checkpoint_store, serializer=serializer
        )

    def get_history(
        self,
        run_id: str,
        *,
        checkpoint_store: CheckpointStore | None = None,
        limit: int | None = None,
        serializer: StateSerializer | None = None,
    ) -> list[StateSnapshot]:
        """Every checkpoint of the run, newest first; see :meth:`CompiledGraph.get_history`."""
        return self.compile().get_history(
            run_id, checkpoint_store=checkpoint_store, limit=limit, serializer=serializer
        )

    def update_state(
        self,
        run_id: str,
        values: Mapping[str, Any],
        *,
        checkpoint_store: CheckpointStore | None = None,
        as_node: str | None = None,
        serializer: StateSerializer | None = None,
    ) -> str:
        """Correct a saved run's state; see :meth:`CompiledGraph.update_state`."""
        return self.compile().update_state(
            run_id,
            values,
            checkpoint_store=checkpoint_store,
            as_node=as_node,
            serializer=serializer,
        )

    def __call__(self, state: GraphState) -> GraphState:
        """Run on ``state`` and return the final state (a graph is callable like a node)."""
        return self.compile()(state)

    def __selectgraph_node__(self, name: str) -> NodeAdapter:
        return self.compile().__selectgraph_node__(name)

    def to_mermaid(self, result: GraphResult | None = None) -> str:
        """A Mermaid flowchart; with ``result``, the edges that fired are highlighted."""
        return self.compile().to_mermaid(result)

    def visualize(
        self, format: Literal["ascii", "mermaid"] = "ascii", result: GraphResult | None = None
    ) -> str:
        """A text picture of the graph (``"ascii"`` or ``"mermaid"``)."""
        return self.compile().visualize(format, result)

    @property
    def nodes(self) -> list[str]:
        """Declared node names, in order."""
        return list(self._nodes)

    def __repr__(self) -> str:
        return f"AgentGraph(name={self.name!r}, nodes={list(self._nodes)}, entry={self._entry!r})"


def _check_timeout(name: str, timeout: float | None) -> None:
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise ValueError(f"node {name!r}: timeout must be a number of seconds > 0, got {timeout!r}")


def _names(what: str, names: Iterable[str]) -> frozenset[str]:
    """Node names given as one string or several (checked against the nodes at compile)."""
    if isinstance(names, str):
        return frozenset((names,))
    chosen = frozenset(names)
    bad = [n for n in chosen if not isinstance(n, str)]
    if bad:
        raise TypeError(f"AgentGraph: {what} takes node names, got {bad[0]!r}")
    return chosen


def _check_options(where: str, **options: Any) -> None:
    """Refuse fan-out options of the wrong kind at once, naming the option."""
    problems = check_fanout_options(
        where,
        options.get("merge_policy", MergePolicy.LAST_WINS),
        options.get("failure_mode", "fail_all"),
        options.get("max_concurrency"),
        options.get("merge_fn"),
    )
    if problems:
        bad_kind = not isinstance(options.get("merge_policy", MergePolicy.LAST_WINS), MergePolicy)
        raise (TypeError if bad_kind else ValueError)("; ".join(problems))


def _describe_node(node: Any, adapter: Any = None) -> str:
    # An agent node describes itself by its focus; anything else by its own
    # description or the first line of its docstring.
    for source in (adapter, node):
        doc = getattr(source, "description", None)
        if isinstance(doc, str) and doc:
            return doc
    text = getattr(node, "__doc__", None) if callable(node) and not isinstance(node, type) else None
    if isinstance(text, str) and text.strip() and type(node).__doc__ != text:
        return text.strip().splitlines()[0]
    return ""


def _unique_names(nodes: Iterable[Any]) -> list[str]:
    names: list[str] = []
    for index, node in enumerate(nodes, start=1):
        base = getattr(node, "name", None)
        if not isinstance(base, str) or not base:
            base = callable_name(node)
        if base == "lambda":
            base = f"step_{index}"
        candidate, suffix = base, 2
        while candidate in names:
            candidate, suffix = f"{base}_{suffix}", suffix + 1
        names.append(candidate)
    return names


def _budget(tokens: int | None, cost: float | None, duration: float | None) -> Budget | None:
    budget = Budget(max_total_tokens=tokens, max_cost_usd=cost, max_duration=duration)
    return None if budget.empty else budget


def _token(token: CancellationToken | None) -> CancellationToken | None:
    if token is not None and not isinstance(token, CancellationToken):
        raise TypeError(
            "AgentGraph: cancellation_token must be a CancellationToken, "
            f"got {type(token).__name__}"
        )
    return token


def _fast_route(fn: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    if fn is not None and not callable(fn):
        raise TypeError(f"AgentGraph: fast_route_fn must be callable, got {type(fn).__name__}")
    return fn


def _guardrails(value: Any) -> Any:
    if value is None:
        return None
    from selectgraph.guardrails import as_pipeline

    return as_pipeline(value)


def _output_guardrails(value: Any) -> Any:
    pipeline = _guardrails(value)
    if pipeline is not None and pipeline.is_async:
        raise TypeError(
            "AgentGraph: output_guardrails run where the run ends, inside the step loop, "
            "and must be synchronous; an async guardrail can check the result after arun()"
        )
    return pipeline
