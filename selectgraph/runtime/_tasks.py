"""Task runners: the seam through which an executor other than this process runs a run's tasks.

A run's unit of work is a task: one node of the run (its call, retries included,
giving a NodeOutput), one branch of a fan-out (its whole walk, giving its
BranchWrites) or one llm_decide edge's decision. In-process, the step loop
calls them directly. An executor that
makes them durable (the DBOS executor makes each a workflow step) installs a
:class:`TaskRunner` for the run with :func:`running_tasks_with`; the loop then
hands it each task, and merging, routing and events stay the loop's own, so
the same graph runs the same way under either.

Only the outermost run uses the runner: a task runs with none installed, so the
subgraphs and branches inside it run plainly, as part of their task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from selectgraph.core._sentinels import EndType
from selectgraph.core._usage import NO_USAGE, Usage

if TYPE_CHECKING:
    from selectgraph.core._branch import BranchRef
    from selectgraph.nodes._spec import NodeSpec
    from selectgraph.routing._edges import Edge, RouteDecision
    from selectgraph.runtime._book import InterruptBook
    from selectgraph.runtime._branches import BranchTask
    from selectgraph.runtime._fanout import FanOutPlan
    from selectgraph.runtime._join import BranchWrites
    from selectgraph.state._output import NodeOutput

__all__ = ["BranchTally", "TaskHost", "TaskRunner", "current_task_runner", "running_tasks_with"]


@dataclass(slots=True, kw_only=True)
class BranchTally:
    """What a branch's walk counts into its run besides its writes.

    A ``BranchRun`` carries the same attributes; a runner that replays a
    recorded branch stands this in for the walk it did not repeat.
    """

    usage: Usage = NO_USAGE
    ran: dict[str, int] = field(default_factory=dict)
    """Visits of each node in the branch."""
    steps: int = 0
    """The step counter where the branch stopped."""
    degraded: bool = False
    hit_limit: bool = False
    """Whether the branch stopped at max_steps."""
    stopped_at: str | EndType | None = None
    """Where it would have gone next, when it hit the limit."""
    branch: BranchRef | None = None
    """The branch it stands for."""


class TaskHost(Protocol):
    """What a task runner may read and set of the run whose tasks it runs."""

    book: InterruptBook | None
    """The run's interrupt book, when it has one."""
    attempts: int
    """Attempts the node being finished took (a replayed node's recorded count)."""

    def ensure_book(self) -> InterruptBook:
        """The run's interrupt book, made if it has none."""
        ...


class TaskRunner(Protocol):
    """Runs a run's tasks on behalf of the step loop."""

    async def node(
        self,
        run: TaskHost,
        spec: NodeSpec,
        visit: int,
        call: Callable[[], Awaitable[NodeOutput]],
    ) -> NodeOutput:
        """The output of one visit of ``spec``; ``call()`` runs it (retries included).

        Raises what the node raised (the loop's error policy applies), or
        ``NodeInterrupt`` when it asked a question.
        """
        ...

    def fan_out(self, run: TaskHost, plan: FanOutPlan) -> None:
        """A fan-out is about to start ``plan``'s branches (in the loop, before any runs).

        The place to fix anything per branch that must not depend on when each
        starts (the DBOS runner draws every branch's step id here, in order).
        """
        ...

    async def branch(
        self,
        run: TaskHost,
        task: BranchTask,
        body: Callable[[], Awaitable[BranchWrites]],
        walks: list[Any],
    ) -> BranchWrites:
        """One branch's writes; ``body()`` walks it, adding its walk to ``walks``.

        A runner that does not call ``body`` adds a :class:`BranchTally` to
        ``walks`` instead. Raises what the branch raised, or ``NodeInterrupt``
        when it asked a question.
        """
        ...

    async def decision(
        self, run: TaskHost, edge: Edge, pending: Awaitable[RouteDecision]
    ) -> RouteDecision:
        """An llm_decide edge's decision; ``pending`` is its decider's call, not yet awaited."""
        ...


_runner: ContextVar[TaskRunner | None] = ContextVar("selectgraph_task_runner", default=None)


def current_task_runner() -> TaskRunner | None:
    """The runner a run started now uses (None: the step loop runs its tasks itself)."""
    return _runner.get()


@contextmanager
def running_tasks_with(runner: TaskRunner | None) -> Iterator[None]:
    """Runs started inside the block hand their tasks to ``runner`` (None: to nobody)."""
    token = _runner.set(runner)
    try:
        yield
    finally:
        _runner.reset(token)
