"""Events as JSON and back: for the studio's stream and for another process."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Generator
from typing import Any

import pytest
from pydantic import BaseModel

from selectgraph import END, AgentGraph, InterruptRequest
from selectgraph.observe import EdgeFired, GraphEvent, NodeFinished, RunPaused
from selectgraph.observe._codec import EVENT_CLASSES, event_from_json, event_to_json, json_value


class Color(enum.Enum):
    RED = "red"


class Point(BaseModel):
    x: int


@dataclasses.dataclass
class Box:
    size: int


def run_with_everything() -> list[GraphEvent]:
    def ask(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
        answer = yield InterruptRequest("ok?", payload={"tags": {"b", "a"}, "point": Point(x=1)})
        return {"answer": answer}

    graph = AgentGraph("everything")
    graph.add_node("start", lambda s: {"color": Color.RED, "box": Box(2)}, next_node="split")
    graph.add_node("split", lambda s: None)
    graph.add_conditional_edge("split", lambda s: ["left", "right"])
    graph.add_node("left", lambda s: {"left": b"\x00\x01"}, next_node="ask")
    graph.add_node("right", lambda s: {"right": float("inf")}, next_node="ask")
    graph.add_node("ask", ask, next_node=END)
    events: list[GraphEvent] = []
    graph.run({}, observers=[events.append])
    return events


def test_every_event_survives_a_trip_through_json() -> None:
    events = run_with_everything()
    kinds = set()
    for event in events:
        encoded = json.loads(json.dumps(event_to_json(event, state=True)))
        back = event_from_json(encoded)
        assert type(back) is type(event)
        assert back.run_id == event.run_id
        assert back.branch == event.branch
        assert back.node_path == event.node_path
        kinds.add(type(event).__name__)
    assert {"RunStarted", "NodeStarted", "NodeFinished", "EdgeFired", "ParallelStarted"} <= kinds
    to_end = EdgeFired(
        run_id="r", graph="g", step=1, timestamp=0.0, source="a", target=END, kind="s"
    )
    assert event_from_json(json.loads(json.dumps(event_to_json(to_end)))) == to_end


def test_values_are_written_as_json_for_display() -> None:
    events = run_with_everything()
    start = next(e for e in events if isinstance(e, NodeFinished) and e.node == "start")
    encoded = event_to_json(start, state=True)
    assert encoded["update"] == {"color": "red", "box": {"size": 2}}
    assert encoded["state"]["color"] == "red"
    paused = next(e for e in events if isinstance(e, RunPaused))
    summary = event_to_json(paused)["summary"]
    assert summary["interrupts"][0]["payload"] == {"tags": ["a", "b"], "point": {"x": 1}}
    assert json_value(b"\x00\x01") == "AAE="
    assert json_value(float("nan")) == "nan"
    assert json_value(object()).startswith("<object object")


def test_a_record_never_names_a_class_to_build() -> None:
    with pytest.raises(ValueError, match=r"'os\.system' is not a selectgraph event"):
        event_from_json({"event": "os.system", "run_id": "r"})
    with pytest.raises(ValueError, match="cannot rebuild NodeStarted"):
        event_from_json({"event": "NodeStarted", "run_id": "r"})
    assert "GraphEvent" not in EVENT_CLASSES
    assert all(issubclass(cls, GraphEvent) for cls in EVENT_CLASSES.values())
