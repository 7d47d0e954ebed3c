"""An unobserved run's recorder folds a node's events into one entry; nothing else changes.

A node's NodeStarted, NodeFinished and the EdgeFired of the static or simple edge
taken from it share one raw entry (a span), so each run in flight keeps fewer
objects; the trace and the stored log still read as the separate events.
"""

from __future__ import annotations

from typing import Any

from selectgraph import END, AgentGraph
from selectgraph.observe import GraphEvent
from selectgraph.observe._events import EdgeFired, NodeFinished, NodeStarted
from selectgraph.observe._recorder import EventRecorder


def _node(recorder: EventRecorder, step: int, name: str) -> None:
    recorder.record_at(1.0, NodeStarted, step, name, 1)
    recorder.finish_node(2.0, step, name, 1, 1000.0, "success", 1)


def _kinds(recorder: EventRecorder) -> list[str]:
    return [type(event).__name__ for event in recorder.trace]


def test_the_edge_joins_the_span_of_the_node_it_leaves() -> None:
    recorder = EventRecorder("run", "graph")
    _node(recorder, 1, "a")
    recorder.record_edge(1, "a", "b", "conditional", "x < 3")

    assert len(recorder.raw_since(0)) == 1
    started, finished, fired = recorder.trace
    assert isinstance(started, NodeStarted)
    assert isinstance(finished, NodeFinished)
    assert isinstance(fired, EdgeFired)
    assert (fired.step, fired.source, fired.target, fired.kind, fired.label) == (
        1,
        "a",
        "b",
        "conditional",
        "x < 3",
    )
    assert (fired.reason, fired.run_id, fired.graph) == ("", "run", "graph")


def test_an_edge_from_another_node_or_step_is_recorded_on_its_own() -> None:
    recorder = EventRecorder("run", "graph")
    _node(recorder, 1, "a")
    recorder.record_edge(1, "b", "c", "static", "")  # not from the span's node
    recorder.record_edge(1, "a", "c", "static", "")  # the span is no longer last
    _node(recorder, 2, "c")
    recorder.record_edge(3, "c", END, "static", "")  # another step

    assert len(recorder.raw_since(0)) == 5
    assert _kinds(recorder) == [
        "NodeStarted",
        "NodeFinished",
        "EdgeFired",
        "EdgeFired",
        "NodeStarted",
        "NodeFinished",
        "EdgeFired",
    ]


def test_a_run_keeping_an_event_log_does_not_fold_edges() -> None:
    # Its log's writer counts the entries it stored: a stored span must not change.
    recorder = EventRecorder("run", "graph")
    recorder.records_calls = True
    _node(recorder, 1, "a")
    recorder.record_edge(1, "a", "b", "static", "")

    assert len(recorder.raw_since(0)) == 2
    assert _kinds(recorder) == ["NodeStarted", "NodeFinished", "EdgeFired"]


def test_observed_and_nested_recorders_do_not_fold_edges() -> None:
    seen: list[GraphEvent] = []
    observed = EventRecorder("run", "graph", listeners=[seen.append])
    _node(observed, 1, "a")
    observed.record_edge(1, "a", "b", "static", "")
    nested = EventRecorder("run", "inner", ("sub",), parent=EventRecorder("run", "graph"))
    _node(nested, 1, "a")
    nested.record_edge(1, "a", "b", "static", "")

    assert [type(event).__name__ for event in seen] == ["NodeStarted", "NodeFinished", "EdgeFired"]
    for recorder in (observed, nested):
        assert len(recorder.raw_since(0)) == 3
        assert _kinds(recorder) == ["NodeStarted", "NodeFinished", "EdgeFired"]


def test_a_run_reads_the_same_events_folded_or_observed() -> None:
    graph = AgentGraph("loop", max_steps=None)
    graph.add_node("n", lambda s: {"x": s["x"] + 1})
    graph.add_edge("n", "n", condition="x < 3")
    graph.add_edge("n", END)
    graph.set_entry("n")
    compiled = graph.compile()
    seen: list[GraphEvent] = []

    folded = compiled.run({"x": 0}).trace
    observed = compiled.run({"x": 0}, observers=[seen.append]).trace

    def fields(events: Any) -> list[tuple[Any, ...]]:
        return [
            (type(e).__name__, e.step, getattr(e, "node", None), getattr(e, "target", None))
            for e in events
        ]

    assert fields(folded) == fields(observed) == fields(seen)
    assert len(folded) == 1 + 3 * 3 + 1  # RunStarted, 3 x (started, finished, edge), RunFinished
