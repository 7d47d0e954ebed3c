"""A graph and a run over it as JSON data: nodes, edges, which fired (seed 001's DAG export).

Before a run it is the graph's shape; given a run's result, every edge says
whether and how often the run took it, every node how often it ran, and the
run says where and why it stopped. The same edges the Mermaid diagram draws,
so a tool reading this and a person reading the picture see one graph.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from selectgraph.compile._diagram import DrawnGraph
from selectgraph.compile._mermaid import _links
from selectgraph.core._sentinels import END, EndType

if TYPE_CHECKING:
    from selectgraph.core._result import GraphResult

__all__ = ["export_dag"]


def _name(target: str | EndType) -> str:
    return "END" if target is END else str(target)


def export_dag(graph: DrawnGraph, result: GraphResult | None = None) -> dict[str, Any]:
    """``graph`` as JSON data; with ``result``, what the run did on it (see the module)."""
    taken: Counter[tuple[str, str, str, str]] = Counter()
    ran: Counter[str] = Counter()
    if result is not None:
        from selectgraph.observe._events import EdgeFired, NodeStarted

        for event in result.trace:
            if isinstance(event, EdgeFired) and not event.namespace:
                taken[(event.source, _name(event.target), event.kind, event.label)] += 1
            elif isinstance(event, NodeStarted) and not event.namespace:
                ran[event.node] += 1
    nodes = []
    for name, spec in graph.nodes.items():
        node: dict[str, Any] = {"name": name, "kind": spec.adapter.kind}
        if spec.description:
            node["description"] = spec.description
        if spec.group is not None:
            node["members"] = list(spec.group.members)
        if result is not None:
            node["runs"] = ran[name]
        nodes.append(node)
    edges = []
    for edge in graph.edges:
        for target, label, _ in _links(graph, edge):
            entry: dict[str, Any] = {
                "source": edge.source,
                "target": _name(target),
                "kind": edge.kind,
                "on": edge.trigger,
            }
            if label:
                entry["label"] = label
            if result is not None:
                times = taken[(edge.source, _name(target), edge.kind, edge.label)]
                entry.update(fired=times > 0, times=times)
            edges.append(entry)
    for name, spec in graph.nodes.items():
        for target in spec.destinations or ():
            entry = {"source": name, "target": _name(target), "kind": "goto", "on": "success"}
            if result is not None:
                times = taken[(name, _name(target), "goto", "")]
                entry.update(fired=times > 0, times=times)
            edges.append(entry)
    dag: dict[str, Any] = {
        "graph": graph.name,
        "entry": graph.entry,
        "nodes": nodes,
        "edges": edges,
    }
    if result is not None:
        path = [name for name, *_ in result.state.history[result.history_start :]]
        dag["run"] = {
            "run_id": result.run_id,
            "stop_reason": result.stop_reason,
            "quality": result.quality,
            "steps": result.steps,
            "path": path,
            "last_node": path[-1] if path else None,
            "interrupted": result.interrupted,
        }
    return dag
