"""Retries of graphs inside nodes: a subgraph, a graph as a node, a fan-out instance, a member.

A node failing inside the child is the outer node's failure, retried by the outer
node's policy with its attempts recorded; an engine error inside the child (a
routing error) fails the same way every time and is not retried.
"""

from __future__ import annotations

from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    ErrorPolicy,
    NodeError,
    RetryPolicy,
    Scatter,
)
from selectgraph.observe import NodeRetried

RETRY = RetryPolicy(max_retries=3, initial_delay=0)


class Flaky:
    """A node that fails its first ``failures`` calls with ``error``."""

    def __init__(self, failures: int, error: type[Exception] = RuntimeError) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self, state: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"attempt {self.calls} failed")
        return {"ok": True}


def _child(node: Flaky) -> AgentGraph:
    child = AgentGraph("child")
    child.add_node("work", node, next_node=END)
    return child


@pytest.mark.parametrize("how", ["add_subgraph", "add_node"])
def test_a_failing_subgraph_is_retried_by_its_node_s_policy(how: str) -> None:
    flaky = Flaky(2)
    parent = AgentGraph("parent")
    getattr(parent, how)("sub", _child(flaky), next_node=END, error_policy=ErrorPolicy.RETRY)
    parent.add_node("start", lambda state: {}, next_node="sub")
    parent.set_entry("start")

    result = parent.run({}, observers=[])

    assert result.state.data["ok"] is True
    assert flaky.calls == 3
    assert result.node_results["sub"][0].attempts == 3
    retried = [e for e in result.trace if isinstance(e, NodeRetried)]
    assert [(e.node, e.attempt) for e in retried] == [("sub", 1), ("sub", 2)]
    assert result.quality == "clean"


def test_the_graph_s_retry_policy_applies_to_a_subgraph_node_too() -> None:
    flaky = Flaky(1)
    parent = AgentGraph("parent", error_policy=ErrorPolicy.RETRY, retry=RETRY)
    parent.add_subgraph("sub", _child(flaky), next_node=END)

    assert parent.run({}).node_results["sub"][0].attempts == 2


def test_a_fan_out_instance_that_is_a_subgraph_is_retried() -> None:
    flaky = Flaky(1)
    parent = AgentGraph("parent")
    parent.add_node("plan", lambda state: {})
    parent.add_subgraph("sub", _child(flaky), error_policy=ErrorPolicy.RETRY, retry=RETRY)
    parent.add_node("done", lambda state: {}, next_node=END)
    parent.add_conditional_edge("plan", lambda state: [Scatter("sub", {}), Scatter("sub", {})])
    parent.add_edge("sub", "done")

    result = parent.run({})

    assert flaky.calls == 3  # one instance failed once, both succeeded
    assert result.state.data["ok"] is True
    assert sorted(r.attempts for r in result.node_results["sub"]) == [1, 2]


def test_a_parallel_member_that_is_a_subgraph_is_retried() -> None:
    flaky = Flaky(2)
    parent = AgentGraph("parent")
    parent.add_node("a", lambda state: {"a": 1})
    parent.add_node("sub", _child(flaky), error_policy=ErrorPolicy.RETRY, retry=RETRY)
    parent.add_parallel_nodes("both", ["a", "sub"])
    parent.add_edge("both", END)

    result = parent.run({})

    assert (result.state.data["a"], result.state.data["ok"]) == (1, True)
    assert flaky.calls == 3


def test_a_failure_the_policy_does_not_retry_fails_at_once() -> None:
    flaky = Flaky(1, error=KeyError)
    parent = AgentGraph("parent")
    policy = RetryPolicy(max_retries=3, initial_delay=0, retry_on=(TimeoutError,))
    parent.add_subgraph(
        "sub", _child(flaky), next_node=END, error_policy=ErrorPolicy.RETRY, retry=policy
    )

    with pytest.raises(NodeError, match="attempt 1 failed"):
        parent.run({})
    assert flaky.calls == 1


def test_an_engine_error_inside_the_subgraph_is_not_retried() -> None:
    visits: list[int] = []

    def route(state: Any) -> dict[str, Any]:
        visits.append(1)
        return {}

    child = AgentGraph("child")
    child.add_node("route", route)
    child.add_conditional_edge("route", lambda state: "nowhere")  # a RoutingError
    parent = AgentGraph("parent")
    parent.add_subgraph("sub", child, next_node=END, error_policy=ErrorPolicy.RETRY, retry=RETRY)

    with pytest.raises(NodeError):
        parent.run({})
    assert len(visits) == 1
