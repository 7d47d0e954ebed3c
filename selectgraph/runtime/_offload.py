"""A whole run on a worker thread: how ``arun()`` and ``astream()`` run an all-synchronous graph.

A graph whose nodes and edges are all synchronous needs no event loop: ``run()``
drives its step loop directly. Under ``arun()`` calling those nodes on the loop's
thread would stall every other run and stream on the loop while one blocks (a
local model, a request, ``time.sleep``); sending each node to a thread costs a
thread hop per step (about a hundred microseconds). So the whole run is driven
on one worker thread, exactly as ``run()`` drives it, and the loop awaits it:
one hop per run.

The thread comes from a set of worker threads kept for whole runs: starting a
thread for each run costs about as much as a small run itself. A run never waits
for one (a node may start other runs, which need threads of their own, so a
bounded pool could leave them none): an idle worker takes the run, else a new
worker starts. A worker idle for ``IDLE_SECONDS`` ends, and idle workers end
when the interpreter exits.

Cancelling the awaiting task stops the run at its next node boundary (a thread
cannot be interrupted mid-node): the run raises CancelledError there, saves its
``cancel`` checkpoint as a cancelled run does, and only then does the
cancellation reach the caller, so nothing keeps running behind its back.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextvars import ContextVar
from typing import Any, Final, TypeVar

from selectgraph.runtime._branches import drive

__all__ = ["current_halt", "halting", "run_elsewhere"]

T = TypeVar("T")

_halt: ContextVar[threading.Event | None] = ContextVar("selectgraph_halt", default=None)


IDLE_SECONDS: Final = 30.0
"""How long a worker thread waits for another run before it ends."""

Job = Callable[[], None]


class _Workers:
    """Threads for whole runs: an idle one takes a run, else a new one starts (no bound)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._idle = 0
        """Workers waiting for a job, less the jobs queued for them."""
        self._closing = False

    def submit(self, job: Job) -> None:
        """Run ``job`` on a worker thread now: an idle one, else a new one."""
        with self._lock:
            if self._idle > 0 and not self._closing:
                self._idle -= 1
                self._jobs.put(job)
                return
        threading.Thread(target=self._work, args=(job,), name="selectgraph-run").start()

    def _work(self, job: Job | None) -> None:
        while job is not None:
            job()
            job = None  # the run's objects go now, not when the next run comes
            with self._lock:
                if self._closing:
                    return
                self._idle += 1
            try:
                job = self._jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    try:  # a run handed over as the wait ended is this worker's
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return

    def close(self) -> None:
        """At interpreter exit: idle workers end now; busy ones end after their run."""
        with self._lock:
            self._closing = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._jobs.put(None)


_workers = _Workers()


def _close_workers() -> None:
    _workers.close()


def _forget_workers() -> None:
    """In a forked child: the parent's workers are not there; its own start afresh."""
    global _workers
    _workers = _Workers()


# Worker threads are not daemons (a run in progress finishes at exit, as it would on a
# thread of its own); idle ones are told to end before the interpreter joins them.
threading._register_atexit(_close_workers)  # type: ignore[attr-defined]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def current_halt() -> threading.Event | None:
    """Set when the task awaiting this (offloaded) run was cancelled; None in other runs."""
    return _halt.get()


@contextlib.contextmanager
def halting(halt: threading.Event) -> Iterator[None]:
    """Runs made inside the block (and their waits) stop once ``halt`` is set."""
    token = _halt.set(halt)
    try:
        yield
    finally:
        _halt.reset(token)


async def run_elsewhere(run: Coroutine[Any, Any, T], halt: threading.Event) -> T:
    """Drive ``run`` (a run that never suspends, made under :func:`halting`) on a thread.

    Each run gets a thread of its own while it runs (an idle worker's or a new one)
    rather than waiting for one of a bounded pool: a node may start other runs that
    need threads, and a pool held by whole runs could leave them none.

    Raises:
        asyncio.CancelledError: the caller was cancelled; the run stopped first.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    with halting(halt):
        context = contextvars.copy_context()  # the run's budgets and halt go with it

    def settle(value: Any, error: BaseException | None) -> None:  # on the loop's thread
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def body() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(drive, run)
        except BaseException as exc:  # handed to the awaiting task, raised there
            error = exc
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits it any more
            loop.call_soon_threadsafe(settle, value, error)

    _workers.submit(body)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        halt.set()  # the run stops before its next node and checkpoints that
        with contextlib.suppress(BaseException):  # its cancellation is the caller's to raise
            await asyncio.shield(done)
        raise
