"""stream() from synchronous code: a synchronous graph on one worker thread, items handed over."""

from __future__ import annotations

import asyncio
import threading
import time
import types
from typing import Any

import pytest

from selectgraph import END, AgentGraph, GraphRunError, NodeContext
from selectgraph.compile import _inbox
from selectgraph.compile._inbox import blocking_inbox
from selectgraph.observe import GraphEvent
from selectgraph.observe._stream import every_event_converter

_END = object()


def _counting(steps: int) -> AgentGraph:
    def count(state: Any, context: NodeContext) -> dict[str, Any]:
        context.emit_custom(state["n"])
        return {"n": state["n"] + 1}

    graph = AgentGraph("counting", max_steps=None)
    graph.add_node("count", count)
    graph.add_edge("count", "count", condition=f"n < {steps}")
    graph.add_edge("count", END)
    graph.set_entry("count")
    return graph


@pytest.mark.parametrize("mode", ["updates", "values", "custom", ["updates", "custom"]])
def test_stream_yields_what_astream_yields(mode: Any) -> None:
    graph = _counting(300)

    async def streamed() -> list[Any]:
        return [item async for item in graph.astream({"n": 0}, stream_mode=mode)]

    assert list(graph.stream({"n": 0}, stream_mode=mode)) == asyncio.run(streamed())


def test_stream_of_events_ends_with_the_run_finishing() -> None:
    seen: list[GraphEvent] = []
    result = _counting(50).run({"n": 0}, observers=[seen.append])

    streamed = list(_counting(50).stream({"n": 0}, stream_mode="events"))

    assert [type(e).__name__ for e in streamed] == [type(e).__name__ for e in seen]
    assert streamed[-1].result.state["n"] == result.state["n"] == 50


def test_a_synchronous_graph_streams_without_an_event_loop_thread() -> None:
    threads: set[str] = set()
    graph = AgentGraph("where", max_steps=None)

    def where(state: Any) -> dict[str, Any]:
        threads.add(threading.current_thread().name)
        return {"n": state["n"] + 1}

    graph.add_node("where", where)
    graph.add_edge("where", "where", condition="n < 20")
    graph.add_edge("where", END)
    graph.set_entry("where")

    for _ in graph.stream({"n": 0}):
        names = [thread.name for thread in threading.enumerate()]
        assert "selectgraph-stream" not in names, "no thread of its own with an event loop"
    assert threads == {"selectgraph-run"}  # on a worker thread, never the caller's


def test_an_async_graph_still_streams() -> None:
    async def bump(state: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"n": state["n"] + 1}

    graph = AgentGraph("async")
    graph.add_node("bump", bump)
    graph.add_edge("bump", END)
    graph.set_entry("bump")
    assert list(graph.stream({"n": 0})) == [{"bump": {"n": 1}}]


def test_a_failed_run_raises_after_its_last_item() -> None:
    graph = AgentGraph("failing", max_steps=None)
    graph.add_node("ok", lambda s: {"n": 1})
    graph.add_node("boom", lambda s: 1 / 0)
    graph.add_edge("ok", "boom")
    graph.add_edge("boom", END)
    graph.set_entry("ok")

    stream = graph.stream({"n": 0})
    assert next(stream) == {"ok": {"n": 1}}
    with pytest.raises(GraphRunError, match="division"):
        next(stream)


def test_bad_options_raise_when_the_stream_is_first_read() -> None:
    stream = _counting(3).stream({"n": 0}, thread_ttl=5.0)  # a TTL without a thread
    with pytest.raises(ValueError, match="thread_id"):
        next(iter(stream))


def test_leaving_a_stream_early_stops_a_run_that_would_never_end() -> None:
    calls = [0]

    def forever(state: Any) -> dict[str, Any]:
        calls[0] += 1
        return {"n": state["n"] + 1}

    graph = AgentGraph("forever", max_steps=None)
    graph.add_node("forever", forever)
    graph.add_edge("forever", "forever")
    graph.set_entry("forever")

    stream = graph.stream({"n": 0})
    assert next(stream) == {"forever": {"n": 1}}
    stream.close()  # returns once the run stopped at a node boundary
    stopped_at = calls[0]
    time.sleep(0.05)  # a run still going would have run more nodes meanwhile
    assert calls[0] == stopped_at


