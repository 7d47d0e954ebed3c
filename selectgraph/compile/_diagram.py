"""Diagrams: what the ASCII and Mermaid pictures read of a compiled graph."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from selectgraph.core._sentinels import EndType
from selectgraph.nodes._spec import NodeSpec
from selectgraph.routing._edges import Edge
from selectgraph.routing._reach import possible_targets

__all__ = ["DrawnGraph", "targets_of"]


class DrawnGraph(Protocol):
    """A compiled graph as a diagram draws it: its nodes and its edges."""

    @property
    def name(self) -> str:
        """The graph's name, in the diagram's title."""
        ...

    @property
    def entry(self) -> str:
        """The node every run starts at."""
        ...

    @property
    def nodes(self) -> Mapping[str, NodeSpec]:
        """Every node, by name, in declaration order."""
        ...

    @property
    def edges(self) -> Sequence[Edge]:
        """Every edge, in declaration order."""
        ...


def targets_of(graph: DrawnGraph, node: str) -> list[str | EndType]:
    """Every place ``node`` can route to, as far as compile can tell."""
    return possible_targets(graph.edges, graph.nodes, node)
