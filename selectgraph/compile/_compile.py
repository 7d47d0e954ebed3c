"""Compile: validate a graph definition, report every problem at once, build the CompiledGraph.

Compile precomputes everything a step needs — each node's ordered edges, the
parsed conditions, the reducer table — so the runner only looks things up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from selectgraph.compile._compiled import CompiledGraph
from selectgraph.compile._declarations import (
    Blueprint,
    EdgeDecl,
    GraphDeclaration,
    NodeDecl,
    SubgraphDecl,
)
from selectgraph.core._callables import callable_name
from selectgraph.core._errors import Diagnostic, GraphBuildError
from selectgraph.core._policies import ErrorPolicy
from selectgraph.core._sentinels import END, EndType
from selectgraph.core._serialization import StateSerializer, named_class
from selectgraph.nodes._cache import CachingAdapter, serializer_for
from selectgraph.nodes._function import FunctionAdapter
from selectgraph.nodes._middleware import MiddlewareAdapter
from selectgraph.nodes._spec import NodeSpec
from selectgraph.routing._edges import Edge, NodeRoutes, RouteContext
from selectgraph.routing._parallel import Branches, ParallelGroup
from selectgraph.routing._reach import edge_targets, reachable
from selectgraph.routing._safe_eval import ALIASES, Condition, ConditionSyntaxError, parse_condition
from selectgraph.runtime._branches import run_blocking
from selectgraph.runtime._subgraph import (
    GraphAdapter,
    Projection,
    SubgraphAdapter,
    check_projection,
)
from selectgraph.state._schema import StateSchema, build_schema

__all__ = ["compile_graph", "validate_graph"]


def _target_name(target: Any) -> str:
    if type(target) is Branches:
        return target.describe()
    return "END" if target is END else repr(target)


class _Compiler:
    def __init__(self, blueprint: Blueprint) -> None:
        self.blueprint = blueprint
        self.diagnostics: list[Diagnostic] = []
        self.broken_sources: set[str] = set()
        self.group_members: set[str] = {
            member
            for decl in blueprint.nodes.values()
            if decl.group is not None
            for member in decl.group.members
        }
        """Nodes with an edge already reported as broken (no dead-end report on top)."""
        self._cache_serializer: StateSerializer | None = None

    def error(self, category: str, message: str, node: str | None = None) -> None:
        self._add(Diagnostic(category=category, message=message, node=node))

    def warn(self, category: str, message: str, node: str | None = None) -> None:
        self._add(Diagnostic(category=category, message=message, node=node, severity="warning"))

    def _add(self, diagnostic: Diagnostic) -> None:
        if diagnostic not in self.diagnostics:  # e.g. an "always" edge checked twice
            self.diagnostics.append(diagnostic)

    # ---------------------------------------------------------------- main
    def compile(self) -> CompiledGraph:
        blueprint = self.blueprint
        for problem in blueprint.problems:
            self.diagnostics.append(problem)
        if not blueprint.name or not isinstance(blueprint.name, str):
            self.error("invalid_name", f"a graph needs a non-empty name, got {blueprint.name!r}")
        settings = blueprint.settings
        if settings.max_steps is not None and settings.max_steps < 1:
            self.error(
                "invalid_max_steps",
                f"max_steps must be at least 1 (or None for no limit), got {settings.max_steps}",
            )
        if settings.stall_threshold is not None and settings.stall_threshold < 1:
            self.error(
                "invalid_stall_threshold",
                f"stall_threshold must be at least 1 (or None to disable), "
                f"got {settings.stall_threshold}",
            )
        schema = build_schema(blueprint.state_schema, blueprint.reducers, self.diagnostics)
        decls = blueprint.nodes
        if not decls:
            self.error("empty_graph", f"graph {blueprint.name!r} has no nodes; add_node() first")
        entry = blueprint.entry
        if entry is None and decls and not blueprint.strict_entry:
            # Auto-entry: the first node added that is not a parallel group's member.
            entry = next((n for n in decls if n not in self.group_members), next(iter(decls)))
        if entry is None:
            if decls:
                self.error(
                    "no_declared_entry",
                    f"no entry node declared; call set_entry(...) with one of: {', '.join(decls)}",
                )
        elif entry not in decls:
            self.error(
                "unknown_entry",
                f"entry {entry!r} is not a node; nodes: {', '.join(decls) or 'none'}",
            )

        specs = {name: self.node_spec(decl, schema) for name, decl in decls.items()}
        edges = self.edges(decls, schema)
        routes = self.routes(decls, edges)
        if entry in decls:
            self.check_reachability(entry, decls, edges)
        for what in ("pause_before", "pause_after"):
            for node in sorted(getattr(blueprint.settings, what)):
                if node not in decls:
                    self.error(
                        "unknown_node",
                        f"{what} names {node!r}, which is not a node; nodes: {', '.join(decls)}",
                    )
        errors = [d for d in self.diagnostics if d.severity == "error"]
        if errors:
            raise GraphBuildError(errors)
        assert entry is not None
        return CompiledGraph(
            name=blueprint.name,
            entry=entry,
            nodes={name: spec for name, spec in specs.items() if spec is not None},
            routes=routes,
            edges=edges,
            schema=schema,
            settings=settings,
            observers=blueprint.observers,
            warnings=[d for d in self.diagnostics if d.severity == "warning"],
            description=blueprint.description,
            serializer=_with_node_types(serializer_for(blueprint.state_schema), specs.values()),
            state_type=blueprint.state_schema,
        )

    # --------------------------------------------------------------- nodes
    def node_spec(self, decl: NodeDecl, schema: StateSchema) -> NodeSpec | None:
        name = decl.name
        adapter = decl.adapter
        if decl.subgraph is not None:
            adapter = self.subgraph_adapter(decl.subgraph, schema)
        elif decl.graph_node is not None:
            child = self.compile_child(name, decl.graph_node)
            adapter = child.__selectgraph_node__(name) if child is not None else None
        if adapter is None:
            return None
        if decl.max_visits is not None and (
            isinstance(decl.max_visits, bool)
            or not isinstance(decl.max_visits, int)
            or decl.max_visits < 0
        ):
            self.error(
                "invalid_max_visits",
                f"node {name!r}: max_visits must be an integer >= 1, or 0/None for unlimited, "
                f"got {decl.max_visits!r}",
                name,
            )
        for what, keys in (
            ("reads", decl.reads),
            ("writes", decl.writes),
            ("optional_writes", decl.optional_writes),
        ):
            for key in sorted(keys or ()):
                if (
                    schema.fields is not None
                    and key not in schema.fields
                    and not schema.allow_extra
                ):
                    self.error(
                        "unknown_state_key",
                        f"node {name!r} declares {what} {key!r}, which is not a field of "
                        f"{schema.source}",
                        name,
                    )
        for target in decl.destinations or ():
            if target is not END and target not in self.blueprint.nodes:
                self.error(
                    "dangling_edge",
                    f"node {name!r} declares destination {_target_name(target)}, which is not "
                    "a node",
                    name,
                )
        if decl.error_policy is ErrorPolicy.RETRY and not adapter.executor_retries:
            self.warn(
                "retry_policy_ignored",
                f"node {name!r} sets error_policy=ErrorPolicy.RETRY, but it is a "
                f"{adapter.kind} node, which retries through its judge "
                "(ACCEPT / RETRY / ESCALATE); the executor does not retry it again. "
                "Configure retries on the agent, or choose ABORT / SKIP here",
                name,
            )
        if decl.group is not None:
            self.check_group(decl.group)
        reads = frozenset(decl.reads) if decl.reads is not None else None
        writes = frozenset(decl.writes) if decl.writes is not None else None
        optional_writes = frozenset(decl.optional_writes or ())
        # Blocking work inside a branch runs on a worker thread: a plain function,
        # or a graph whose nodes are all synchronous.
        offload = (
            isinstance(adapter, FunctionAdapter | GraphAdapter | SubgraphAdapter)
            and not adapter.is_async
        )
        if decl.cache is not None:
            adapter = CachingAdapter(
                adapter,
                node=name,
                graph=self.blueprint.name,
                policy=decl.cache,
                store=self.blueprint.node_cache,
                serializer=self.cache_serializer(),
                reads=reads,
                writes=writes,
                optional_writes=optional_writes,
            )
        chain = (*self.blueprint.middleware, *decl.middleware)
        if chain and decl.group is None:  # a group's members are wrapped as nodes of their own
            # The chain runs on the loop; a blocking node inside goes to a thread of its own.
            blocking = run_blocking if offload else None
            wrap = MiddlewareAdapter(adapter, chain, node=name, blocking=blocking)
            adapter, offload = wrap, False
        return NodeSpec(
            name=name,
            adapter=adapter,
            reads=reads,
            writes=writes,
            optional_writes=optional_writes,
            max_visits=decl.max_visits or None,
            error_policy=decl.error_policy,
            retry=decl.retry,
            destinations=tuple(decl.destinations) if decl.destinations is not None else None,
            description=decl.description,
            metadata=dict(decl.metadata),
            timeout=decl.timeout,
            group=decl.group,
            offload=offload,
        )

    def cache_serializer(self) -> StateSerializer:
        """What encodes and restores cached outputs; built once per compile."""
        if self._cache_serializer is None:
            self._cache_serializer = serializer_for(self.blueprint.state_schema)
        return self._cache_serializer

    def check_group(self, group: ParallelGroup) -> None:
        name = group.name
        if not group.members:
            self.error(
                "empty_parallel_group",
                f"parallel group {name!r} has no members; list the nodes it runs at once",
                name,
            )
        decls = self.blueprint.nodes
        seen: set[str] = set()
        for member in group.members:
            if not isinstance(member, str) or member not in decls:
                known = ", ".join(n for n in decls if n != name) or "none"
                self.error(
                    "unknown_group_member",
                    f"parallel group {name!r} lists {member!r}, which is not a node; "
                    f"add_node it first (nodes: {known})",
                    name,
                )
            elif member == name:
                self.error("unknown_group_member", f"parallel group {name!r} lists itself", name)
            elif member in seen:
                self.error(
                    "duplicate_group_member",
                    f"parallel group {name!r} lists {member!r} twice; each member runs once",
                    name,
                )
            seen.add(member)

    def compile_child(
        self, name: str, graph: GraphDeclaration | CompiledGraph
    ) -> CompiledGraph | None:
        """``graph`` compiled; its problems are reported as this node's."""
        if isinstance(graph, CompiledGraph):
            return graph
        try:
            return graph.compile()
        except GraphBuildError as error:
            for problem in error.diagnostics:
                self.error(problem.category, f"in subgraph {name!r}: {problem.message}", name)
            return None

    def subgraph_adapter(self, decl: SubgraphDecl, parent: StateSchema) -> SubgraphAdapter | None:
        name = decl.node
        child = self.compile_child(name, decl.graph)
        if child is None:
            return None
        uses_maps = decl.input_map is not None or decl.output_map is not None
        uses_sets = decl.projects_in is not None or decl.projects_out is not None
        if uses_maps and uses_sets:
            self.error(
                "conflicting_projection_forms",
                f"subgraph node {name!r} declares both input_map/output_map and "
                "projects_in/projects_out; use one form",
                name,
            )
            return None
        if uses_sets:
            projection = Projection(
                form="sets",
                inputs={f: f for f in decl.projects_in or ()},
                outputs={f: f for f in decl.projects_out or ()},
            )
        elif uses_maps:
            projection = Projection(
                form="maps",
                inputs=self.invert(name, "input_map", decl.input_map or {}),
                outputs=(
                    self.invert(name, "output_map", decl.output_map)
                    if decl.output_map is not None
                    else None
                ),
            )
        else:
            projection = Projection(form="default", inputs={}, outputs=None)
        diagnostics: list[Diagnostic] = []
        check_projection(name, projection, parent, child.schema, diagnostics)
        self.diagnostics.extend(diagnostics)
        return SubgraphAdapter(child, projection, parent.fields)

    def invert(self, node: str, what: str, mapping: Mapping[str, str]) -> dict[str, str]:
        """``{source: destination}`` as the user writes it -> ``{destination: source}``."""
        inverted: dict[str, str] = {}
        for source, destination in mapping.items():
            if destination in inverted:
                self.error(
                    "conflicting_projection",
                    f"subgraph node {node!r}: {what} sends both {inverted[destination]!r} and "
                    f"{source!r} to {destination!r}",
                    node,
                )
            inverted[destination] = source
        return inverted

    # --------------------------------------------------------------- edges
    def edges(self, decls: Mapping[str, NodeDecl], schema: StateSchema) -> list[Edge]:
        edges: list[Edge] = []
        for decl in self.blueprint.edges:
            edge = self.edge(decl, decls, schema)
            if edge is not None:
                edges.append(edge)
            elif isinstance(decl.source, str):
                self.broken_sources.add(decl.source)
        return edges

    def edge(
        self, decl: EdgeDecl, decls: Mapping[str, NodeDecl], schema: StateSchema
    ) -> Edge | None:
        source = decl.source
        ok = True
        if source is END:
            target = "a router" if decl.target is None else _target_name(decl.target)
            self.error("edge_from_end", f"the edge END -> {target} leaves END; END is terminal")
            return None
        if source not in decls:
            self.error(
                "dangling_edge",
                f"edge from {source!r}: no such node"
                + (" (did you mean to add_node it first?)" if decls else ""),
            )
            ok = False
        label = decl.label or ""
        condition: Condition | Callable[..., Any] | None = None
        if decl.kind == "condition":
            raw = decl.condition
            if isinstance(raw, str):
                try:
                    condition = parse_condition(raw)
                    self.check_condition_names(condition, source, schema)
                except ConditionSyntaxError as exc:
                    self.error(
                        "unsafe_condition",
                        f"edge {source!r} -> {_target_name(decl.target)}: {exc}",
                        source,
                    )
                    ok = False  # keep checking the edge, so every problem is reported
                label = label or raw
            else:
                condition = raw
                label = label or callable_name(raw)
        if type(decl.target) is Branches:
            for target in decl.target.targets:
                ok = self.check_target(source, target, decls, "edge") and ok
            if not decl.target.targets:
                self.error("dangling_edge", f"edge from {source!r} fans out to no nodes", source)
                ok = False
        elif decl.target is not None:
            ok = self.check_target(source, decl.target, decls, "edge") and ok
        path_map: dict[Hashable, str | EndType] | None = None
        route: RouteContext | None = None
        if decl.kind == "llm":
            label = label or "llm_decide"
            path_map = self.path_map(source, decl.path_map or (), decls)
            if path_map is None:
                return None
            if not path_map:
                self.error("dangling_edge", f"llm_decide edge on {source!r} has no targets", source)
                return None
            route = RouteContext(
                source=source,
                goal=self.blueprint.settings.goal,
                candidates={
                    target: _describe_target(target, decls) for target in path_map.values()
                },
            )
        if decl.kind == "router":
            label = label or callable_name(decl.router)
            if decl.path_map is not None:
                path_map = self.path_map(source, decl.path_map, decls)
                ok = ok and path_map is not None
        if not ok:
            return None
        return Edge(
            source=source,
            kind=decl.kind,
            trigger=decl.trigger,
            target=decl.target,
            condition=condition,
            router=decl.router,
            path_map=path_map,
            decider=decl.router if decl.kind == "llm" else None,  # a Decider by construction
            route=route,
            label=label,
            order=decl.order,
            fanout=decl.fanout,
        )

    def check_target(
        self, source: str, target: Any, decls: Mapping[str, NodeDecl], what: str
    ) -> bool:
        if target is END or (isinstance(target, str) and target in decls):
            return True
        hint = " (to stop the run, use selectgraph.END)" if target in ("END", "__end__") else ""
        self.error(
            "dangling_edge",
            f"{what} {source!r} -> {_target_name(target)}: no node named {_target_name(target)}"
            f"{hint}",
            source,
        )
        return False

    def path_map(
        self,
        source: str,
        raw: Mapping[Hashable, Any] | Iterable[Any],
        decls: Mapping[str, NodeDecl],
    ) -> dict[Hashable, str | EndType] | None:
        pairs = raw.items() if isinstance(raw, Mapping) else ((target, target) for target in raw)
        mapping: dict[Hashable, str | EndType] = {}
        ok = True
        for key, target in pairs:
            if not isinstance(target, str | EndType):
                self.error(
                    "dangling_edge",
                    f"path_map of {source!r} maps {key!r} to {target!r}, which is not a node name",
                    source,
                )
                ok = False
                continue
            ok = self.check_target(source, target, decls, "path_map of") and ok
            mapping[key] = target
        return mapping if ok else None

    def check_condition_names(self, condition: Condition, source: str, schema: StateSchema) -> None:
        if schema.fields is None or schema.allow_extra:
            return
        unknown = sorted(n for n in condition.names if n not in schema.fields and n not in ALIASES)
        if unknown:
            self.error(
                "unknown_state_key",
                f"condition {condition.source!r} on {source!r} names "
                f"{', '.join(map(repr, unknown))}, not a field of {schema.source} "
                f"(fields: {', '.join(sorted(schema.fields))})",
                source,
            )

    def routes(self, decls: Mapping[str, NodeDecl], edges: list[Edge]) -> dict[str, NodeRoutes]:
        by_source: dict[str, list[Edge]] = {name: [] for name in decls}
        for edge in edges:
            by_source[edge.source].append(edge)
        routes: dict[str, NodeRoutes] = {}
        for name, node_edges in by_source.items():
            success = self.ordered(name, [e for e in node_edges if e.trigger != "failure"], "")
            failure = self.ordered(
                name, [e for e in node_edges if e.trigger != "success"], " on failure"
            )
            if (
                not success
                and decls[name].destinations is None
                and name not in self.broken_sources
                and name not in self.group_members
            ):
                self.error(
                    "dead_end_node",
                    f"node {name!r} has no outgoing edge for success; add_edge({name!r}, END) "
                    "to stop there, or declare destinations=[...] if it always routes with goto()",
                    name,
                )
            if success and all(e.kind == "condition" for e in success):
                self.warn(
                    "no_fallback_edge",
                    f"node {name!r} only has conditional edges; when none matches the run fails "
                    f"with RoutingError. Add an unconditional fallback edge",
                    name,
                )
            static = success[0] if len(success) == 1 and success[0].kind == "static" else None
            router = (
                success[0]
                if len(success) == 1 and success[0].kind == "router" and not success[0].is_async
                else None
            )
            simple = None
            if (
                len(success) > 1
                and all(isinstance(e.condition, Condition) for e in success[:-1])
                and success[-1].kind == "static"
            ):
                simple = tuple(
                    (
                        e.condition.evaluator if isinstance(e.condition, Condition) else _always,
                        e,
                    )
                    for e in success
                )
            routes[name] = NodeRoutes(
                success=tuple(success),
                failure=tuple(failure),
                static_success=static,
                is_async=any(e.is_async for e in node_edges),
                simple=simple,
                router=router,
                router_view=f"router on {name!r}",
            )
        return routes

    def ordered(self, node: str, edges: list[Edge], when: str) -> list[Edge]:
        """Conditions in declaration order, then the one catch-all (static edge or router)."""
        conditions = [e for e in edges if e.kind == "condition"]
        catch_all = [e for e in edges if e.kind != "condition"]
        if len(catch_all) > 1:
            described = ", ".join(e.describe() for e in catch_all)
            self.error(
                "multiple_outgoing_edges",
                f"node {node!r} has {len(catch_all)} unconditional edges{when} ({described}); "
                "make all but one conditional, or use a router to choose",
                node,
            )
        return conditions + catch_all[:1]

    # --------------------------------------------------------- reachability
    def check_reachability(
        self, entry: str, decls: Mapping[str, NodeDecl], edges: list[Edge]
    ) -> None:
        successors: dict[str, set[str | EndType]] = {name: set() for name in decls}
        for edge in edges:
            successors[edge.source].update(edge_targets(edge, decls))
        for name, decl in decls.items():
            successors[name].update(decl.destinations or ())
            if decl.group is not None:
                successors[name].update(m for m in decl.group.members if m in decls)
        seen = reachable(entry, successors)
        if self.blueprint.settings.fast_route_fn is not None:
            # fast_route_fn may start a run at any node that is not a group member.
            for name in decls:
                if name not in self.group_members:
                    seen |= reachable(name, successors)
        for name in decls:
            if name not in seen:
                self.error(
                    "unreachable_node",
                    f"node {name!r} cannot be reached from entry {entry!r}; connect it with "
                    "an edge, or declare destinations=[...] on the node that goto()s there",
                    name,
                )
        for name in decls:
            if name in self.group_members and not successors[name]:
                continue  # a member ends where its group does
            if name in seen and END not in reachable(name, successors):
                self.warn(
                    "no_path_to_end",
                    f"node {name!r} has no path to END; runs through it only stop at max_steps",
                    name,
                )


