"""Event times: one clock per run (timestamps follow the trace's order), JSON to the microsecond."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from selectgraph import END, AgentGraph, NodeContext
from selectgraph.observe import GraphEvent, NodeFinished
from selectgraph.observe._codec import event_to_json, log_entry
from selectgraph.observe._log_json import log_entries
from selectgraph.observe._recorder import _code


def _graph() -> AgentGraph:
    inner = AgentGraph("inner")
    inner.add_node("deep", lambda s: {"x": s["x"] + 1})
    inner.add_edge("deep", END)
    inner.set_entry("deep")

    def shout(state: Any, context: NodeContext) -> dict[str, Any]:
        context.emit_custom({"x": state["x"]})  # a node's own event, built outside the recorder
        return {"x": state["x"] + 1}

    graph = AgentGraph("clocked", max_steps=None)
    graph.add_node("shout", shout)
    graph.add_node("sub", inner)
    graph.add_edge("shout", "sub")
    graph.add_edge("sub", "shout", condition="x < 9")
    graph.add_edge("sub", END)
    graph.set_entry("shout")
    return graph


@pytest.fixture
def wall_clock_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """time.time() a millisecond ahead of the perf_counter() anchor, as after an NTP step.

    Events timed by time.time() beside events timed by perf_counter() then land a
    millisecond apart in the wrong order, whatever the machine's speed.
    """
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 0.001)


@pytest.mark.usefixtures("wall_clock_ahead")
@pytest.mark.parametrize("observed", [False, True])
def test_timestamps_follow_the_order_events_were_recorded_in(observed: bool) -> None:
    seen: list[GraphEvent] = []
    result = _graph().run({"x": 0}, observers=[seen.append] if observed else [])

    events = seen if observed else list(result.trace)
    kinds = {type(event).__name__ for event in events}
    assert {"RunStarted", "NodeStarted", "EdgeFired", "CustomEvent", "RunFinished"} <= kinds
    assert any(event.namespace for event in events), "the subgraph's events are there"
    stamps = [event.timestamp for event in events]
    out_of_order = [(a, b) for a, b in itertools.pairwise(events) if b.timestamp < a.timestamp]
    assert not out_of_order, out_of_order[:2]
    assert stamps[0] <= stamps[-1]


def test_timestamps_are_wall_clock_time() -> None:
    before = time.time()
    result = _graph().run({"x": 0})
    after = time.time()
    # The anchor is re-read at most once a second: allow that much drift and no more.
    assert all(before - 1.0 <= event.timestamp <= after + 1.0 for event in result.trace)


def _finished(timestamp: float, duration: float) -> NodeFinished:
    return NodeFinished(
        run_id="r", graph="g", step=1, timestamp=timestamp, node="n", visit=1,
        duration_ms=duration, outcome="success", attempts=1,
    )  # fmt: skip


def test_json_keeps_times_to_the_microsecond() -> None:
    event = _finished(1795925056.2984717, 0.0725869999769202)

    entry = event_to_json(event)

    assert entry["timestamp"] == 1795925056.298472
    assert entry["duration_ms"] == 0.073
    assert (event.timestamp, event.duration_ms) == (1795925056.2984717, 0.0725869999769202)


def test_the_stored_log_rounds_as_event_to_json_does() -> None:
    raw = (_code(NodeFinished), ("r", "g", (), None), 1, 1795925056.2984717, "n", 1,
           0.0725869999769202, "success", 1)  # fmt: skip
    assert log_entries([raw]) == [log_entry(_finished(1795925056.2984717, 0.0725869999769202))]
    assert log_entries([raw])[0]["duration_ms"] == 0.073


@pytest.mark.parametrize("odd", [float("nan"), float("inf")])
def test_a_time_json_cannot_hold_is_written_as_before(odd: float) -> None:
    entry = event_to_json(_finished(odd, odd))
    assert entry["timestamp"] == repr(odd)
    assert entry["duration_ms"] == repr(odd)
