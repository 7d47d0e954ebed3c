"""Where a stream's items wait for its consumer (``astream()``).

A run's events are appended to a deque: appending is atomic, so a worker thread
driving the run (or a branch's blocking node) appends without a lock. The
consumer, a task on the event loop, takes them in batches and sleeps on a future
when none are left.

Waking it from another thread is the expensive part. ``call_soon_threadsafe``
writes to the loop's pipe, and the consumer's thread then takes the GIL from the
worker for a few items before giving it back: on a busy two-core machine, one
GIL hand-over per thirty events made ``astream()`` half again as slow as the run
it streams. So a consumer that has just gone to sleep is not woken from another
thread at once: a timer it set wakes it :data:`WAKE_DELAY` later if items came
meanwhile. A consumer that has slept longer than that (the run was busy in a
model call, say) is woken at once. Either way an item waits at most
:data:`WAKE_DELAY` plus the loop's own delays.

:func:`blocking_inbox` is the same for a consumer in a thread of its own, the
caller of ``stream()``, with a ``threading.Event`` for the future and its
timed wait for the timer.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Awaitable, Callable
from time import monotonic
from typing import Any, Final

from selectgraph.observe._events import GraphEvent
from selectgraph.observe._stream import every_event_converter

__all__ = ["WAKE_DELAY", "blocking_inbox", "inbox"]

WAKE_DELAY: Final = 0.001
"""Seconds a consumer that just went to sleep may wait for items from another thread."""


def inbox(
    convert: Callable[[GraphEvent], tuple[Any, ...]],
) -> tuple[
    collections.deque[Any],
    Callable[[GraphEvent], None],
    Callable[[Any], None],
    Callable[[], Awaitable[None]],
]:
    """Where a stream's items wait for its consumer: (items, listener, push, wait).

    The listener takes the run's events (from any thread) and declares the event
    types ``convert`` needs; ``push`` adds an item from the loop's thread; ``wait``
    returns when items may be ready. A flag says a wake-up of the consumer is
    already on its way: one per batch of items rather than one per item.
    """
    every_event = convert is every_event_converter
    pending: collections.deque[Any] = collections.deque()
    loop = asyncio.get_running_loop()
    home = threading.get_ident()
    scheduled = [False]
    waiter: list[asyncio.Future[None] | None] = [None]
    # Until this time.monotonic() reading, a timer will wake the sleeping consumer;
    # 0.0: nobody will, another thread wakes it itself.
    timer_until = [0.0]

    def wake() -> None:
        future = waiter[0]
        if future is not None and not future.done():
            future.set_result(None)

    def on_timer() -> None:
        timer_until[0] = 0.0  # first: an item appended after the look below wakes it itself
        # A set flag with nothing pending: a producer, switched out between its look
        # at the flag and setting it, saw this timer and left the wake-up to it.
        if pending or scheduled[0]:
            wake()

    def push(item: Any) -> None:  # on the loop's thread: waking costs nothing
        pending.append(item)
        scheduled[0] = True
        wake()

    def deliver(event: GraphEvent) -> None:
        if every_event:
            pending.append(event)
        else:
            items = convert(event)
            if not items:
                return
            pending.extend(items)
        if scheduled[0]:
            return
        scheduled[0] = True
        if threading.get_ident() == home:
            wake()
        elif monotonic() >= timer_until[0]:
            loop.call_soon_threadsafe(wake)
        # else: the consumer's timer finds the item (appended before the look above)

    async def wait() -> None:
        # The timer's time before the flag is cleared: a producer that finds the flag
        # clear then leaves the wake-up to the timer, set below unless items came.
        timer_until[0] = monotonic() + WAKE_DELAY
        # Cleared before the last look: an item appended after it schedules a wake-up.
        scheduled[0] = False
        if pending:
            return
        future = waiter[0] = loop.create_future()
        timer = loop.call_later(WAKE_DELAY, on_timer)
        try:
            await future
        finally:
            waiter[0] = None
            timer.cancel()

    # A mode that needs only some events (``"updates"``: NodeFinished) has the run
    # build no others for the stream.
    deliver.event_types = getattr(convert, "event_types", None)  # type: ignore[attr-defined]
    return pending, deliver, push, wait


def blocking_inbox(
    convert: Callable[[GraphEvent], tuple[Any, ...]],
) -> tuple[
    collections.deque[Any],
    Callable[[GraphEvent], None],
    Callable[[Any], None],
    Callable[[], None],
]:
    """:func:`inbox` for a consumer that blocks: (items, listener, push, wait).

    Every producer is another thread than the consumer's. ``push`` adds an item
    and wakes the consumer at once (the end of the stream); ``wait`` blocks until
    items may be ready.
    """
    every_event = convert is every_event_converter
    pending: collections.deque[Any] = collections.deque()
    ready = threading.Event()
    scheduled = [False]
    timer_until = [0.0]  # as in inbox(): until then, the consumer's timed wait looks itself

    def push(item: Any) -> None:
        pending.append(item)
        scheduled[0] = True
        ready.set()

    def deliver(event: GraphEvent) -> None:
        if every_event:
            pending.append(event)
        else:
            items = convert(event)
            if not items:
                return
            pending.extend(items)
        if scheduled[0]:
            return
        scheduled[0] = True
        if monotonic() >= timer_until[0]:
            ready.set()

    def wait() -> None:
        timer_until[0] = monotonic() + WAKE_DELAY  # before the flag is cleared, as in inbox()
        ready.clear()
        scheduled[0] = False  # cleared before the last look, as in inbox()
        if pending:
            return
        if ready.wait(WAKE_DELAY):
            return
        timer_until[0] = 0.0  # first: an item appended after the look below sets ``ready``
        if pending or scheduled[0]:  # a flag set late, as in inbox()'s on_timer
            return
        ready.wait()

    deliver.event_types = getattr(convert, "event_types", None)  # type: ignore[attr-defined]
    return pending, deliver, push, wait
