"""Fan-out plans: which branches a step runs, how they merge, and where they join.

A fan-out comes from a parallel group, an edge to a list of targets, or a
router returning a list of node names or :class:`~selectgraph.Scatter`. Each
becomes a :class:`FanOutPlan`; the runner runs its branches and joins them.

Branches that start at ordinary nodes follow their own edges until they
reach the join point: the nearest node every branch must pass through on
its way to END (their common post-dominator). The join point then runs
once, after every branch has finished — never once per branch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from selectgraph.core._branch import BranchRef
from selectgraph.core._run_errors import RoutingError
from selectgraph.core._sentinels import END, EndType
from selectgraph.routing._parallel import DEFAULT_FANOUT, FanOutOptions, Scatter
from selectgraph.routing._reach import possible_targets
from selectgraph.runtime._branches import BranchTask

if TYPE_CHECKING:
    from selectgraph.runtime._program import GraphProgram

__all__ = ["FanOutOptions", "FanOutPlan", "join_point", "plan_fanout"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FanOutPlan:
    """The branches one step runs at once, and what happens when they are done."""

    source: str
    """The node or group that fanned out (events and errors name it)."""
    tasks: tuple[BranchTask, ...]
    """The branches, in merge order."""
    join: str | EndType | None
    """Where branches stop: the join point, END, or ``None`` for one node each (groups)."""
    options: FanOutOptions = field(default=DEFAULT_FANOUT)
    """Merge and failure rules."""

    @property
    def labels(self) -> list[str]:
        """Each branch's label, in merge order."""
        return [task.ref.label for task in self.tasks]


def plan_fanout(
    graph: GraphProgram,
    source: str,
    targets: Sequence[Any],
    options: FanOutOptions,
    parent: BranchRef | None,
    how: str,
) -> FanOutPlan:
    """A plan for a router's or an edge's list of node names and/or Scatter objects.

    Raises:
        RoutingError: a target is not a node, or the list is empty — before any branch starts.
    """
    if not targets:
        raise RoutingError(
            f"{how} on {source!r} returned an empty list; return at least one node name "
            "or Scatter, or END",
            node=source,
        )
    nodes = graph.nodes
    tasks: list[BranchTask] = []
    starts: list[str] = []
    for index, target in enumerate(targets):
        if isinstance(target, Scatter):
            node, patch, name = target.node_name, target.state_patch, None
        elif isinstance(target, str):
            node, patch, name = target, None, target
        else:
            raise RoutingError(
                f"{how} on {source!r} returned a list holding {target!r} at index {index}; "
                "a fan-out lists node names or Scatter objects",
                node=source,
            )
        if node not in nodes:
            raise RoutingError(
                f"{how} on {source!r} fans out to {node!r} (index {index}), which is not a "
                f"node of this graph; nodes: {', '.join(sorted(nodes))}",
                node=source,
            )
        if name is not None and name in starts:
            name = f"{name}#{index}"  # the same node listed twice: keep labels distinct
        tasks.append(BranchTask(BranchRef(source, index, name, parent), node, patch))
        starts.append(node)
    return FanOutPlan(
        source=source, tasks=tuple(tasks), join=join_point(graph, starts), options=options
    )


def join_point(graph: GraphProgram, starts: Iterable[str]) -> str | EndType:
    """The nearest node every branch starting at ``starts`` passes through, or END."""
    starts = tuple(dict.fromkeys(starts))
    cache = graph.join_points
    found = cache.get(starts)
    if found is None:
        pdom = _post_dominators(graph)
        common = set.intersection(*(pdom[start] for start in starts)) - set(starts)
        found = max(common, key=lambda node: (len(pdom[node]), str(node)), default=END)
        cache[starts] = found
    return found


def _post_dominators(graph: GraphProgram) -> Mapping[str | EndType, set[str | EndType]]:
    """For each node, the nodes on every path from it to END (itself and END included)."""
    cached = graph.post_dominators
    if cached is not None:
        return cached
    successors = {
        name: set(possible_targets(graph.edges, graph.nodes, name)) or {END} for name in graph.nodes
    }
    everything: set[str | EndType] = {*graph.nodes, END}
    pdom: dict[str | EndType, set[str | EndType]] = {name: set(everything) for name in graph.nodes}
    pdom[END] = {END}
    changed = True
    while changed:
        changed = False
        for name, nexts in successors.items():
            new = set.intersection(*(pdom[n] for n in nexts)) | {name}
            if new != pdom[name]:
                pdom[name] = new
                changed = True
    graph.post_dominators = pdom
    return pdom
