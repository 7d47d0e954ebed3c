"""Whole runs that ``arun()`` drives on a thread reuse idle worker threads, never wait for one.

Nothing here depends on timing: waits are for a state (a worker idle, a thread
gone) with generous limits that only stop a hung test.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from selectgraph import END, AgentGraph, GraphState
from selectgraph.runtime import _branches, _offload
from selectgraph.runtime._branches import Workers

LIMIT = 30.0
"""Seconds a wait may take before the test fails as hung."""


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {what} after {LIMIT} s")
        time.sleep(0.005)


def _thread_graph(seen: list[threading.Thread]) -> AgentGraph:
    """An all-synchronous graph (driven on a worker thread by arun) noting its thread."""

    def node(state: GraphState) -> dict[str, Any]:
        seen.append(threading.current_thread())
        return {"x": 1}

    graph = AgentGraph("threaded")
    graph.add_node("a", node)
    graph.add_edge("a", END)
    return graph


def _idle_workers() -> int:
    return _offload._workers._idle


async def test_a_run_after_another_takes_the_idle_worker_instead_of_a_new_thread() -> None:
    seen: list[threading.Thread] = []
    graph = _thread_graph(seen)
    await graph.arun({})
    await asyncio.to_thread(_until, lambda: _idle_workers() >= 1, "an idle worker")
    alive_before = set(threading.enumerate())
    result = await graph.arun({})
    assert result.state["x"] == 1
    assert seen[1] in alive_before  # a thread that was already there ran the second run
    assert seen[1] is not threading.main_thread()
    assert seen[1].name == "selectgraph-run"


async def test_runs_that_wait_for_each_other_each_get_a_thread() -> None:
    # One idle worker at most can take the first run; the second must not wait for it,
    # since the first only finishes once the second has run.
    seen: list[threading.Thread] = []
    await _thread_graph(seen).arun({})
    started = threading.Event()

    def first(state: GraphState) -> dict[str, Any]:
        if not started.wait(LIMIT):
            raise TimeoutError("the second run never ran")
        return {"x": 1}

    def second(state: GraphState) -> dict[str, Any]:
        started.set()
        return {"x": 2}

    graphs = []
    for node in (first, second):
        graph = AgentGraph(node.__name__)
        graph.add_node("a", node)
        graph.add_edge("a", END)
        graphs.append(graph)
    results = await asyncio.wait_for(asyncio.gather(*(g.arun({}) for g in graphs)), LIMIT)
    assert [r.state["x"] for r in results] == [1, 2]


async def test_an_idle_worker_ends_after_its_idle_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_branches, "IDLE_SECONDS", 0.01)
    # Workers of their own: none of other tests' is idle.
    monkeypatch.setattr(_offload, "_workers", Workers("selectgraph-run"))
    seen: list[threading.Thread] = []
    await _thread_graph(seen).arun({})
    await asyncio.to_thread(_until, lambda: not seen[0].is_alive(), "the idle worker to end")
    assert _idle_workers() == 0
    await _thread_graph(seen).arun({})  # a new worker starts for the next run
    assert seen[1] is not seen[0]


async def test_closing_the_workers_ends_the_idle_ones() -> None:
    workers = Workers("selectgraph-run")
    ran = threading.Event()
    workers.submit(ran.set)
    await asyncio.to_thread(_until, lambda: workers._idle == 1, "the worker to be idle")
    threads = [t for t in threading.enumerate() if t.name == "selectgraph-run"]
    workers.close()
    assert ran.is_set()
    await asyncio.to_thread(
        _until,
        lambda: workers._idle == 0 and not any(_waits_in(t, workers) for t in threads),
        "the idle worker to end",
    )


def _waits_in(thread: threading.Thread, workers: Workers) -> bool:
    """Whether ``thread`` is alive and serving ``workers`` (its target's instance)."""
    target = getattr(thread, "_target", None)
    return thread.is_alive() and getattr(target, "__self__", None) is workers


@pytest.mark.skipif(sys.platform == "win32", reason="os.fork")
async def test_a_forked_child_runs_on_workers_of_its_own() -> None:
    seen: list[threading.Thread] = []
    graph = _thread_graph(seen)
    await graph.arun({})
    await asyncio.to_thread(_until, lambda: _idle_workers() >= 1, "an idle worker")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's idle workers were not copied into it
        code = 1
        try:
            result = asyncio.run(asyncio.wait_for(graph.arun({}), LIMIT))
            code = 0 if result.state["x"] == 1 else 1
        finally:
            os.write(write, bytes([code]))
            os._exit(code)
    os.close(write)
    try:
        status = await asyncio.wait_for(asyncio.to_thread(os.read, read, 1), LIMIT + 10)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert status == b"\x00"


async def test_jobs_beyond_the_limit_wait_for_a_busy_worker_and_all_run() -> None:
    workers = Workers("selectgraph-branch", limit=2)
    release = threading.Event()
    done: list[int] = []
    lock = threading.Lock()

    def job(index: int) -> Callable[[], None]:
        def run() -> None:
            if index < 2 and not release.wait(LIMIT):  # the first two hold both workers
                raise TimeoutError("never released")
            with lock:
                done.append(index)

        return run

    for index in range(6):
        workers.submit(job(index))
    alive = [t for t in threading.enumerate() if _waits_in(t, workers)]
    assert len(alive) <= 2  # never more threads than the limit
    release.set()
    await asyncio.to_thread(_until, lambda: len(done) == 6, "every job to run")
    assert sorted(done) == list(range(6))
    assert workers._threads <= 2


async def test_a_blocking_node_error_reaches_the_run() -> None:
    def broken(state: GraphState) -> dict[str, Any]:
        raise ValueError("broken on a worker thread")

    async def first(state: GraphState) -> dict[str, Any]:
        return {}

    graph = AgentGraph("mixed")  # an async node too: the sync one hops to a worker
    graph.add_node("first", first)
    graph.add_node("broken", broken)
    graph.add_edge("first", "broken")
    graph.add_edge("broken", END)
    with pytest.raises(Exception, match="broken on a worker thread"):
        await graph.arun({})
