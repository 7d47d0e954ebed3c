"""Delivery of events to async observers: one serial queue per run, on a loop of its own.

A run never waits for an async observer. Its listener puts ``(observer, event)``
on the run's queue and goes on; a worker on selectgraph's delivery loop (one
daemon thread for the process) awaits each observer in turn, so observers
see events strictly in order and one at a time, whichever thread or event loop
the run itself used. :func:`drain` waits for what was queued.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import math
import threading
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from selectgraph.observe._events import GraphEvent, RunCancelled, RunFailed, RunFinished, RunPaused

__all__ = [
    "DrainSummary",
    "ObserverWarning",
    "drain",
    "drain_events_for",
    "drain_sync",
    "enqueue",
    "run_ended",
]

logger = logging.getLogger("selectgraph")

AsyncHandler = Callable[[GraphEvent], Awaitable[Any]]

_TERMINAL = (RunFinished, RunFailed, RunCancelled, RunPaused)
_CLOSE = object()


class ObserverWarning(RuntimeWarning):
    """An observer raised; the run went on (the error is also logged)."""


@dataclass(frozen=True, slots=True)
class DrainSummary:
    """What :func:`drain` left undone."""

    undelivered: int = 0
    """Events still queued or being delivered when the timeout was reached."""
    timed_out: bool = False
    """Whether the timeout was reached before everything was delivered."""
    observer_errors: int = 0
    """Async observer calls that raised: since the previous :func:`drain` (for
    :func:`drain_events_for`, in that run's deliveries so far)."""

    @property
    def undelivered_count(self) -> int:
        """Alias of ``undelivered`` (OpenArmature's name)."""
        return self.undelivered

    @property
    def timeout_reached(self) -> bool:
        """Alias of ``timed_out`` (OpenArmature's name)."""
        return self.timed_out


class _DeliveryLoop:
    """The daemon thread whose event loop runs every async observer."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(ready.set)
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, name="selectgraph-observers", daemon=True)
        self.thread.start()
        ready.wait()


_loop_lock = threading.Lock()
_delivery_loop: _DeliveryLoop | None = None


def _get_loop() -> asyncio.AbstractEventLoop:
    global _delivery_loop
    if _delivery_loop is None:
        with _loop_lock:
            if _delivery_loop is None:
                _delivery_loop = _DeliveryLoop()
                atexit.register(_drain_at_exit)
    return _delivery_loop.loop


class _RunDelivery:
    """The queue of one run's events for its async observers, and the worker emptying it."""

    def __init__(
        self, run_id: str, loop: asyncio.AbstractEventLoop, after: _RunDelivery | None = None
    ) -> None:
        self.run_id = run_id
        self.after = after
        """An earlier queue of the same run id (paused, then resumed) to finish first."""
        self.loop = loop
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.queued = 0
        self.delivered = 0
        self.errors = 0
        self.finished: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.waiters: list[tuple[int, concurrent.futures.Future[None]]] = []
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = self.loop.create_task(self._work())

    async def _work(self) -> None:
        try:
            if self.after is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wrap_future(self.after.finished)
                self.after = None
            while True:
                item = await self.queue.get()
                if item is _CLOSE:
                    return
                handler, event = item
                try:
                    await handler(event)
                except Exception as exc:
                    self.errors += 1
                    _count_error()
                    _report(handler, event, exc)
                finally:
                    self.delivered += 1
                    self._wake()
        finally:
            _forget(self)
            self.waiters, waiting = [], self.waiters
            for _, future in waiting:
                if not future.done():
                    future.set_result(None)
            if not self.finished.done():
                self.finished.set_result(None)

    def _wake(self) -> None:
        if not self.waiters:
            return
        still = []
        for target, future in self.waiters:
            if self.delivered >= target:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((target, future))
        self.waiters = still

    def wait_for(self, target: int) -> concurrent.futures.Future[None]:
        """A future set once ``target`` events were delivered; callable from any thread."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()

        def register() -> None:
            if self.delivered >= target or self.finished.done():
                future.set_result(None)
            else:
                self.waiters.append((target, future))

        self.loop.call_soon_threadsafe(register)
        return future


def _report(handler: AsyncHandler, event: GraphEvent, exc: Exception) -> None:
    owner = getattr(handler, "__self__", handler)
    logger.error(
        "selectgraph: observer %r failed on %s", owner, event.type, exc_info=(type(exc), exc, None)
    )
    try:
        warnings.warn(
            f"observer {owner!r} raised {type(exc).__name__}: {exc} on {event.type.name}",
            ObserverWarning,
            stacklevel=2,
        )
    except Exception:  # warnings turned into errors must not stop the delivery worker
        logger.debug("selectgraph: the observer warning was raised as an error", exc_info=True)


_lock = threading.Lock()
_active: dict[str, _RunDelivery] = {}
"""Open queues by run id (a run's last event removes its queue from here)."""
_working: set[_RunDelivery] = set()
"""Queues whose worker has not finished, closed or not."""


_errors_since_drain = 0


def _count_error() -> None:
    global _errors_since_drain
    with _lock:
        _errors_since_drain += 1


def _take_errors() -> int:
    global _errors_since_drain
    with _lock:
        count, _errors_since_drain = _errors_since_drain, 0
    return count


def _forget(delivery: _RunDelivery) -> None:
    with _lock:
        _working.discard(delivery)
        if _active.get(delivery.run_id) is delivery:
            del _active[delivery.run_id]


def enqueue(handler: AsyncHandler, event: GraphEvent) -> None:
    """Queue ``event`` for ``handler`` on its run's delivery queue; never blocks."""
    loop = _get_loop()
    with _lock:
        delivery = _active.get(event.run_id)
        if delivery is None:
            # A resumed run keeps its run id: its queue waits for the paused run's.
            before = next((d for d in _working if d.run_id == event.run_id), None)
            delivery = _active[event.run_id] = _RunDelivery(event.run_id, loop, before)
            _working.add(delivery)
            loop.call_soon_threadsafe(delivery.start)
        delivery.queued += 1
    loop.call_soon_threadsafe(delivery.queue.put_nowait, (handler, event))


def run_ended(event: GraphEvent) -> None:
    """After every listener had the run's last event: close its queue behind what it holds.

    The recorder calls this once all listeners were called, so the close is
    posted after everything they queued (posts from one thread keep their order).
    Events other than the outermost graph's last one are ignored.
    """
    if not _active or type(event) not in _TERMINAL or event.namespace or event.branch is not None:
        return
    with _lock:
        delivery = _active.pop(event.run_id, None)
    if delivery is not None:
        delivery.loop.call_soon_threadsafe(delivery.queue.put_nowait, _CLOSE)


def _check_timeout(timeout: float | None) -> None:
    if timeout is None:
        return
    if not isinstance(timeout, int | float) or isinstance(timeout, bool):
        raise TypeError(f"timeout must be a number of seconds or None, got {timeout!r}")
    if math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout must be a non-negative number of seconds, got {timeout!r}")


def _all_pending() -> list[_RunDelivery]:
    with _lock:
        return list(_working)


async def _await_all(futures: list[concurrent.futures.Future[None]], timeout: float | None) -> bool:
    """Wait for ``futures``; whether every one finished in time."""
    if not futures:
        return True
    waiting = [asyncio.wrap_future(f) for f in futures]
    _done, pending = await asyncio.wait(waiting, timeout=timeout)
    for future in pending:
        future.cancel()
    return not pending


async def drain(timeout: float | None = None) -> DrainSummary:
    """Wait until every event queued so far reached every async observer, or ``timeout`` passes.

    Runs started after the call are not waited for. On timeout, the queues of
    the runs waited for are cancelled (their undelivered events counted and
    dropped), so the next runs start clean.

    Raises:
        ValueError: ``timeout`` is negative or NaN.
    """
    _check_timeout(timeout)
    deliveries = _all_pending()
    # What was queued when drain was called; a run still going on is not waited for.
    complete = await _await_all([d.wait_for(d.queued) for d in deliveries], timeout)
    if complete:
        return DrainSummary(observer_errors=_take_errors())
    undelivered = 0
    for delivery in deliveries:
        behind = delivery.queued - delivery.delivered
        undelivered += behind
        if behind and delivery.task is not None and not delivery.finished.done():
            delivery.loop.call_soon_threadsafe(delivery.task.cancel)
    return DrainSummary(undelivered=undelivered, timed_out=True, observer_errors=_take_errors())


async def drain_events_for(run_id: str, *, timeout: float | None = None) -> DrainSummary:
    """Wait until the events of run ``run_id`` queued so far were delivered, or ``timeout`` passes.

    Unlike :func:`drain`, a timeout cancels nothing: the run's queue goes on.

    Raises:
        ValueError: ``timeout`` is negative or NaN.
    """
    _check_timeout(timeout)
    deliveries = [d for d in _all_pending() if d.run_id == run_id]
    if not deliveries:
        return DrainSummary()
    futures = [delivery.wait_for(delivery.queued) for delivery in deliveries]
    complete = await _await_all(futures, timeout)
    undelivered = 0 if complete else sum(max(0, d.queued - d.delivered) for d in deliveries)
    return DrainSummary(
        undelivered=undelivered,
        timed_out=not complete,
        observer_errors=sum(d.errors for d in deliveries),
    )


def drain_sync(timeout: float | None = None) -> DrainSummary:
    """:func:`drain` for code without an event loop (scripts, ``atexit``)."""
    _check_timeout(timeout)
    return asyncio.run(drain(timeout))


def _drain_at_exit() -> None:
    # A short script's last events would otherwise die with the daemon thread.
    try:
        summary = drain_sync(5.0)
    except Exception:  # pragma: no cover - interpreter shutdown
        return
    if summary.undelivered:
        logger.warning(
            "selectgraph: %d observer events were not delivered before exit", summary.undelivered
        )
