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
import contextlib
import contextvars
import os
import queue
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


Job = Callable[[], None]

IDLE_SECONDS = 30.0
"""How long a worker thread waits for another job before it ends."""


class Workers:
    """Worker threads that take jobs as they come: an idle one, else a new one.

    Lighter than a ``ThreadPoolExecutor`` for a job the event loop awaits (no
    futures of its own, no idle semaphore): a hop costs about half as much. With
    ``limit``, jobs beyond it wait for a busy worker; without, a job never waits
    (whole runs, whose nodes may start runs of their own). A worker idle for
    ``IDLE_SECONDS`` ends; idle workers end at interpreter exit (workers are not
    daemons: a job in progress finishes); a forked child starts its own.
    """

    def __init__(self, name: str, limit: int | None = None) -> None:
        self.name = name
        self.limit = limit
        self._reset()
        _every_workers.append(self)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._idle = 0
        """Workers waiting for a job, less the jobs queued (negative: jobs wait)."""
        self._threads = 0
        self._closing = False

    def submit(self, job: Job) -> None:
        """Run ``job`` on a worker thread: an idle one, else a new one, else (at the limit) next."""
        with self._lock:
            if self._idle <= 0 and (self.limit is None or self._threads < self.limit):
                self._threads += 1
            else:
                self._idle -= 1
                self._jobs.put(job)
                return
        threading.Thread(target=self._work, args=(job,), name=self.name).start()

    def _work(self, job: Job | None) -> None:
        while job is not None:
            job()
            job = None  # the job's objects go now, not when the next job comes
            with self._lock:
                if self._closing:
                    self._threads -= 1
                    return
                self._idle += 1
            try:
                job = self._jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    try:  # a job handed over as the wait ended is this worker's
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        self._threads -= 1
                        return
        with self._lock:
            self._threads -= 1

    def close(self) -> None:
        """Idle workers end now; busy ones end after their job (at interpreter exit)."""
        with self._lock:
            self._closing = True
            idle = max(self._idle, 0)
            self._idle -= idle
        for _ in range(idle):
            self._jobs.put(None)


_every_workers: list[Workers] = []


def _close_all() -> None:
    for workers in _every_workers:
        workers.close()


def _forget_all() -> None:
    for workers in _every_workers:
        workers._reset()  # the parent's threads are not in the forked child


threading._register_atexit(_close_all)  # type: ignore[attr-defined]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_all)

_blocking = Workers("selectgraph-branch", DEFAULT_THREADS)


def _settle(done: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    """On the loop's thread: hand a job's outcome to the task awaiting it."""
    if done.cancelled():
        return
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(value)


async def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Await a synchronous node's coroutine on a worker thread, so siblings keep running."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    # The run's context (its budget and cancellation control) goes with the node.
    context = contextvars.copy_context()

    def job() -> None:
        if done.cancelled():  # the caller gave up before a worker was free
            coroutine.close()
            return
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(drive, coroutine)
        except BaseException as exc:  # raised in the awaiting task
            error = exc
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits it any more
            loop.call_soon_threadsafe(_settle, done, value, error)
        del error  # its traceback holds this frame

    _blocking.submit(job)
    return await done


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
