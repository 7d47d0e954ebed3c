"""astream()'s inbox: items from other threads reach the consumer, with few wake-ups."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from selectgraph import END, AgentGraph
from selectgraph.compile import _inbox
from selectgraph.compile._inbox import inbox
from selectgraph.observe import GraphEvent
from selectgraph.observe._stream import every_event_converter

_END = object()


async def _take(
    pending: Any, wait: Callable[[], Awaitable[None]], until: object = _END
) -> list[Any]:
    """Every item up to ``until``, as stream_run takes them."""
    taken: list[Any] = []
    async with asyncio.timeout(30):  # a lost wake-up fails here instead of hanging
        while True:
            while pending:
                item = pending.popleft()
                if item is until:
                    return taken
                taken.append(item)
            await wait()


def _counting_wakes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts call_soon_threadsafe calls on the running loop."""
    loop = asyncio.get_running_loop()
    calls = [0]
    real = loop.call_soon_threadsafe

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    return calls


async def test_an_item_from_another_thread_just_after_the_consumer_slept_arrives() -> None:
    """The timer's case: no wake-up from the thread, and no later item to bring one."""
    pending, deliver, _, wait = inbox(every_event_converter)
    slept = threading.Event()

    def late_item() -> None:
        slept.wait()
        deliver("only")  # type: ignore[arg-type]
        deliver(_END)  # type: ignore[arg-type]

    thread = threading.Thread(target=late_item)
    thread.start()

    async def consumer() -> list[Any]:
        asyncio.get_running_loop().call_soon(slept.set)  # once the consumer sleeps
        return await _take(pending, wait)

    assert await consumer() == ["only"]
    thread.join()


async def test_a_thread_does_not_wake_a_consumer_that_just_went_to_sleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(_inbox, "monotonic", lambda: now[0])  # the inbox's clock stands still
    pending, deliver, _, wait = inbox(every_event_converter)
    wakes = _counting_wakes(monkeypatch)
    slept = threading.Event()

    def burst() -> None:
        slept.wait()
        for index in range(200):
            deliver(index)  # type: ignore[arg-type]
        deliver(_END)  # type: ignore[arg-type]

    thread = threading.Thread(target=burst)
    thread.start()
    asyncio.get_running_loop().call_soon(slept.set)
    assert await _take(pending, wait) == list(range(200))
    thread.join()
    assert wakes[0] == 0, "the consumer's timer brought them"


async def test_a_consumer_asleep_for_longer_is_woken_by_the_thread_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(_inbox, "monotonic", lambda: now[0])
    monkeypatch.setattr(_inbox, "WAKE_DELAY", 3600.0)  # its timer would come far too late
    pending, deliver, _, wait = inbox(every_event_converter)
    wakes = _counting_wakes(monkeypatch)
    slept = threading.Event()

    def after_a_while() -> None:
        slept.wait()
        now[0] += 3601.0  # the consumer has slept past its timer's time
        deliver("late")  # type: ignore[arg-type]
        deliver(_END)  # type: ignore[arg-type]

    thread = threading.Thread(target=after_a_while)
    thread.start()
    asyncio.get_running_loop().call_soon(slept.set)
    assert await _take(pending, wait) == ["late"]
    thread.join()
    assert wakes[0] == 1


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
async def test_items_from_several_threads_all_arrive_in_each_threads_order(seed: int) -> None:
    rng = random.Random(seed)  # replayable: the failing seed is the test's id
    plans = [[rng.random() < 0.1 for _ in range(300)] for _ in range(3)]
    pending, deliver, push, wait = inbox(every_event_converter)
    loop = asyncio.get_running_loop()
    left = [len(plans)]

    def produce(worker: int, pauses: list[bool]) -> None:
        for index, pause in enumerate(pauses):
            if pause:
                time.sleep(0.002)  # now and then past the timer's delay
            deliver((worker, index))  # type: ignore[arg-type]

        def done() -> None:
            left[0] -= 1
            if not left[0]:
                push(_END)

        loop.call_soon_threadsafe(done)

    threads = [threading.Thread(target=produce, args=(w, p)) for w, p in enumerate(plans)]
    for thread in threads:
        thread.start()
    taken = await _take(pending, wait)
    for thread in threads:
        thread.join()
    for worker in range(len(plans)):
        assert [i for w, i in taken if w == worker] == list(range(300))


async def test_astream_of_a_synchronous_graph_streams_every_event() -> None:
    graph = AgentGraph("loop", max_steps=None)
    graph.add_node("n", lambda s: {"x": s["x"] + 1})
    graph.add_edge("n", "n", condition="x < 500")
    graph.add_edge("n", END)
    graph.set_entry("n")
    seen: list[GraphEvent] = []
    result = await graph.arun({"x": 0}, observers=[seen.append])

    streamed = [event async for event in graph.astream({"x": 0})]

    assert [type(e).__name__ for e in streamed] == [type(e).__name__ for e in seen]
    assert result.state["x"] == 500
