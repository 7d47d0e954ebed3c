"""Mermaid: draw a compiled graph as a Mermaid flowchart, with the edges a run took."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from selectgraph._sentinels import END, EndType

if TYPE_CHECKING:
    from selectgraph.graph._compiled import CompiledGraph
    from selectgraph.graph._edges import Edge
    from selectgraph.graph._result import GraphResult

__all__ = ["render_mermaid"]

_END_ID = "__end__"


def _node_id(name: str | EndType) -> str:
    if name is END:
        return _END_ID
    safe = re.sub(r"[^A-Za-z0-9_]", "_", str(name))
    return f"n_{safe}"


def _escape(text: str) -> str:
    return text.replace('"', "#quot;")


def _links(graph: CompiledGraph, edge: Edge) -> list[tuple[str | EndType, str, str]]:
    """``(target, label, arrow)`` for each arrow ``edge`` draws."""
    if edge.kind in ("router", "llm"):
        targets = (
            sorted(set(edge.path_map.values()), key=str)
            if edge.path_map is not None
            else graph.targets_of(edge.source)
        )
        links = [(target, edge.label, "-.->") for target in targets]
        if edge.kind == "llm" and edge.target is not None:
            links.append((edge.target, "llm fallback", "-.->"))
        return links
    if edge.target is None:
        return []
    return [(edge.target, edge.label if edge.kind != "static" else "", "-->")]


def render_mermaid(graph: CompiledGraph, result: GraphResult | None = None) -> str:
    """A ``flowchart TD`` of ``graph``; with ``result``, fired edges are drawn thick and red."""
    lines = ["flowchart TD"]
    lines.append(f'    {_node_id(graph.entry)}_start(["start"]) --> {_node_id(graph.entry)}')
    for name, spec in graph.nodes.items():
        kind = spec.adapter.kind
        label = name if kind == "function" else f"{name} ({kind})"
        lines.append(f'    {_node_id(name)}["{_escape(label)}"]')
    lines.append(f'    {_END_ID}(["END"])')

    fired = set(result.fired_edges) if result is not None else set()
    link_index = 1  # link 0 is the start arrow
    highlighted: list[int] = []
    for edge in graph.edges:
        for target, label, arrow in _links(graph, edge):
            if edge.trigger != "success":
                label = f"on {edge.trigger}" + (f": {label}" if label else "")
            text = f'|"{_escape(label)}"|' if label else ""
            lines.append(f"    {_node_id(edge.source)} {arrow}{text} {_node_id(target)}")
            if (edge.source, target) in fired:
                highlighted.append(link_index)
            link_index += 1
    for name, spec in graph.nodes.items():
        for target in spec.destinations or ():
            lines.append(f'    {_node_id(name)} -.->|"goto"| {_node_id(target)}')
            if (name, target) in fired:
                highlighted.append(link_index)
            link_index += 1
    for index in highlighted:
        lines.append(f"    linkStyle {index} stroke:#d33,stroke-width:3px")
    if result is not None:
        visited = sorted(set(result.node_order))
        if visited:
            lines.append("    classDef visited fill:#fde8e8,stroke:#d33")
            lines.append(f"    class {','.join(_node_id(n) for n in visited)} visited")
    return "\n".join(lines)
