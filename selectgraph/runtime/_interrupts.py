"""Interrupts in the loop: what a generator node asks of its run, and pausing at a question.

A generator node asks its run for interrupt ids, answers, its live generator and
its memoized steps (the ``InterruptHost`` protocol of ``nodes/_generator.py``).
"""

from __future__ import annotations

from typing import Any

from selectgraph.core._branch import BranchRef
from selectgraph.core._interrupts import Interrupt
from selectgraph.core._result import GraphResult
from selectgraph.observe._events import InterruptRaised, NodeFinished, RunPaused
from selectgraph.routing._parallel import Branches
from selectgraph.runtime._book import keep_paused
from selectgraph.runtime._book_codec import encode_book
from selectgraph.runtime._durable import encode_next
from selectgraph.runtime._results import RunResults
from selectgraph.state._views import StateView

__all__ = ["Interrupts"]


class Interrupts(RunResults):
    """The run as generator nodes see it (an ``InterruptHost``), and its pauses at questions."""

    def task_id(self, node: str, branch: BranchRef | None) -> str:
        """The stable id of the current visit of ``node``: the same after a restart."""
        task = f"{self.steps}:{node}"
        if branch is not None:
            task = f"{branch.task_id}/{task}"
        if self.namespace:
            task = "/".join(self.namespace) + "/" + task
        return task

    def interrupt_id(self, task: str, index: int) -> str:
        """The id of the ``index``-th yield of ``task``."""
        return f"{self.run_id}|{task}|{index}"

    def answer_for(self, interrupt_id: str) -> tuple[bool, Any]:
        """The answer given to ``interrupt_id``, if one was."""
        answers = self.ensure_book().answers
        if interrupt_id in answers:
            return True, answers[interrupt_id]
        return False, None

    def take_live(self, task: str) -> tuple[Any, StateView, Interrupt] | None:
        """The suspended generator of ``task``, if this process still has it."""
        return self.ensure_book().live.pop(task, None)

    def keep_live(self, task: str, generator: Any, view: StateView, interrupt: Interrupt) -> None:
        """Keep ``task``'s suspended generator and record its question as pending."""
        book = self.ensure_book()
        book.live[task] = (generator, view, interrupt)
        book.pending[interrupt.id] = interrupt

    def task_done(self, task: str) -> None:
        """``task``'s generator returned: forget its answers and memoized steps."""
        self.ensure_book().clear_task(task)

    def memo_for(self, task: str) -> dict[str, Any]:
        """The results of ``task``'s ``context.once()`` steps."""
        return self.ensure_book().memo.setdefault(task, {})

    def drop_live(self) -> None:
        """Close the generators kept for an in-process resume (the run will replay instead)."""
        book = self.book
        if book is None:
            return
        for generator, _, _ in book.live.values():
            close = getattr(generator, "close", None)
            if close is not None and not hasattr(generator, "aclose"):
                close()
        book.live.clear()

    def _unfinished(self, name: str, in_fan_out: bool, interrupt_id: str) -> list[Any]:
        """Where a run paused inside ``name`` continues; the unfinished visit is rolled back."""
        if in_fan_out:
            return encode_next("after", self._fan_out_source)
        self.recorder.record(
            NodeFinished,
            self.steps,
            name,
            self._visits.get(name, 1),
            0.0,
            "interrupted",
            1,
            interrupt_id,
        )
        self._roll_back(name)
        return [name]

    def _pause_child(self, name: str, in_fan_out: bool) -> None:
        """A subgraph's run paused: keep it, so the resumed parent continues it, not restarts it."""
        self._resume_next = self._unfinished(name, in_fan_out, "")
        if self.child_key is not None:
            self.ensure_book().children[self.child_key] = self

    async def _interrupted(
        self, interrupt: Interrupt, name: str, branches: Branches | None
    ) -> GraphResult:
        """A generator node asked a question: checkpoint, and return a paused result."""
        book = self.ensure_book()
        pending = tuple(book.pending.values()) or (interrupt,)
        # The node did not complete: its step and visit are counted again on resume.
        next_ = self._unfinished(name, branches is not None, interrupt.id)
        self._resume_branches = branches
        for item in pending:
            where = item.branch
            self.recorder.record(
                InterruptRaised,
                self.steps,
                item.node,
                item.id,
                item.prompt,
                where.label if where is not None else None,
                where.index if where is not None else None,
            )
        self._interrupts = pending
        self._resume_next = next_
        durable = self.durable
        if durable is not None:
            records, extra, writes = self.interrupt_records(durable.serializer, pending)
            if branches is not None:  # checked when a restarted run rebuilds the fan-out
                extra["fan_out"] = {"source": name, "branches": len(branches.targets)}
            checkpoint = await durable.write(
                self, "interrupt", next_, interrupts=records, extra=extra, pending_writes=writes
            )
            await durable.flush(self)
            durable.close()
            self._checkpoint_id = checkpoint.checkpoint_id
        self.state.current_node = None
        result = self._build_result("interrupted", "degraded" if self._degraded else "clean")
        keep_paused(self, [item.id for item in pending])
        self.recorder.record_delivering(
            RunPaused,
            self.steps,
            "interrupt",
            tuple(n if isinstance(n, str) else n["after"] for n in next_),
            self._checkpoint_id,
            result=result,
        )
        if durable is not None:
            await durable.log_tail(self)
        return result

    def interrupt_records(
        self, serializer: Any, pending: tuple[Interrupt, ...]
    ) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, list[Any]]]:
        """A paused run's interrupts, metadata (memo, paused subgraphs) and pending writes.

        The interrupts are the pending ones plus the answered ones of nodes not done.
        """
        return encode_book(self.ensure_book(), serializer, pending)
