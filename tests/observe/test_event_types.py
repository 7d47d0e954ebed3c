"""Observers that declare the events they want get only those; the trace still has them all."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import sys
import threading
from typing import Any

import pytest

from selectgraph import END, AgentGraph, AgentObserver, AsyncAgentObserver
from selectgraph.observe import (
    EdgeFired,
    GraphEvent,
    NodeChunk,
    NodeFinished,
    NodeStarted,
    Observer,
    ParallelFinished,
    RunFinished,
    RunStarted,
    drain_sync,
)
from selectgraph.observe._observer import as_listener
from selectgraph.observe._recorder import wanted_types
from selectgraph.observe._stream import stream_converter


@pytest.fixture(autouse=True)
def _drained() -> Any:
    """No test leaves async deliveries behind for the next one."""
    yield
    drain_sync(5.0)


def loop_graph(steps: int = 3) -> AgentGraph:
    graph = AgentGraph("loop", max_steps=None)
    graph.add_node("n", lambda state: {"x": state.data["x"] + 1})
    graph.add_edge("n", "n", condition=f"x < {steps}")
    graph.add_edge("n", END)
    graph.set_entry("n")
    return graph


class Everything(Observer):
    def __init__(self) -> None:
        self.events: list[GraphEvent] = []

    def on_event(self, event: GraphEvent) -> None:
        self.events.append(event)


class NodeEnds(Everything):
    event_types = (NodeFinished,)


def comparable(event: GraphEvent) -> dict[str, Any]:
    """The event's fields but those that differ from run to run (clock, run id, durations)
    and those only listeners get (the result, the node's update, the state)."""
    skipped = {"timestamp", "run_id", "duration_ms", "result", "update", "state"}
    fields = {
        f.name: getattr(event, f.name) for f in dataclasses.fields(event) if f.name not in skipped
    }
    return {"class": type(event).__name__, **fields}


def test_an_observer_gets_only_the_event_types_it_declares() -> None:
    everything, ends = Everything(), NodeEnds()
    result = loop_graph().compile().run({"x": 0}, observers=[everything, ends])
    assert [type(e) for e in ends.events] == [NodeFinished] * 3
    # The same objects the catch-all observer got: built once, handed to both.
    assert ends.events == [e for e in everything.events if type(e) is NodeFinished]
    assert all(a is b for a, b in zip(ends.events, everything.events[2::3], strict=True))
    assert [isinstance(e, NodeFinished) and e.state is not None for e in ends.events] == [True] * 3
    assert result.state["x"] == 3


def test_events_nobody_wants_are_still_in_the_trace_with_the_same_fields() -> None:
    graph = loop_graph().compile()
    ends = NodeEnds()
    observed = graph.run({"x": 0}, observers=[ends]).trace
    unobserved = graph.run({"x": 0}).trace
    everything = Everything()
    watched = graph.run({"x": 0}, observers=[everything]).trace
    assert EdgeFired in {type(e) for e in observed}
    expected = [comparable(e) for e in unobserved]
    assert [comparable(e) for e in observed] == expected
    assert [comparable(e) for e in watched] == expected
    assert [comparable(e) for e in everything.events] == expected


def test_events_built_for_listeners_equal_those_built_by_their_constructor() -> None:
    everything = Everything()
    loop_graph().compile().run({"x": 0}, observers=[everything])
    assert len(everything.events) == 3 * 3 + 2
    for event in everything.events:
        rebuilt = dataclasses.replace(event)
        assert rebuilt == event
        assert repr(rebuilt) == repr(event)
        for field in dataclasses.fields(event):
            assert getattr(rebuilt, field.name) is getattr(event, field.name), field.name


def test_a_seed_observer_asks_only_for_the_events_of_its_methods() -> None:
    class Ends(AgentObserver):
        def __init__(self) -> None:
            self.ends: list[tuple[str, int]] = []

        def on_node_end(self, run_id: str, node_name: str, step: int, duration_ms: float) -> None:
            self.ends.append((node_name, step))

    class All(AgentObserver):
        def on_event(self, event: GraphEvent) -> None:
            pass

    ends = Ends()
    assert wanted_types(as_listener(ends)) == (NodeFinished,)
    assert wanted_types(as_listener(All())) is None
    loop_graph().compile().run({"x": 0}, observers=[ends])
    assert ends.ends == [("n", 1), ("n", 2), ("n", 3)]


def test_a_seed_observers_on_event_gets_only_its_declared_types() -> None:
    class Starts(AgentObserver):
        event_types = (NodeStarted,)

        def __init__(self) -> None:
            self.seen: list[str] = []

        def on_event(self, event: GraphEvent) -> None:
            self.seen.append(type(event).__name__)

        def on_graph_end(self, run_id: str, graph_name: str, steps: int, ms: float) -> None:
            self.seen.append("graph_end")

    starts = Starts()
    assert set(wanted_types(as_listener(starts)) or ()) == {NodeStarted, RunFinished}
    loop_graph(2).compile().run({"x": 0}, observers=[starts])
    assert starts.seen == ["NodeStarted", "NodeStarted", "graph_end"]


def test_an_async_observer_with_event_types_gets_those_and_its_queue_closes() -> None:
    class AsyncStarts(Observer):
        event_types = (RunStarted, NodeStarted)

        def __init__(self) -> None:
            self.seen: list[str] = []

        async def on_event(self, event: GraphEvent) -> None:  # type: ignore[override]
            self.seen.append(type(event).__name__)

    class GraphEnds(AsyncAgentObserver):
        def __init__(self) -> None:
            self.steps: list[int] = []

        async def a_on_graph_end(self, run_id: str, graph_name: str, steps: int, ms: float) -> None:
            self.steps.append(steps)

    starts, ends = AsyncStarts(), GraphEnds()
    graph = loop_graph(2).compile()
    graph.run({"x": 0}, observers=[starts, ends])
    graph.run({"x": 0}, observers=[starts, ends])
    summary = drain_sync(10.0)
    assert not summary.timed_out
    assert starts.seen == ["RunStarted", "NodeStarted", "NodeStarted"] * 2
    assert ends.steps == [2, 2]


@pytest.mark.parametrize("declared", ["NodeFinished", [NodeFinished, dict], 3])
def test_event_types_that_are_not_event_classes_are_refused(declared: Any) -> None:
    class Wrong(Observer):
        event_types = declared

    with pytest.raises(TypeError, match=r"observer .*Wrong.*: event_types must be GraphEvent"):
        loop_graph().compile().run({"x": 0}, observers=[Wrong()])


def test_a_callable_listener_may_declare_event_types() -> None:
    seen: list[GraphEvent] = []

    def listener(event: GraphEvent) -> None:
        seen.append(event)

    listener.event_types = (EdgeFired,)  # type: ignore[attr-defined]
    loop_graph(2).compile().run({"x": 0}, observers=[listener])
    assert [(e.source, str(e.target)) for e in seen if isinstance(e, EdgeFired)] == [
        ("n", "n"),
        ("n", "END"),
    ]
    assert len(seen) == 2


def test_otel_asks_for_the_events_that_make_spans_and_a_subclass_on_event_gets_all() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from selectgraph.observe import OTelObserver

    class Counting(OTelObserver):
        def __init__(self, provider: TracerProvider) -> None:
            super().__init__(provider)
            self.kinds: list[str] = []

        def on_event(self, event: GraphEvent) -> None:
            self.kinds.append(type(event).__name__)
            super().on_event(event)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    plain, counting = OTelObserver(provider), Counting(provider)
    wanted = wanted_types(as_listener(plain)) or ()
    assert NodeStarted in wanted
    assert NodeFinished in wanted
    assert EdgeFired not in wanted
    assert wanted_types(as_listener(counting)) is None
    loop_graph(2).compile().run({"x": 0}, observers=[plain, counting])
    assert counting.kinds.count("EdgeFired") == 2
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names == ["invoke_workflow loop"] * 2 + ["selectgraph.node n"] * 4


def test_events_handed_to_a_catch_all_observer_fill_their_fields_when_read() -> None:
    unread, rebuilt = Everything(), Everything()
    graph = loop_graph(2).compile()
    graph.run({"x": 0}, observers=[unread])
    for event in unread.events:  # nothing read yet: each goes through a way of reading it
        if isinstance(event, NodeFinished | RunStarted | RunFinished):
            continue  # they hold the live state or result
        assert pickle.loads(pickle.dumps(event)) == event
    graph.run({"x": 0}, observers=[rebuilt])
    # Each of these is the first read of its event.
    first, second, edge = rebuilt.events[1], rebuilt.events[4], rebuilt.events[3]
    assert isinstance(first, NodeStarted)
    assert copy.copy(first) == first
    assert getattr(second, "nope", "default") == "default"
    assert isinstance(second, NodeStarted)
    assert second.visit == 2
    with pytest.raises(AttributeError, match="'EdgeFired' object has no attribute 'nope'"):
        edge.nope  # type: ignore[attr-defined]  # noqa: B018
    assert isinstance(edge, EdgeFired)
    assert edge.next_node == "n"
    last = unread.events[-1]
    assert isinstance(last, RunFinished)
    assert last.node_name is None
    assert last.steps == 2
    assert last.result is not None
    assert last.result.state["x"] == 2
    assert [comparable(e) for e in unread.events] == [comparable(e) for e in rebuilt.events]
    assert [type(e) for e in unread.events] == [type(e) for e in rebuilt.events]


@pytest.mark.parametrize(
    ("mode", "types"),
    [
        ("events", None),
        ("updates", {NodeFinished}),
        ("values", {NodeFinished, RunStarted, ParallelFinished}),
        (["updates", "messages"], {NodeFinished, NodeChunk}),
        (["custom", "events"], None),
    ],
)
def test_a_stream_converter_names_the_events_its_modes_make_items_of(
    mode: Any, types: set[type[GraphEvent]] | None
) -> None:
    convert = stream_converter(mode)
    declared = wanted_types(convert)
    assert (None if declared is None else set(declared)) == types
    everything = Everything()
    loop_graph(3).compile().run({"x": 0}, observers=[everything])
    wanted = tuple(types) if types is not None else GraphEvent
    # What the declared events make is all the converter makes of the run's events.
    assert [item for e in everything.events for item in convert(e)] == [
        item for e in everything.events if isinstance(e, wanted) for item in convert(e)
    ]
    assert any(convert(e) for e in everything.events)


def test_threads_reading_the_same_unread_events_all_see_their_fields() -> None:
    everything = Everything()
    result = loop_graph(300).compile().run({"x": 0}, observers=[everything])
    # The trace's events are built apart from those handed to the observer, none read yet.
    expected = [(type(e), e.step, e.node_name) for e in result.trace]
    seen: list[list[tuple[Any, ...]]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def read() -> None:
        start.wait()
        try:
            seen.append([(type(e), e.step, e.node_name) for e in everything.events])
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, mid-fill included
    try:
        readers = [threading.Thread(target=read) for _ in range(4)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(timeout=60)
    finally:
        sys.setswitchinterval(switch)
    assert errors == []
    assert seen == [expected] * 4
    # What a reader that found a field unset sees when another thread has filled it
    # since: the fallback is asked for a field that is there now.
    first = everything.events[1]
    assert getattr(type(first), "__getattr__")(first, "step") == 1  # noqa: B009


def test_a_finished_tool_calls_event_encodes_without_its_result() -> None:
    from selectgraph.observe import ToolCallFinished
    from selectgraph.observe._codec import event_to_json

    event = ToolCallFinished(
        run_id="r", graph="g", step=1, timestamp=0.0, node="n", tool="lookup", call_id="c",
        duration_ms=1.0, result="the answer",
    )  # fmt: skip

    encoded = event_to_json(event)

    assert encoded["tool"] == "lookup"
    assert "summary" not in encoded
