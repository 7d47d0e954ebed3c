"""Synchronous nodes under an event loop run on worker threads (``sync_nodes``, issue 22).

A blocking node (a local model, a request, ``time.sleep``) called on the event
loop's thread would stall every other run and stream on that loop. Concurrency is
proven with a barrier that only opens when all the nodes wait on it at once, so the
tests do not depend on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    GraphState,
    InMemoryCheckpointStore,
    NodeCall,
    Scatter,
    append,
)

RUNS = 4


def _note_thread(seen: list[int]) -> Callable[[GraphState], dict[str, Any]]:
    def node(state: GraphState) -> dict[str, Any]:
        seen.append(threading.get_ident())
        return {}

    return node


def _waiting_graph(barrier: threading.Barrier, **options: Any) -> AgentGraph:
    def wait(state: GraphState) -> dict[str, Any]:
        barrier.wait()  # opens only when every run's node is waiting at once
        return {"done": True}

    graph = AgentGraph("blocking", **options)
    graph.add_node("wait", wait)
    graph.add_edge("wait", END)
    return graph


async def test_concurrent_aruns_of_a_blocking_node_run_at_once() -> None:
    graph = _waiting_graph(threading.Barrier(RUNS, timeout=30))

    results = await asyncio.gather(*(graph.arun({}) for _ in range(RUNS)))

    assert all(result.state["done"] for result in results)


async def test_four_half_second_sync_nodes_in_concurrent_aruns_overlap() -> None:
    def slow(state: GraphState) -> dict[str, Any]:
        time.sleep(0.5)
        return {"done": True}

    graph = AgentGraph("slow")
    graph.add_node("slow", slow)
    graph.add_edge("slow", END)
    started = time.perf_counter()
    await asyncio.gather(*(graph.arun({}) for _ in range(RUNS)))
    elapsed = time.perf_counter() - started
    # In a row they take 2 s; at once about 0.5 s. The bound leaves room for a loaded machine.
    assert elapsed < 1.9, elapsed


async def test_sync_nodes_loop_keeps_them_on_the_event_loop_thread() -> None:
    seen: list[int] = []

    def where(state: GraphState) -> dict[str, Any]:
        seen.append(threading.get_ident())
        return {}

    graph = AgentGraph("inline", sync_nodes="loop")
    graph.add_node("a", where)
    graph.add_node("b", where)
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    await graph.arun({})
    assert seen == [threading.get_ident()] * 2


async def test_by_default_a_sync_node_under_arun_runs_off_the_loop_thread() -> None:
    seen: list[int] = []
    graph = AgentGraph("threaded")
    graph.add_node("a", _note_thread(seen))
    graph.add_edge("a", END)
    await graph.arun({})
    assert len(seen) == 1
    assert seen[0] != threading.get_ident()


def test_run_of_an_all_sync_graph_stays_on_the_callers_thread() -> None:
    seen: list[int] = []
    graph = AgentGraph("plain")
    graph.add_node("a", _note_thread(seen))
    graph.add_edge("a", END)
    graph.run({})
    assert seen == [threading.get_ident()]


def test_an_unknown_sync_nodes_value_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match='sync_nodes must be "thread"'):
        AgentGraph("bad", sync_nodes="inline")  # type: ignore[arg-type]


def _timing(record: list[str]) -> Callable[[NodeCall, Callable[[], Any]], Awaitable[Any]]:
    async def middleware(call: NodeCall, proceed: Callable[[], Any]) -> Any:
        record.append(call.node)
        return await proceed()

    return middleware


async def test_middleware_around_a_blocking_node_still_runs_it_on_a_worker_thread() -> None:
    barrier = threading.Barrier(RUNS, timeout=30)
    wrapped: list[str] = []
    graph = _waiting_graph(barrier, middleware=[_timing(wrapped)])

    results = await asyncio.gather(*(graph.arun({}) for _ in range(RUNS)))

    assert all(result.state["done"] for result in results)
    assert wrapped == ["wait"] * RUNS


async def test_middleware_around_blocking_fan_out_branches_lets_them_overlap() -> None:
    barrier = threading.Barrier(3, timeout=30)

    def work(state: GraphState) -> dict[str, Any]:
        barrier.wait()
        return {"seen": [state["item"]]}

    graph = AgentGraph("fan", reducers={"seen": append}, middleware=[_timing([])])
    graph.add_node("plan", lambda state: {})
    graph.add_node("work", work)
    graph.add_conditional_edge("plan", lambda state: [Scatter("work", {"item": i}) for i in "abc"])
    graph.add_edge("work", END)
    result = await graph.arun({})
    assert sorted(result.state["seen"]) == ["a", "b", "c"]


async def test_cancelling_arun_stops_the_threaded_run_at_its_next_node_and_saves_it() -> None:
    entered, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def first(state: GraphState) -> dict[str, Any]:
        calls.append("first")
        entered.set()
        release.wait(30)
        return {"first": True}

    def second(state: GraphState) -> dict[str, Any]:
        calls.append("second")
        return {"second": True}

    graph = AgentGraph("cancelled")
    graph.add_node("first", first)
    graph.add_node("second", second)
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    store = InMemoryCheckpointStore()
    task = asyncio.ensure_future(graph.arun({}, checkpoint_store=store, run_id="c"))
    assert await asyncio.to_thread(entered.wait, 30)

    task.cancel()
    await asyncio.sleep(0)  # the task takes the cancellation (halting the run) first
    release.set()  # the node in flight finishes; nothing after it starts
    with pytest.raises(asyncio.CancelledError):
        await task

    assert calls == ["first"]
    head = store.head("c")
    assert head is not None
    assert head.metadata["trigger"] == "cancel"
    # Continued later, it goes on after the node that completed.
    done = await graph.arun(None, checkpoint_store=store, run_id="c")
    assert calls == ["first", "second"]
    assert done.state["second"] is True


async def test_leaving_an_astream_early_stops_the_threaded_run() -> None:
    calls: list[int] = []

    def count(state: GraphState) -> dict[str, Any]:
        calls.append(state["n"])
        return {"n": state["n"] + 1}

    graph = AgentGraph("counting", max_steps=None, enable_loop_detection=False)
    graph.add_node("count", count)
    graph.add_edge("count", "count", condition="n < 100000")
    graph.add_edge("count", END)
    stream = graph.astream({"n": 0})
    async for event in stream:
        if event.type == "node_end":
            break
    await stream.aclose()  # type: ignore[attr-defined]  # an async generator
    ran = len(calls)
    await asyncio.sleep(0.05)
    assert len(calls) == ran  # nothing runs behind the consumer's back
    assert ran < 100000


async def test_an_all_sync_graph_is_prepared_when_arun_is_called() -> None:
    graph = AgentGraph("plain")
    graph.add_node("a", lambda state: {})
    graph.add_edge("a", END)
    with pytest.raises(ValueError, match="checkpoint_id needs the checkpoint_store"):
        graph.arun({}, checkpoint_id="c1")  # type: ignore[unused-coroutine]  # raised here


async def test_more_concurrent_threaded_runs_than_any_pool_all_proceed() -> None:
    many = 80  # beyond the 64 threads of the shared pool
    barrier = threading.Barrier(many, timeout=60)
    graph = _waiting_graph(barrier)
    results = await asyncio.gather(*(graph.arun({}) for _ in range(many)))
    assert all(result.state["done"] for result in results)


async def test_a_wait_of_a_threaded_run_ends_when_its_caller_is_cancelled() -> None:
    from selectgraph.runtime._offload import halting
    from selectgraph.runtime._run import blocking_sleep

    halt = threading.Event()
    halt.set()
    with halting(halt), pytest.raises(asyncio.CancelledError):
        await blocking_sleep(600)  # a retry's backoff, a queued input's poll
