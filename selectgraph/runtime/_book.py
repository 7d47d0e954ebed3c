"""The interrupt book: a run's questions, answers, live generators and memoized steps.

This module also keeps the registry of runs paused in this process.

A generator node that yields an InterruptRequest is kept suspended in the
book (``live``) so that, in this process, an answer continues it at its
yield; the book also holds what a checkpoint needs to replay it elsewhere
(answers given, ``context.once`` results, paused subgraphs, branches that
finished while a sibling waited).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from selectgraph.core._interrupts import Interrupt
from selectgraph.state._views import StateView

__all__ = ["InterruptBook", "Resumable", "forget_paused", "keep_paused", "paused_run"]


@dataclass(slots=True)
class InterruptBook:
    """A run's interrupts: answers given, questions pending, live generators and memoized steps.

    Shared by a run, its branches and its subgraph runs, so a generator node
    anywhere in the run finds its answers by interrupt id.
    """

    answers: dict[str, Any] = field(default_factory=dict)
    """Interrupt id -> the answer (decoded)."""
    pending: dict[str, Interrupt] = field(default_factory=dict)
    """Interrupts raised and not yet answered, by id."""
    live: dict[str, tuple[Any, StateView, Interrupt]] = field(default_factory=dict)
    """Task id -> its suspended generator, view and question (this process only)."""
    memo: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Task id -> results of its ``context.once()`` steps."""
    children: dict[str, Any] = field(default_factory=dict)
    """Parent task id -> the paused run of a subgraph node (a Run in the pausing process,
    else its saved state, counters and next): the resumed node continues it."""
    branches_done: dict[str, Any] = field(default_factory=dict)
    """``"<step>:<branch task id>"`` -> BranchWrites of branches that finished while a
    sibling waited for an answer: the resumed fan-out uses them instead of re-running."""

    def holds_anything(self) -> bool:
        """Whether a checkpoint must carry part of this book."""
        return bool(
            self.answers or self.pending or self.memo or self.branches_done or self.children
        )

    def clear_task(self, task: str) -> None:
        """Forget a task that completed: its answers are consumed, its memo spent."""
        self.memo.pop(task, None)
        self.live.pop(task, None)
        prefix = f"|{task}|"
        for key in [k for k in self.answers if prefix in k]:
            del self.answers[key]


class Resumable(Protocol):
    """A paused run, as the registry keeps it."""

    def drop_live(self) -> None:
        """Close the generators kept for an in-process resume."""
        ...


_MAX_PAUSED: Final = 1024
"""Paused runs kept in memory for an exact-yield resume; older ones fall back to replay."""
_paused: OrderedDict[str, Resumable] = OrderedDict()
_paused_lock = threading.Lock()


def keep_paused(run: Resumable, interrupt_ids: list[str]) -> None:
    """Remember a paused run by each of its interrupt ids (this process only)."""
    with _paused_lock:
        for interrupt_id in interrupt_ids:
            _paused[interrupt_id] = run
            _paused.move_to_end(interrupt_id)
        while len(_paused) > _MAX_PAUSED:
            _, old = _paused.popitem(last=False)
            if old not in _paused.values():
                old.drop_live()


def paused_run(interrupt_id: str) -> Resumable | None:
    """The paused run waiting on ``interrupt_id`` in this process, if still kept."""
    with _paused_lock:
        return _paused.get(interrupt_id)


def forget_paused(run: Resumable) -> None:
    """Drop every entry of ``run`` (it resumed, or its live state went stale)."""
    with _paused_lock:
        for key in [k for k, v in _paused.items() if v is run]:
            del _paused[key]
