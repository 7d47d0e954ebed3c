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
    # The burst comes long before the consumer's timer: under any load its first
    # timer must not fire empty-handed, or the burst's first item wakes it itself.
    monkeypatch.setattr(_inbox, "WAKE_DELAY", 1.0)
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


# ------------------------------------------- a producer switched out mid-deliver
def _switched_out_before_the_flag(deliver: Any) -> tuple[threading.Event, threading.Event]:
    """Pause the next ``deliver`` call on this thread just before it sets its flag.

    A line-trace hook stands in for the thread switch CPython may make there under
    a tracer or without a GIL: the item is appended, the flag read as clear.
    """
    import inspect
    import sys

    lines, first = inspect.getsourcelines(deliver)
    store = first + next(i for i, line in enumerate(lines) if "scheduled[0] = True" in line)
    paused, release = threading.Event(), threading.Event()

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line" and frame.f_lineno == store and not paused.is_set():
            paused.set()
            release.wait(30)
        return local

    def hook(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code is deliver.__code__ else None

    sys.settrace(hook)
    return paused, release


@pytest.mark.parametrize("blocking", [False, True])
async def test_a_flag_set_late_does_not_leave_the_consumer_asleep(
    monkeypatch: pytest.MonkeyPatch, blocking: bool
) -> None:
    import sys

    monkeypatch.setattr(_inbox, "WAKE_DELAY", 0.3)  # wide windows, so the switch lands in one
    loop = asyncio.get_running_loop()
    got: list[Any] = []
    took_x = threading.Event()

    def take(pending: Any) -> bool:
        """Take what is pending; whether the stream ended (or y, the last item, came)."""
        while pending:
            item = pending.popleft()
            if item is _END:
                return True
            got.append(item)
            took_x.set()
        return bool(got) and got[-1] == "y"

    consumer: Any
    if blocking:
        pending, deliver, push, blocking_wait = _inbox.blocking_inbox(every_event_converter)

        def blocking_consumer() -> None:
            while not take(pending):
                blocking_wait()

        consumer = loop.run_in_executor(None, blocking_consumer)
    else:
        pending, deliver, push, wait = inbox(every_event_converter)

        async def async_consumer() -> None:
            while not take(pending):
                await wait()

        consumer = loop.create_task(async_consumer())

    def producer() -> None:
        paused, release = _switched_out_before_the_flag(deliver)
        try:

            def resume() -> None:  # once the consumer took x: it then sleeps on its next wait
                paused.wait(30)
                took_x.wait(30)
                release.set()

            threading.Thread(target=resume).start()
            deliver("x")  # type: ignore[arg-type]
        finally:
            sys.settrace(None)

    try:
        await asyncio.sleep(0.05)  # the consumer sleeps on its first wait
        await loop.run_in_executor(None, producer)  # x taken by the timer; then the late flag
        await asyncio.sleep(0.5)  # past the consumer's next timer: it sleeps without one now
        await loop.run_in_executor(None, deliver, "y")  # type: ignore[arg-type]
        async with asyncio.timeout(10):  # the flag stuck set: y would never be delivered
            await asyncio.shield(consumer)
        assert got == ["x", "y"]
    finally:
        loop.call_soon(push, _END)  # never leave a consumer behind
        await consumer
