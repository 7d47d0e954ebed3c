"""Run control: budgets checked before each model call, and cooperative cancellation.

A run publishes a :class:`RunControl` in a context variable for as long as it
runs. Agents check it before every model call (``agents/_call_budget.py``), so
agents inside subgraphs, parallel branches and supervisors are covered without
being told: branches run in tasks or threads that copy the run's context.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Literal, TypeVar

from selectgraph.core._usage import Usage

__all__ = [
    "Budget",
    "BudgetKind",
    "BudgetStop",
    "CancellationToken",
    "RunCancelledByToken",
    "RunControl",
    "TOKEN_CANCEL",
    "cancellable",
    "current_control",
]

BudgetKind = Literal["token_budget", "cost_budget", "time_budget"]
T = TypeVar("T")


class CancellationToken:
    """Stops the runs it is given to: ``token.cancel()`` from any thread or task.

    A run checks the token before each node and before each model call, and
    ``cancel()`` also cancels the run's task at once, so a model request in
    flight (its HTTP call) and running parallel branches stop too. The run
    returns a result with ``stop_reason="cancelled"``; a checkpoint is saved
    when it has a store. A token stays cancelled: use a new one for a new run.
    """

    __slots__ = ("_callbacks", "_event", "_lock", "reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self.reason = ""
        """What ``cancel()`` was given."""

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._event.is_set()

    def is_set(self) -> bool:
        """Same as :attr:`cancelled` (an Event's spelling)."""
        return self._event.is_set()

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel every run holding this token; calling it again does nothing."""
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when cancelled (at once if already); returns an unsubscribe."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def unsubscribe() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return unsubscribe
        callback()
        return lambda: None

    def __repr__(self) -> str:
        return f"CancellationToken(cancelled={self.cancelled})"


@dataclass(frozen=True, slots=True)
class Budget:
    """A run's limits; ``None`` means no limit."""

    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    max_duration: float | None = None
    """Seconds of wall-clock time."""

    def __post_init__(self) -> None:
        for name in ("max_total_tokens", "max_cost_usd", "max_duration"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
            ):
                raise ValueError(f"{name} must be a positive number or None, got {value!r}")

    @property
    def empty(self) -> bool:
        """Whether no limit is set."""
        return (
            self.max_total_tokens is None
            and self.max_cost_usd is None
            and self.max_duration is None
        )


class BudgetStop(BaseException):
    """Raised where a budget refused a call; the outermost run turns it into a clean stop.

    A BaseException so that no node error policy, retry or on_failure edge
    treats it as the node's failure.
    """

    def __init__(self, kind: BudgetKind, limit: float, used: float, needed: float) -> None:
        super().__init__(f"{kind}: limit {limit}, used {used}, the next call needs {needed}")
        self.kind: BudgetKind = kind
        self.limit = limit
        self.used = used
        self.needed = needed


class RunCancelledByToken(BaseException):
    """Raised at a check point when the run's CancellationToken was cancelled."""


class RunControl:
    """What one run's budgets and token need while it runs (shared by its branches)."""

    __slots__ = ("budget", "checked", "started", "token", "usage")

    def __init__(self, budget: Budget, token: CancellationToken | None, usage: Usage) -> None:
        self.budget = budget
        self.token = token
        self.checked = token is not None or not budget.empty
        """Whether there is anything to check (a budget or a token)."""
        self.started = perf_counter()
        self.usage = usage
        """Model usage so far: what the run had when it started, plus every call since."""

    @property
    def elapsed(self) -> float:
        """Seconds since the run started."""
        return perf_counter() - self.started

    def check_time(self) -> None:
        """Raise RunCancelledByToken if cancelled, BudgetStop once the time budget is spent."""
        token = self.token
        if token is not None and token.cancelled:
            raise RunCancelledByToken(token.reason)
        limit = self.budget.max_duration
        if limit is not None:
            elapsed = self.elapsed
            if elapsed >= limit:
                raise BudgetStop("time_budget", limit, elapsed, 0.0)

    def refusal(self) -> str | None:
        """At a step boundary: why the run must stop now, or ``None``.

        ``"cancelled"``, or the budget already spent (``"time_budget"``,
        ``"token_budget"``, ``"cost_budget"``).
        """
        token = self.token
        if token is not None and token.cancelled:
            return "cancelled"
        budget = self.budget
        if budget.max_duration is not None and self.elapsed >= budget.max_duration:
            return "time_budget"
        used = self.usage
        if budget.max_total_tokens is not None and used.total_tokens >= budget.max_total_tokens:
            return "token_budget"
        if budget.max_cost_usd is not None and used.cost_usd >= budget.max_cost_usd:
            return "cost_budget"
        return None

    def spent(self, kind: str) -> tuple[float, float]:
        """The limit and what was used of the budget ``kind``."""
        budget = self.budget
        if kind == "time_budget":
            return budget.max_duration or 0.0, self.elapsed
        if kind == "cost_budget":
            return budget.max_cost_usd or 0.0, self.usage.cost_usd
        return float(budget.max_total_tokens or 0), float(self.usage.total_tokens)

    def add(self, usage: Usage) -> None:
        """Count a finished call's usage."""
        with _adding:
            self.usage = self.usage + usage


# One lock for every run's usage (a sum, held for an addition): a lock per run would
# cost each of thousands of concurrent runs its memory for calls that rarely collide.
_adding = threading.Lock()

_current: ContextVar[RunControl | None] = ContextVar("selectgraph_run_control", default=None)

_NONE_BEFORE: Any = object()
"""What :func:`enter` returns when no control was published before it."""


def current_control() -> RunControl | None:
    """The control of the run this code runs in, if it has budgets or a token."""
    return _current.get()


def enter(control: RunControl) -> Any:
    """Publish ``control`` for the current context; returns what :func:`leave` needs.

    That is the control published before (never ``None``), not the ContextVar's
    token: a run does not keep a token alive for as long as it runs.
    """
    before = _current.get()
    _current.set(control)
    return _NONE_BEFORE if before is None else before


def leave(before: Any) -> None:
    """Undo :func:`enter`, given what it returned (``None``: nothing was entered)."""
    if before is not None:
        _current.set(None if before is _NONE_BEFORE else before)


TOKEN_CANCEL = "selectgraph: CancellationToken"
"""The message of the cancellation a token sends, so the run knows it from any other."""


async def cancellable(coroutine: Coroutine[Any, Any, T], token: CancellationToken) -> T:
    """Run ``coroutine`` in a task of its own that ``token.cancel()`` cancels.

    Only that task is ever cancelled, never the caller's: once the run is over,
    a late cancel finds a finished task and does nothing.
    """
    task = asyncio.ensure_future(coroutine)
    loop = task.get_loop()

    def cancel() -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: the run is over
            loop.call_soon_threadsafe(task.cancel, TOKEN_CANCEL)

    unsubscribe = token.on_cancel(cancel)
    try:
        return await task
    finally:
        unsubscribe()
