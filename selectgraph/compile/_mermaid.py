"""Mermaid: draw a compiled graph as a Mermaid flowchart, with the edges a run took."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from selectgraph.compile._diagram import DrawnGraph
from selectgraph.compile._fired import FiredEdges
from selectgraph.core._sentinels import END, EndType
from selectgraph.routing._reach import edge_targets

if TYPE_CHECKING:
    from selectgraph.core._result import GraphResult
    from selectgraph.routing._edges import Edge

__all__ = ["MermaidLayout", "mermaid_layout", "render_mermaid"]

_START_ID = "__start__"
_END_ID = "__end__"


_MARKUP = re.compile(r'"|`|<(?=[A-Za-z!/?])|#(?=\w+;)')
"""What in a label Mermaid would read as more than text: the quote that ends it, a
backtick (a Markdown label), ``<`` where HTML starts a tag or comment, and ``#`` where
it starts one of Mermaid's entity codes (``#quot;``). Everything else is left as is,
so ``retries < 3`` and ordinary names read the same in the Mermaid text."""
_CODES = {'"': "#quot;", "`": "#96;", "<": "#lt;", "#": "#35;"}


def _escape(text: str) -> str:
    """``text`` as a label Mermaid shows as text: a node name is never markup."""
    return _MARKUP.sub(lambda found: _CODES[found.group()], text)


def _links(graph: DrawnGraph, edge: Edge) -> list[tuple[str | EndType, str, str]]:
    """``(target, label, arrow)`` for each arrow ``edge`` draws."""
    if edge.kind in ("router", "llm"):
        links: list[tuple[str | EndType, str, str]]
        if edge.path_map is not None:
            # Each arrow says which of the router's answers lead there (seed 004's
            # ``-->|"pass"|``); a list path_map (answer == target) keeps the router's name.
            answers: dict[str | EndType, list[str]] = {}
            for answer, target in edge.path_map.items():
                answers.setdefault(target, []).append(str(answer))
            links = [
                (target, edge.label if said == [str(target)] else ", ".join(said), "-.->")
                for target, said in sorted(answers.items(), key=lambda item: str(item[0]))
            ]
        else:
            # This router's own reach: another edge's targets (an on-failure edge, a
            # goto) are drawn by that edge, not labelled with this router's name.
            reach = sorted(edge_targets(edge, graph.nodes), key=str)
            links = [(target, edge.label, "-.->") for target in reach]
        if edge.kind == "llm":
            links.extend((target, "llm fallback", "-.->") for target in edge.targets())
        return links
    many = len(edge.targets()) > 1
    return [
        (target, edge.label or ("parallel" if many else ""), "-->") for target in edge.targets()
    ]


def _arrows(
    graph: DrawnGraph, fired: FiredEdges
) -> dict[tuple[str, str | EndType, str], tuple[list[str], bool]]:
    """One arrow per source, target and style, with every label that leads there.

    A node whose success router and failure router reach the same nodes (a
    supervisor's member) gets one arrow to each, labelled with both, not two.
    """
    arrows: dict[tuple[str, str | EndType, str], tuple[list[str], bool]] = {}
    for number, edge in enumerate(graph.edges):
        for target, label, arrow in _links(graph, edge):
            if edge.trigger != "success":
                label = f"on {edge.trigger}" + (f": {label}" if label else "")
            # Routers' arrows (dashed) merge; each static edge keeps its own, so the one
            # a run took is the one highlighted.
            style = arrow if arrow == "-.->" else f"{arrow}#{number}"
            labels, took = arrows.setdefault((str(edge.source), target, style), ([], False))
            if label and label not in labels:
                labels.append(label)
            if not took and fired.took(edge, target):
                arrows[(str(edge.source), target, style)] = (labels, True)
    return arrows


@dataclass(frozen=True, slots=True)
class MermaidLayout:
    """A graph's Mermaid flowchart and how its parts are named in it (for a live viewer)."""

    text: str
    """The flowchart."""
    ids: dict[str, str]
    """Node name -> Mermaid node id (``n0``, ``n1``...; ``__start__`` and ``__end__``)."""
    links: list[tuple[str, str, int, str]]
    """``(source, target, index, kind)`` of every arrow, ``index`` as Mermaid numbers
    links (``linkStyle``), ``kind`` one of ``start``, ``edge``, ``parallel``, ``goto``;
    sources and targets are node names, ``"__start__"`` or ``"__end__"``."""


def mermaid_layout(graph: DrawnGraph, result: GraphResult | None = None) -> MermaidLayout:
    """A ``flowchart TD`` of ``graph``; with ``result``, fired edges are drawn thick and red.

    Node ids are positional (``n0``, ``n1``, ...), so any node name, spaces and
    punctuation included, gets a valid and unique id; names appear as labels.
    """
    ids: dict[str | EndType, str] = {name: f"n{i}" for i, name in enumerate(graph.nodes)}
    ids[END] = _END_ID
    lines = ["flowchart TD", f'    {_START_ID}(["start"]) --> {ids[graph.entry]}']
    links: list[tuple[str, str, int, str]] = [(_START_ID, graph.entry, 0, "start")]
    for name, spec in graph.nodes.items():
        kind = spec.adapter.kind
        label = name if kind == "function" else f"{name} ({kind})"
        lines.append(f'    {ids[name]}["{_escape(label)}"]')
    lines.append(f'    {_END_ID}(["END"])')

    def link(source: str, target: str | EndType, kind: str) -> int:
        index = len(links)
        links.append((source, _END_ID if target is END else str(target), index, kind))
        return index

    fired = FiredEdges(result)
    highlighted: list[int] = []
    for (source, target, arrow), (labels, took) in _arrows(graph, fired).items():
        label = " / ".join(labels)
        text = f'|"{_escape(label)}"|' if label else ""
        lines.append(f"    {ids[source]} {arrow.split('#')[0]}{text} {ids[target]}")
        index = link(source, target, "edge")
        if took:
            highlighted.append(index)
    for name, spec in graph.nodes.items():
        for member in spec.group.members if spec.group is not None else ():
            lines.append(f'    {ids[name]} ==>|"parallel"| {ids[member]}')
            index = link(name, member, "parallel")
            if fired.ran(member, name):
                highlighted.append(index)
        for target in spec.destinations or ():
            lines.append(f'    {ids[name]} -.->|"goto"| {ids[target]}')
            index = link(name, target, "goto")
            if fired.took_goto(name, target):
                highlighted.append(index)
    for index in highlighted:
        lines.append(f"    linkStyle {index} stroke:#d33,stroke-width:3px")
    if result is not None:
        visited = sorted(set(result.node_order), key=list(graph.nodes).index)
        if visited:
            lines.append("    classDef visited fill:#fde8e8,stroke:#d33")
            lines.append(f"    class {','.join(ids[n] for n in visited)} visited")
    names = {str(name): node_id for name, node_id in ids.items() if name is not END}
    names[_START_ID] = _START_ID
    names[_END_ID] = _END_ID
    return MermaidLayout("\n".join(lines), names, links)


def render_mermaid(graph: DrawnGraph, result: GraphResult | None = None) -> str:
    """A ``flowchart TD`` of ``graph``; with ``result``, fired edges are drawn thick and red.

    Node ids are positional (``n0``, ``n1``, ...), so any node name, spaces and
    punctuation included, gets a valid and unique id; names appear as labels.
    """
    return mermaid_layout(graph, result).text
