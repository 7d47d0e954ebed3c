"""Fired edges: which declared edges a run took, matched exactly for the diagrams."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selectgraph.core._sentinels import EndType

if TYPE_CHECKING:
    from selectgraph.core._result import GraphResult
    from selectgraph.routing._edges import Edge

__all__ = ["FiredEdges"]


class FiredEdges:
    """The edges a run took, keyed so that two edges between the same nodes stay apart."""

    def __init__(self, result: GraphResult | None) -> None:
        from selectgraph.observe._events import EdgeFired, NodeStarted

        self._taken: set[tuple[str, str | EndType, str, str]] = set()
        self._members: set[tuple[str, str]] = set()
        if result is None:
            return
        for event in result.trace:
            if isinstance(event, EdgeFired) and not event.namespace:
                self._taken.add((event.source, event.target, event.kind, event.label))
            elif isinstance(event, NodeStarted) and event.branch is not None:
                self._members.add((event.node, event.branch.source))

    def took(self, edge: Edge, target: str | EndType) -> bool:
        """Whether the run followed ``edge`` to ``target``."""
        return (edge.source, target, edge.kind, edge.label) in self._taken

    def took_goto(self, source: str, target: str | EndType) -> bool:
        """Whether ``source`` reached ``target`` through goto()."""
        return (source, target, "goto", "") in self._taken

    def ran(self, member: str, group: str) -> bool:
        """Whether ``member`` ran as a branch of the parallel group ``group``."""
        return (member, group) in self._members
