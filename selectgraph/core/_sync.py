"""Sync: run a coroutine to completion from synchronous code, inside a running loop or not."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from typing import Any, TypeVar

__all__ = ["iterate_sync", "run_sync"]

T = TypeVar("T")


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` and return its result.

    Called from inside a running event loop (a notebook, an async app), the
    coroutine runs on a worker thread with a loop of its own, so ``run()``
    never fails with "event loop is already running".
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="selectgraph-run")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


_DONE = object()


def iterate_sync(make: Callable[[], AsyncIterator[T]]) -> Generator[T, None, None]:
    """The items of the async iterator ``make()`` returns, for a plain ``for`` loop.

    The iterator runs on a worker thread with an event loop of its own, in a copy
    of the caller's context (a graph streamed inside a node shares the run's
    budgets, as one it runs does); items are handed over through a queue as they
    come. Leaving the loop early cancels it.
    """
    context = contextvars.copy_context()
    items: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()
    state: dict[str, Any] = {}

    async def pump() -> None:
        try:
            async for item in make():
                items.put(item)
                if stop.is_set():
                    break
        except BaseException as exc:  # re-raised in the caller's thread
            items.put((_DONE, exc))
            return
        items.put((_DONE, None))

    def target() -> None:
        loop = asyncio.new_event_loop()
        state["loop"] = loop
        try:
            task = loop.create_task(pump(), context=context)
            state["task"] = task
            loop.run_until_complete(task)
        except BaseException as exc:
            items.put((_DONE, exc))
        finally:
            loop.close()

    thread = threading.Thread(target=target, name="selectgraph-stream", daemon=True)
    thread.start()
    try:
        while True:
            item = items.get()
            if type(item) is tuple and len(item) == 2 and item[0] is _DONE:
                if item[1] is not None:
                    raise item[1]
                return
            yield item
    finally:
        stop.set()
        loop, task = state.get("loop"), state.get("task")
        if loop is not None and task is not None and thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop has just closed
                loop.call_soon_threadsafe(task.cancel)
        thread.join(timeout=30)