def _describe_target(target: str | EndType, decls: Mapping[str, NodeDecl]) -> str:
    if target is END:
        return "finish: the task is complete"
    return decls[target].description if target in decls else ""


def _always(data: Mapping[str, Any]) -> bool:
    return True


def compile_graph(blueprint: Blueprint) -> CompiledGraph:
    """Validate the graph ``blueprint`` declares and build its CompiledGraph.

    Raises:
        GraphBuildError: listing every error-severity problem found.
    """
    return _Compiler(blueprint).compile()


def validate_graph(blueprint: Blueprint) -> list[Diagnostic]:
    """Every problem in the graph ``blueprint`` declares (errors and warnings), without raising."""
    compiler = _Compiler(blueprint)
    with contextlib.suppress(GraphBuildError):  # the diagnostics are what we want
        compiler.compile()
    return compiler.diagnostics


def _with_node_types(
    serializer: StateSerializer, specs: Iterable[NodeSpec | None]
) -> StateSerializer:
    """``serializer``, also allowing the types nodes write: agents' output schemas, subgraphs'.

    The classes come from the graph's own definition, never from stored data, so
    allowing them keeps checkpoints unable to name code. A class that cannot be
    named in a stored state (defined in a function, or sharing another's name) is
    left out: a checkpoint holding one then fails to load with TypeNotAllowedError.
    """
    extra: list[type] = []
    for spec in specs:
        if spec is None:
            continue
        adapter: Any = spec.adapter
        while adapter is not None:
            extra.extend(getattr(adapter, "state_types", ()))
            child = getattr(adapter, "child", None)  # a graph as a node: its types too
            if child is not None:
                extra.extend(child.serializer.allowed_types)
            adapter = getattr(adapter, "inner", None)
    if not extra:
        return serializer
    allowed = serializer.allowing()
    for cls in dict.fromkeys(named_class(cls) for cls in extra):
        try:
            allowed.register_type(cls)
        except TypeError:
            continue
    return allowed
