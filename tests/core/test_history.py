"""state.history: (node, NodeResult) pairs, stored compactly and built on first read."""

from __future__ import annotations

from selectgraph import END, AgentGraph, NodeResult
from selectgraph.core._history import History


def _result(node: str, step: int) -> NodeResult:
    return NodeResult(node, step, 1, "success")


def test_raw_entries_become_pairs_on_first_read() -> None:
    history = History()
    history.raw.append(("a", 1, 1, "success", {"x": 1}, None, None, 1, 0.5, None, None))

    name, result = history[0]

    assert name == "a"
    assert isinstance(result, NodeResult)
    assert (result.step, result.output, result.duration_ms) == (1, {"x": 1}, 0.5)
    assert history[0][1] is result  # built once, then kept


def test_history_is_a_mutable_sequence_of_pairs() -> None:
    history = History([("a", _result("a", 1))])
    history.append(("b", _result("b", 2)))
    history.insert(0, ("z", _result("z", 0)))
    history[1] = ("a2", _result("a2", 1))

    assert [name for name, _ in history] == ["z", "a2", "b"]
    assert [name for name, _ in history[1:]] == ["a2", "b"]
    del history[0]
    assert len(history) == 2
    history.extend([("c", _result("c", 3))])
    assert [name for name, _ in history] == ["a2", "b", "c"]


def test_history_equals_lists_of_the_same_pairs() -> None:
    pairs = [("a", _result("a", 1))]

    assert History(pairs) == pairs
    assert History(pairs) == History(pairs)
    assert History(pairs) != [("b", _result("a", 1))]
    assert "History" in repr(History(pairs))


def test_results_by_node_groups_in_execution_order() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda s: {"n": s.get("n", 0) + 1})
    graph.add_edge("a", "a", condition="n < 3")
    graph.add_edge("a", "b")
    graph.add_node("b", lambda s: None, next_node=END)
    graph.set_entry("a")

    history = graph.run().state.history

    assert isinstance(history, History)
    grouped = history.results_by_node()
    assert [r.step for r in grouped["a"]] == [1, 2, 3]
    assert [r.step for r in grouped["b"]] == [4]
