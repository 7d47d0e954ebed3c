"""ASCII: describe a compiled graph as plain text for a terminal, with the edges a run took."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selectgraph._sentinels import END, EndType

if TYPE_CHECKING:
    from selectgraph.graph._compiled import CompiledGraph
    from selectgraph.graph._result import GraphResult

__all__ = ["render_ascii"]


def _name(target: str | EndType | None) -> str:
    return "END" if target is END else str(target)


def render_ascii(graph: CompiledGraph, result: GraphResult | None = None) -> str:
    """Nodes, then every edge with its condition; with ``result``, fired edges are starred."""
    rule = "=" * max(40, len(graph.name) + 7)
    lines = [f"Graph: {graph.name}", rule, f"Entry: {graph.entry}", "", "Nodes:"]
    for name, spec in graph.nodes.items():
        marker = "->" if name == graph.entry else "  "
        kind = spec.adapter.kind
        extra = f"  max_visits={spec.max_visits}" if spec.max_visits else ""
        lines.append(f"{marker} [{kind}] {name}{extra}")
    fired = set(result.fired_edges) if result is not None else set()
    lines += ["", "Edges:"]
    for edge in graph.edges:
        when = "" if edge.trigger == "success" else f" on {edge.trigger}"
        if edge.kind in ("router", "llm"):
            targets = (
                sorted({_name(t) for t in edge.path_map.values()})
                if edge.path_map is not None
                else ["any"]
            )
            if edge.kind == "llm":
                targets.append(f"fallback {_name(edge.target)}")
            star = (
                "*"
                if any((edge.source, t) in fired for t in graph.targets_of(edge.source))
                else " "
            )
            how = "router " + edge.label if edge.kind == "router" else "llm_decide"
            lines.append(f"{star} {edge.source} --{how}{when}--> {' | '.join(targets)}")
            continue
        label = f"[{edge.label}]" if edge.kind == "condition" else ""
        arrow = f"--{label}{when}-->" if (label or when) else "-->"
        star = "*" if (edge.source, edge.target) in fired else " "
        lines.append(f"{star} {edge.source} {arrow} {_name(edge.target)}")
    if result is not None:
        lines += ["", f"Run: {' -> '.join(result.node_order)} ({result.stop_reason})"]
        lines.append("(* = edge taken in this run)")
    return "\n".join(lines)
