"""Branches: run a fan-out's branches at once and apply its failure mode.

A branch is a unit of work with an identity (its index and label), its own
pending writes and its own events; this module only decides how branches
run side by side. In an event loop each branch is a task, and a synchronous
node inside one runs on a worker thread so blocking nodes really overlap.
A run driven without an event loop (``run()`` of an all-synchronous graph)
drives each branch on a worker thread instead.

A branch task starts eagerly (:func:`start_eagerly`): Python 3.12 has
``asyncio.eager_task_factory``, but on 3.11 a new task's first step waits for
the loop's next turn, so a branch that never suspends (the usual Scatter
branch) would still pay for being scheduled, stepped from the loop and reported
done through a callback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from asyncio import tasks as _asyncio_tasks
from collections import deque
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from selectgraph.core._branch import BranchRef
from selectgraph.routing._parallel import FailureMode

__all__ = [
    "CANCELLED",
    "BranchAborted",
    "BranchTask",
    "drive",
    "run_blocking",
    "run_concurrently",
    "run_on_threads",
    "start_eagerly",
]

T = TypeVar("T")

DEFAULT_THREADS: Final = 64
"""Worker threads shared by synchronous nodes running inside branches."""


class _Cancelled:
    __slots__ = ()

    def __repr__(self) -> str:
        return "CANCELLED"


CANCELLED: Final = _Cancelled()
"""The outcome of a branch that fail_all cancelled before it finished."""


class BranchAborted(Exception):
    """Raised in a branch that fail_all gave up on, before it starts another node."""


@dataclass(frozen=True, slots=True)
class BranchTask:
    """One branch to run: where it starts and what it sees on top of the parent."""

    ref: BranchRef
    """Its identity."""
    node: str
    """The node it starts at."""
    patch: Mapping[str, Any] | None = None
    """``data`` values laid over the parent's (Scatter's state_patch)."""


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a synchronous node or graph) without a loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError(
        "a synchronous node awaited something that needs an event loop; use arun()"
    )  # pragma: no cover - synchronous adapters complete without suspending


class _NotStarted(Exception):
    """A branch of a ``fail_all`` fan-out that did not start: a sibling had failed."""


def _drive_call(call: Callable[[BranchTask], Coroutine[Any, Any, T]], task: BranchTask) -> T:
    return drive(call(task))


_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _shared_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=DEFAULT_THREADS, thread_name_prefix="selectgraph-branch"
                )
    return _pool


async def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Await a synchronous node's coroutine on a worker thread, so siblings keep running."""
    loop = asyncio.get_running_loop()
    # The run's context (its budget and cancellation control) goes with the node.
    context = contextvars.copy_context()
    return await loop.run_in_executor(_shared_pool(), context.run, drive, coroutine)


_enter_task = _asyncio_tasks._enter_task
_leave_task = _asyncio_tasks._leave_task


def start_eagerly(
    loop: asyncio.AbstractEventLoop,
    coroutine: Coroutine[Any, Any, T],
    parent: asyncio.Task[Any] | None,
) -> asyncio.Task[T]:
    """A task for ``coroutine`` whose first step has already run, with the task as current.

    The task is made as usual; its first step is taken out of the loop's ready
    queue and run at once, in the task's context, with the new task as the
    current one. So inside a node ``asyncio.current_task()`` is the branch's own
    task from its first line and ``asyncio.timeout()`` cancels that task only, as
    under a normal start; a branch that finishes in that step is a done task
    before the fan-out awaits anything. This relies on the standard loop's ready
    queue (``BaseEventLoop._ready``) ending with the step the task scheduled; on
    another loop (uvloop) or under a task factory that schedules otherwise, the
    task starts as usual.

    Args:
        loop: The running loop.
        coroutine: What the task runs.
        parent: The calling task (``asyncio.current_task()``), not current while
            the new task takes its first step; ``None`` starts the task as usual.
    """
    ready = getattr(loop, "_ready", None)
    if parent is None or type(ready) is not deque:
        return loop.create_task(coroutine)
    # Made as the loop's create_task makes it, without its Python wrapper, unless a
    # task factory decides how tasks are made.
    task = (
        asyncio.Task(coroutine, loop=loop)
        if loop.get_task_factory() is None
        else loop.create_task(coroutine)
    )
    if not ready:
        return task
    handle = ready[-1]
    owner: object = getattr(getattr(handle, "_callback", None), "__self__", None)
    if owner is not task:
        return task  # not the step this task scheduled: the loop runs it
    ready.pop()
    _leave_task(loop, parent)
    try:
        # The task's step in the task's context, as the loop runs it (Handle._run only
        # adds reporting of errors, which a task's step keeps to itself).
        handle._context.run(handle._callback, *handle._args)
    finally:
        _enter_task(loop, parent)
    return task


