"""Reach: where a node's edges can lead, as far as the declarations tell (no run needed).

Compile uses it to find unreachable nodes and dead ends; the runtime, to find where
a fan-out's branches meet again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from selectgraph.core._sentinels import END, EndType
from selectgraph.routing._edges import Edge

__all__ = ["Destined", "edge_targets", "possible_targets", "reachable"]


class Destined(Protocol):
    """A node as far as routing is concerned: where its goto() may lead."""

    @property
    def destinations(self) -> tuple[str | EndType, ...] | None:
        """Declared goto() targets, if any."""
        ...


def edge_targets(edge: Edge, nodes: Iterable[str]) -> set[str | EndType]:
    """Where ``edge`` may lead; a router without a path_map, anywhere."""
    if edge.kind == "llm":
        assert edge.path_map is not None
        return {*edge.path_map.values(), *edge.targets()}
    if edge.kind != "router":
        return set(edge.targets())
    if edge.path_map is not None:
        return set(edge.path_map.values())
    return {*nodes, END}  # a router without path_map may go anywhere


def reachable(start: str, successors: Mapping[str, set[str | EndType]]) -> set[str | EndType]:
    """Every node (and END) reachable from ``start`` along ``successors``."""
    seen: set[str | EndType] = {start}
    stack: list[str | EndType] = [start]
    while stack:
        current = stack.pop()
        if current is END:
            continue
        for nxt in successors.get(current, ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def possible_targets(
    edges: Iterable[Edge], nodes: Mapping[str, Destined], node: str
) -> list[str | EndType]:
    """Every target ``node`` may route to, in edge order, then its goto() destinations."""
    targets: list[str | EndType] = []
    for edge in edges:
        if edge.source == node:
            for target in sorted(edge_targets(edge, nodes), key=str):
                if target not in targets:
                    targets.append(target)
    for target in nodes[node].destinations or ():
        if target not in targets:
            targets.append(target)
    return targets
