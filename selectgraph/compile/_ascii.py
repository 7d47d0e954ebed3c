"""ASCII: describe a compiled graph as plain text for a terminal, with the edges a run took."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selectgraph.compile._diagram import DrawnGraph, targets_of
from selectgraph.compile._fired import FiredEdges
from selectgraph.core._sentinels import END, EndType

if TYPE_CHECKING:
    from selectgraph.core._result import GraphResult

__all__ = ["render_ascii"]


def _name(target: str | EndType | None) -> str:
    # The stop target is drawn distinctly, so a node that happens to be named "END" is not.
    return "(END)" if target is END else str(target)


def render_ascii(graph: DrawnGraph, result: GraphResult | None = None) -> str:
    """Nodes, then every edge with its condition; with ``result``, fired edges are starred."""
    rule = "=" * max(40, len(graph.name) + 7)
    lines = [f"Graph: {graph.name}", rule, f"Entry: {graph.entry}", "", "Nodes:"]
    for name, spec in graph.nodes.items():
        marker = "->" if name == graph.entry else "  "
        kind = spec.adapter.kind
        extra = f"  max_visits={spec.max_visits}" if spec.max_visits else ""
        lines.append(f"{marker} [{kind}] {name}{extra}")
    fired = FiredEdges(result)
    lines += ["", "Edges:"]
    for edge in graph.edges:
        when = "" if edge.trigger == "success" else f" on {edge.trigger}"
        if edge.kind in ("router", "llm"):
            choices = list(edge.path_map.values()) if edge.path_map is not None else []
            names = sorted({_name(t) for t in choices}) or ["any"]
            if edge.kind == "llm":
                for target in edge.targets():
                    choices.append(target)
                    names.append(f"fallback {_name(target)}")
            candidates = choices or targets_of(graph, edge.source)
            star = "*" if any(fired.took(edge, t) for t in candidates) else " "
            how = f"router {edge.label}" if edge.kind == "router" else "llm_decide"
            lines.append(f"{star} {edge.source} --{how}{when}--> {' | '.join(names)}")
            continue
        label = f"[{edge.label}]" if edge.label else ""
        arrow = f"--{label}{when}-->" if (label or when) else "-->"
        targets = edge.targets()
        star = "*" if any(fired.took(edge, target) for target in targets) else " "
        shown = " & ".join(_name(target) for target in targets) or "?"
        lines.append(f"{star} {edge.source} {arrow} {shown}")
    for name, spec in graph.nodes.items():
        if spec.group is not None:
            star = "*" if any(fired.ran(m, name) for m in spec.group.members) else " "
            lines.append(f"{star} {name} ==parallel==> {' & '.join(spec.group.members)}")
    if result is not None:
        lines += ["", f"Run: {' -> '.join(result.node_order)} ({result.stop_reason})"]
        lines.append("(* = edge taken in this run)")
    return "\n".join(lines)