Outcome = Any
"""A branch's result, the exception it raised, or :data:`CANCELLED`."""


async def run_concurrently(
    tasks: Sequence[BranchTask],
    call: Callable[[BranchTask], Coroutine[Any, Any, T]],
    *,
    failure_mode: FailureMode,
    limit: int | None,
    on_abort: Callable[[], None] | None = None,
) -> list[Outcome]:
    """Run ``call(task)`` for every task as asyncio tasks; outcomes in task order.

    Under ``fail_all`` the first failure (lowest index among those that failed
    together) cancels every sibling still running, and this returns only after
    they have really stopped. If the caller is cancelled, every branch is
    cancelled and awaited before the cancellation propagates.
    """
    if limit is not None and limit < len(tasks):
        gate = asyncio.Semaphore(limit)
        failed = False

        async def gated(task: BranchTask) -> T:
            nonlocal failed
            async with gate:
                if failed:  # fail_all: nothing starts after a branch failed
                    raise asyncio.CancelledError
                try:
                    return await call(task)
                except Exception:
                    failed = failure_mode == "fail_all"
                    raise

        runner: Callable[[BranchTask], Coroutine[Any, Any, T]] = gated
    else:
        runner = call
    loop = asyncio.get_running_loop()
    parent = asyncio.current_task(loop)
    # Each branch runs up to its first suspension here; most quick ones finish.
    running = [start_eagerly(loop, runner(task), parent) for task in tasks]
    try:
        pending: Collection[asyncio.Task[T]] = [t for t in running if not t.done()]
        if failure_mode == "fail_all":
            if pending and not any(_failed(t) for t in running):
                _done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            if pending:
                if on_abort is not None:
                    on_abort()  # work on threads cannot be cancelled: it stops at its next node
                for future in pending:
                    future.cancel()
                await asyncio.wait(pending)
        elif pending:
            await asyncio.wait(pending)
    except asyncio.CancelledError:
        if on_abort is not None:
            on_abort()
        for future in running:
            future.cancel()
        await asyncio.wait(running)
        for future in running:
            if not future.cancelled():
                future.exception()  # retrieved, so asyncio does not log it
        raise
    outcomes: list[Outcome] = []
    for future in running:
        if future.cancelled():
            outcomes.append(CANCELLED)
        else:
            error = future.exception()
            outcomes.append(error if error is not None else future.result())
    return outcomes


def _failed(task: asyncio.Task[Any]) -> bool:
    """Whether ``task`` is done with an exception (as FIRST_EXCEPTION counts: not cancelled)."""
    return task.done() and not task.cancelled() and task.exception() is not None


def run_on_threads(
    tasks: Sequence[BranchTask],
    call: Callable[[BranchTask], Coroutine[Any, Any, T]],
    *,
    failure_mode: FailureMode,
    limit: int | None,
    on_abort: Callable[[], None] | None = None,
) -> list[Outcome]:
    """Like :func:`run_concurrently` for a run driven without an event loop: one thread a branch.

    Under ``fail_all`` branches that have not started are cancelled, and
    ``on_abort`` tells the running ones to stop before their next node; a
    thread already running a node cannot be stopped: that node finishes, and
    since the fan-out failed, what it wrote is discarded with the rest.
    """
    workers = min(len(tasks), limit or DEFAULT_THREADS) or 1
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=workers, thread_name_prefix="selectgraph-branch"
    ) as pool:
        # Each coroutine is made on its thread: one that never starts is never made.
        # Each thread runs in a copy of the run's context (its budget and cancellation).
        failed = threading.Event() if failure_mode == "fail_all" else None

        def start(task: BranchTask) -> T:
            if failed is not None and failed.is_set():
                raise _NotStarted  # fail_all: nothing starts after a branch failed
            try:
                return _drive_call(call, task)
            except Exception:
                if failed is not None:
                    failed.set()
                raise

        futures = [pool.submit(contextvars.copy_context().run, start, task) for task in tasks]
        mode = (
            concurrent.futures.FIRST_EXCEPTION
            if failure_mode == "fail_all"
            else concurrent.futures.ALL_COMPLETED
        )
        _, pending = concurrent.futures.wait(futures, return_when=mode)
        if pending and on_abort is not None:
            on_abort()  # running branches stop before their next node
        for future in pending:
            future.cancel()
    outcomes: list[Outcome] = []
    for future in futures:
        if future.cancelled():
            outcomes.append(CANCELLED)
            continue
        error = future.exception()
        if isinstance(error, _NotStarted):
            outcomes.append(CANCELLED)
            continue
        outcomes.append(error if error is not None else future.result())
    return outcomes
