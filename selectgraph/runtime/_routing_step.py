"""Routing a step: after a node, follow its goto(), its edges or its router to the next target."""

from __future__ import annotations

from typing import Any

from selectgraph.core._run_errors import RoutingError
from selectgraph.core._sentinels import END, EndType
from selectgraph.nodes._spec import NodeSpec
from selectgraph.observe._events import EdgeFired
from selectgraph.routing._edges import Edge, Resolved, aresolve_next, resolve_next
from selectgraph.routing._parallel import Branches
from selectgraph.runtime._run_state import RunState
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import ViewWrites

__all__ = ["Routing"]


class Routing(RunState):
    """Where the run goes after a node, and the EdgeFired events that say so."""

    # ---------------------------------------------------------------- routing
    def _follow(self, source: str, resolved: Resolved) -> str | EndType | Branches:
        target, edge, directive, decision = resolved
        self._release()
        if directive is not None and (directive.values or directive.assignments):
            # A router's own view writes are whole values (as a node's are): not reduced.
            assigned = directive.assignments
            writes = ViewWrites(assignments=dict(assigned)) if assigned else None
            self._merge_directive(source, NodeOutput(directive.values, writes))
        reason = ""
        if decision is not None:
            reason = decision.reasoning
            if decision.usage is not None:
                self.usage = self.usage + decision.usage
        kind, label = (edge.kind, edge.label) if edge is not None else ("static", "")
        if type(target) is Branches:
            self._fired(source, target, kind, label, reason)
        else:
            self.recorder.record(EdgeFired, self.steps, source, target, kind, label, reason)
        return target

    def _took(self, source: str, edge: Edge, step: int) -> Any:
        """Follow a static or simple edge the step loop resolved at ``step``; returns its target."""
        held = self._held  # RunState._release, inline: this runs at every step
        if held is not None:
            self._held = None
            self.recorder.finish_node(*held)
        target = edge.target
        if type(target) is Branches:
            self._fired(source, target, edge.kind, edge.label)
        else:
            self.recorder.record_edge(step, source, target, edge.kind, edge.label)
        return target

    def _fired(
        self, source: str, branches: Branches, kind: str, label: str, reason: str = ""
    ) -> None:
        """One EdgeFired per node a fan-out starts branches at."""
        for node in branches.nodes():
            self.recorder.record(EdgeFired, self.steps, source, node, kind, label, reason)

    def _merge_directive(self, source: str, output: NodeOutput) -> None:
        self._merger.merge(self.state, output, source, self.steps)
        if self.written_keys is not None:
            self.written_keys.update(output.update)

    def _check_goto(self, spec: NodeSpec, goto: str | EndType) -> str | EndType:
        if goto is not END and goto not in self.graph.nodes:
            raise RoutingError(
                f"node {spec.name!r} returned goto({goto!r}), which is not a node of this graph; "
                f"nodes: {', '.join(sorted(self.graph.nodes))}",
                node=spec.name,
            )
        if spec.destinations is not None and goto not in spec.destinations:
            allowed = ", ".join(repr(d) for d in spec.destinations)
            raise RoutingError(
                f"node {spec.name!r} returned goto({goto!r}) but declares destinations=[{allowed}]",
                node=spec.name,
            )
        return goto

    async def route_after(self, node: str, ok: bool, goto: Any) -> Any:
        """Where the run goes after ``node`` (its output already merged): for a resume."""
        spec = self.graph.nodes[node]
        if goto is not None:
            target = self._check_goto(spec, goto)
            self.recorder.record(EdgeFired, self.steps, node, target, "goto", "")
            return target
        routes = self.graph.routes[node]
        if routes.is_async:
            resolved = await aresolve_next(
                node, routes, ok, self.state, self.graph.nodes, self._decide
            )
        else:
            resolved = resolve_next(node, routes, ok, self.state, self.graph.nodes)
        return self._follow(node, resolved)
