"""A run publishes its control while it runs and takes it back after, nested or not."""

from __future__ import annotations

from typing import Any

from selectgraph import END, AgentGraph, GraphState
from selectgraph.core._control import Budget, RunControl, current_control, enter, leave
from selectgraph.core._usage import Usage


def _control() -> RunControl:
    return RunControl(Budget(), None, Usage())


def test_leave_restores_no_control_and_an_outer_one() -> None:
    assert current_control() is None
    outer, inner = _control(), _control()
    before_outer = enter(outer)
    assert before_outer is not None  # a walk tells "entered" from "did not enter" by None
    before_inner = enter(inner)
    assert current_control() is inner
    leave(before_inner)
    assert current_control() is outer
    leave(before_outer)
    assert current_control() is None


async def test_a_run_sees_its_control_and_leaves_none_behind_in_the_caller() -> None:
    seen: list[Any] = []

    async def node(state: GraphState) -> dict[str, Any]:  # run in the caller's task
        seen.append(current_control())
        return {"x": 1}

    graph = AgentGraph("published")  # no token: no task of its own, the caller's context
    graph.add_node("a", node)
    graph.add_edge("a", END)
    graph.set_entry("a")
    compiled = graph.compile()
    await compiled.arun({})
    assert current_control() is None
    await compiled.arun({})  # the same task again: the first run left nothing behind
    assert current_control() is None
    assert len(seen) == 2
    assert None not in seen
    assert seen[0] is not seen[1]  # each run its own control
