"""A whole run on a worker thread: how ``arun()`` and ``astream()`` run an all-synchronous graph.

A graph whose nodes and edges are all synchronous needs no event loop: ``run()``
drives its step loop directly. Under ``arun()`` calling those nodes on the loop's
thread would stall every other run and stream on the loop while one blocks (a
local model, a request, ``time.sleep``); sending each node to a thread costs a
thread hop per step (about a hundred microseconds). So the whole run is driven
on one worker thread, exactly as ``run()`` drives it, and the loop awaits it:
one hop per run.

The thread comes from a set of worker threads kept for whole runs (``Workers``):
starting a thread for each run costs about as much as a small run itself. A run
never waits for one (a node may start other runs, which need threads of their
own, so a bounded pool could leave them none): an idle worker takes the run, else
a new worker starts. A worker idle for ``IDLE_SECONDS`` ends, and idle workers end
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
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from selectgraph.runtime._branches import Workers, drive

__all__ = ["current_halt", "halting", "run_elsewhere", "start_elsewhere"]

T = TypeVar("T")

_halt: ContextVar[threading.Event | None] = ContextVar("selectgraph_halt", default=None)


# Each run takes a worker thread at once (no limit): a node may start other runs that
# need threads, and a pool held by whole runs could leave them none.
_workers = Workers("selectgraph-run")


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


def start_elsewhere(
    run: Coroutine[Any, Any, T],
    halt: threading.Event,
    done: Callable[[T | None, BaseException | None], None],
) -> None:
    """Drive ``run`` (made under :func:`halting`) on a worker thread; then ``done(value, error)``.

    ``done`` is called on that thread, once, with the run's value or what it raised.
    """
    with halting(halt):
        context = contextvars.copy_context()  # the run's budgets and halt go with it

    def body() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(drive, run)
        except BaseException as exc:  # handed to whoever waits for the run
            error = exc
        done(value, error)

    _workers.submit(body)


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

    def settle(value: Any, error: BaseException | None) -> None:  # on the loop's thread
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def ended(value: Any, error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits it any more
            loop.call_soon_threadsafe(settle, value, error)

    start_elsewhere(run, halt, ended)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        halt.set()  # the run stops before its next node and checkpoints that
        with contextlib.suppress(BaseException):  # its cancellation is the caller's to raise
            await asyncio.shield(done)
        raise