# ------------------------------------------------------------- the inbox itself
def _take(pending: Any, wait: Any) -> list[Any]:
    taken: list[Any] = []
    while True:
        while pending:
            item = pending.popleft()
            if item is _END:
                return taken
            taken.append(item)
        wait()


class _CountingEvent(threading.Event):
    sets = 0

    def set(self) -> None:
        type(self).sets += 1
        super().set()


def test_a_thread_does_not_wake_a_consumer_that_just_went_to_sleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_inbox, "monotonic", lambda: 1000.0)  # the inbox's clock stands still
    # The burst comes long before the consumer's timer: under any load its first
    # timer must not fire empty-handed, or the burst's first item wakes it itself.
    monkeypatch.setattr(_inbox, "WAKE_DELAY", 1.0)
    shim = types.SimpleNamespace(Event=_CountingEvent, get_ident=threading.get_ident)
    monkeypatch.setattr(_inbox, "threading", shim)
    monkeypatch.setattr(_CountingEvent, "sets", 0)
    pending, deliver, push, wait = blocking_inbox(every_event_converter)
    asleep = threading.Event()

    def burst() -> None:
        asleep.wait()
        for index in range(200):
            deliver(index)  # type: ignore[arg-type]
        push(_END)

    def consumer_wait() -> None:
        asleep.set()  # the producer starts once the consumer first waits
        wait()

    thread = threading.Thread(target=burst)
    thread.start()
    assert _take(pending, consumer_wait) == list(range(200))
    thread.join()
    assert _CountingEvent.sets == 1, "only the end woke it; its timed wait found the rest"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_items_from_several_threads_all_arrive(seed: int) -> None:
    import random

    rng = random.Random(seed)  # replayable: the failing seed is the test's id
    plans = [[rng.random() < 0.1 for _ in range(300)] for _ in range(3)]
    pending, deliver, push, wait = blocking_inbox(every_event_converter)
    left = [len(plans)]
    lock = threading.Lock()

    def produce(worker: int, pauses: list[bool]) -> None:
        for index, pause in enumerate(pauses):
            if pause:
                time.sleep(0.002)  # now and then past the timed wait
            deliver((worker, index))  # type: ignore[arg-type]
        with lock:
            left[0] -= 1
            if not left[0]:
                push(_END)

    threads = [threading.Thread(target=produce, args=(w, p)) for w, p in enumerate(plans)]
    for thread in threads:
        thread.start()
    taken = _take(pending, wait)
    for thread in threads:
        thread.join()
    for worker in range(len(plans)):
        assert [i for w, i in taken if w == worker] == list(range(300))


@pytest.mark.parametrize("child_is_async", [False, True])
def test_a_graph_streamed_inside_a_node_shares_the_runs_control(child_is_async: bool) -> None:
    """As a graph a node runs does (docs/howto/budgets.md): the outer budgets and token hold."""
    from selectgraph.core._control import current_control

    controls: dict[str, Any] = {}

    def child_sync(state: Any) -> dict[str, Any]:
        controls["child"] = current_control()
        return {"n": 1}

    async def child_async(state: Any) -> dict[str, Any]:
        controls["child"] = current_control()
        return {"n": 1}

    child = AgentGraph("child")
    child.add_node("c", child_async if child_is_async else child_sync)
    child.add_edge("c", END)
    child.set_entry("c")

    def parent_node(state: Any) -> dict[str, Any]:
        controls["parent"] = current_control()
        assert list(child.stream({"n": 0})) == [{"c": {"n": 1}}]
        return {"m": 1}

    parent = AgentGraph("parent")
    parent.add_node("p", parent_node)
    parent.add_edge("p", END)
    parent.set_entry("p")
    parent.run({"m": 0})

    assert controls["parent"] is not None
    assert controls["child"] is controls["parent"]
