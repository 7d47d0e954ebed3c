"""A whole run on a worker thread: how ``arun()`` and ``astream()`` run an all-synchronous graph.

A graph whose nodes and edges are all synchronous needs no event loop: ``run()``
drives its step loop directly. Under ``arun()`` calling those nodes on the loop's
thread would stall every other run and stream on the loop while one blocks (a
local model, a request, ``time.sleep``); sending each node to a thread costs a
thread hop per step (about a hundred microseconds). So the whole run is driven
on one worker thread, exactly as ``run()`` drives it, and the loop awaits it:
one hop per run.

Cancelling the awaiting task stops the run at its next node boundary (a thread
cannot be interrupted mid-node): the run raises CancelledError there, saves its
``cancel`` checkpoint as a cancelled run does, and only then does the
cancellation reach the caller, so nothing keeps running behind its back.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

from selectgraph.runtime._branches import run_blocking

__all__ = ["current_halt", "run_elsewhere"]

T = TypeVar("T")

_halt: ContextVar[threading.Event | None] = ContextVar("selectgraph_halt", default=None)


def current_halt() -> threading.Event | None:
    """Set when the task awaiting this (offloaded) run was cancelled; None in other runs."""
    return _halt.get()


async def run_elsewhere(start: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Drive the run ``start()`` makes (one that never suspends) on a worker thread.

    ``start`` is called here, so the run it makes sees the halt event.

    Raises:
        asyncio.CancelledError: the caller was cancelled; the run stopped first.
    """
    halt = threading.Event()
    token = _halt.set(halt)
    try:
        # The task copies the context now, with the halt event in it.
        running = asyncio.ensure_future(run_blocking(start()))
    finally:
        _halt.reset(token)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        halt.set()  # the run stops before its next node and checkpoints that
        with contextlib.suppress(BaseException):  # its cancellation is the caller's to raise
            await asyncio.shield(running)
        raise
