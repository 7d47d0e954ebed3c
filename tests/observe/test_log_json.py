"""The stored event log written from raw entries is what log_entry writes from built events."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Generator
from typing import Any

import pytest

from selectgraph import END, AgentGraph, InMemoryCheckpointStore, InterruptRequest
from selectgraph.core._branch import BranchRef
from selectgraph.core._json_object import JSONObject
from selectgraph.observe._codec import EVENT_CLASSES, HEAVY_FIELDS, log_entry
from selectgraph.observe._log_json import log_entries
from selectgraph.observe._recorder import _code, build_raw, own_fields, span_parts
from selectgraph.persistence._codec import encode_events

_SAMPLES: dict[str, Any] = {
    "tuple": ("a", "b"),
    "Mapping": {"k": (1, 2), "n": float("inf")},
    "dict": {"k": [1, {"x": b"\x00"}]},
    "float": 0.25,
    "int": 7,
    "bool": True,
}


def _sample(field: dataclasses.Field[Any], odd: bool) -> Any:
    """A value of roughly the field's type, with parts JSON must convert (more if ``odd``)."""
    if odd and "float" in str(field.type):
        return float("nan")
    if field.name in HEAVY_FIELDS:
        return None  # objects log_entry summarizes; its own tests cover them
    annotation = str(field.type)
    for name, value in _SAMPLES.items():
        if annotation.startswith(name) or f"[{name}" in annotation:
            return value
    return END if "EndType" in annotation else f"{field.name}-value"


def _raws(cls: type[Any]) -> list[tuple[Any, ...]]:
    """Raw entries of ``cls`` as a recorder writes them: every count of own values it allows."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    own = own_fields(cls)
    branch = BranchRef("fan", 2, parent=BranchRef("outer", 0, name="left"))
    raws = []
    for base in (("run", "graph", (), None), ("run", "sub", ("outer", "inner"), branch)):
        for given in range(len(own) + 1):
            missing = own[given:]
            if any(fields[name].default is dataclasses.MISSING for name in missing):
                continue
            for odd in (False, True):
                values = tuple(_sample(fields[name], odd) for name in own[:given])
                raws.append((_code(cls), base, 3, 1795900100.3753235, *values))
    return raws


@pytest.mark.parametrize("name", sorted(n for n in EVENT_CLASSES if not n.startswith("_")))
@pytest.mark.parametrize("content", [False, True])
def test_every_class_is_written_as_log_entry_writes_it(name: str, content: bool) -> None:
    cls = EVENT_CLASSES[name]
    raws = _raws(cls)
    assert raws, f"{name}: no entry built"
    for raw in raws:
        expected = log_entry(build_raw(raw), content=content)
        written = log_entries([raw], content=content)
        assert written == ([] if expected is None else [expected]), raw
        if written:
            assert list(written[0]) == list(expected or {}), "same keys, same order"


def test_a_span_is_written_as_its_two_events() -> None:
    base = ("run", "graph", ("outer",), None)
    span = (-1, base, 4, 10.5, "work", 2, 10.75, 250.0, "success", 1)
    started, finished = span_parts(span)
    assert log_entries([span]) == [
        log_entry(build_raw(started)),
        log_entry(build_raw(finished)),
    ]


def test_a_span_holding_its_edge_is_written_as_its_three_events() -> None:
    base = ("run", "graph", ("outer",), None)
    span = (-1, base, 4, 10.5, "work", 2, 10.75, 250.0, "success", 1, 10.8, END, "static", "")
    started, finished, fired = span_parts(span)
    assert fired == (_code(EVENT_CLASSES["EdgeFired"]), base, 4, 10.8, "work", END, "static", "")
    assert log_entries([span]) == [
        log_entry(build_raw(started)),
        log_entry(build_raw(finished)),
        log_entry(build_raw(fired)),
    ]


def test_an_unobserved_run_writes_from_its_folded_trace_what_log_entry_would() -> None:
    graph = AgentGraph("loop", max_steps=None)
    graph.add_node("n", lambda s: {"x": s["x"] + 1})
    graph.add_edge("n", "n", condition="x < 3")
    graph.add_edge("n", END)
    graph.set_entry("n")
    result = graph.run({"x": 0})
    raw = list(result.trace._log)  # type: ignore[attr-defined]  # before it is read

    assert [len(entry) for entry in raw if entry[0] == -1] == [14, 14, 14]  # edges folded in
    assert log_entries(raw) == [log_entry(event) for event in result.trace]


def test_entries_are_marked_as_json_and_encode_as_checked_ones_do() -> None:
    raw = (_code(EVENT_CLASSES["EdgeFired"]), ("r", "g", (), None), 1, 2.5, "a", END, "static")
    (entry,) = log_entries([raw])
    assert type(entry) is JSONObject
    (fast,) = encode_events([entry], "r")
    (checked,) = encode_events([dict(entry)], "r")
    assert fast == checked
    assert json.loads(fast)["target"] == {"$end": True}


def test_a_run_stores_the_events_log_entry_would() -> None:
    def ask(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
        answer = yield InterruptRequest("ok?", payload={"tags": {"b", "a"}})
        return {"answer": answer}

    graph = AgentGraph("everything")
    graph.add_node("start", lambda s: {"blob": b"\x00\x01"}, next_node="split")
    graph.add_node("split", lambda s: None)
    graph.add_conditional_edge("split", lambda s: ["left", "right"])
    graph.add_node("left", lambda s: {"left": 1}, next_node="ask")
    graph.add_node("right", lambda s: {"right": float("inf")}, next_node="ask")
    graph.add_node("ask", ask, next_node=END)
    store = InMemoryCheckpointStore()
    result = graph.run({}, checkpoint_store=store, run_id="everything-1")
    stored = [event.event for event in store.read_events("everything-1")]
    expected = [log_entry(event) for event in result.trace]
    assert stored == [json.loads(json.dumps(e)) for e in expected if e is not None]
    assert {"ParallelStarted", "InterruptRaised", "RunPaused"} <= {e["event"] for e in stored}
