"""Run state: what one execution of a graph holds — its state, counters and collaborators.

``RunState`` is the base the parts of the step loop build on (``_results``,
``_node_call``, ``_routing_step``, ``_detection``, ``_interrupts``, ``_stops``,
``_fan_out_step``, and the loop itself in ``_walk``); each part is a class of its
own module adding the methods of one job, and :class:`~selectgraph.runtime._run.Run`
puts them together.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from time import perf_counter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

from selectgraph.core._branch import BranchRef
from selectgraph.core._control import RunControl
from selectgraph.core._errors import CheckpointConflict
from selectgraph.core._interrupts import Interrupt
from selectgraph.core._node_result import NodeResult
from selectgraph.core._state import GraphState
from selectgraph.core._usage import NO_USAGE, Usage
from selectgraph.observe._recorder import EventRecorder
from selectgraph.routing._edges import Edge, RouteDecision
from selectgraph.routing._parallel import Branches
from selectgraph.runtime._book import InterruptBook
from selectgraph.runtime._offload import current_halt
from selectgraph.runtime._tasks import TaskRunner, current_task_runner
from selectgraph.state._fingerprint import StateFingerprint
from selectgraph.state._merge import Merger

if TYPE_CHECKING:
    from selectgraph.runtime._child_progress import ChildProgress
    from selectgraph.runtime._durable import Durable
    from selectgraph.runtime._program import GraphProgram

__all__ = ["RunState", "Sleep", "Stop", "blocking_sleep", "describe_error", "new_run_id"]

Sleep = Callable[[float], Awaitable[None]]

Stop = Literal[
    "end",
    "join",
    "max_steps",
    "loop",
    "paused",
    "token_budget",
    "cost_budget",
    "time_budget",
    "cancelled",
]
"""Why a walk stopped: END, the branch's join point, the step limit, a loop stop, or a pause."""

_random_bits = random.getrandbits

_NO_DIRECT: Final[dict[str, Any]] = {}
"""The direct-call tables of a run whose tasks an executor runs: every node goes through it."""


async def blocking_sleep(seconds: float) -> None:
    """Sleep without an event loop; used when run() drives a synchronous graph.

    In a run ``arun()`` drives on a worker thread, the wait (a retry's backoff, a
    queued thread input's poll) ends early when the awaiting task is cancelled.

    Raises:
        asyncio.CancelledError: the task awaiting this run was cancelled meanwhile.
    """
    halt = current_halt()
    if halt is None:
        time.sleep(seconds)
    elif halt.wait(seconds):
        raise asyncio.CancelledError("the task awaiting the run was cancelled")


def new_run_id() -> str:
    """A random run identifier (64 bits, hex).

    ``random`` is seeded from the OS at import and reseeded after fork; asking
    the OS for fresh bytes on every run is a syscall too many for the hot path.
    """
    return f"{_random_bits(64):016x}"


def describe_error(exc: BaseException) -> str:
    """``Type: message``, as events, history and errors name a failure."""
    return f"{type(exc).__name__}: {exc}"


class RunState:
    """One execution of a compiled graph: its state, counters and collaborators."""

    def __init__(
        self,
        graph: GraphProgram,
        state: GraphState,
        *,
        run_id: str,
        recorder: EventRecorder,
        sleep: Sleep,
        namespace: tuple[str, ...] = (),
        track_writes: bool = False,
    ) -> None:
        self.graph = graph
        self.state = state
        self.run_id = run_id
        self.namespace = namespace
        self.recorder = recorder
        self.sleep = sleep
        self.steps = 0
        self.usage: Usage = NO_USAGE
        self.written_keys: set[str] | None = set() if track_writes else None
        """Data keys any node wrote (kept for graphs used as a node with full passthrough)."""
        self._visits: dict[str, int] = {}
        self._history = state.history.raw  # type: ignore[attr-defined]  # always a History here
        self._history_start = len(self._history)
        # Without reducer fields a merger keeps no per-run tables until loop detection
        # starts, so runs share their graph's until then.
        self._merger = graph.plain_merger or Merger(graph.schema, None)
        self._started = perf_counter()
        self._direct_calls = graph.direct_calls
        self._direct_async = graph.direct_async
        tasks = current_task_runner()
        if tasks is not None:
            # An executor runs this run's tasks: every node goes through it.
            self.tasks = tasks
            self._direct_calls = self._direct_async = _NO_DIRECT
            self._decide = partial(tasks.decision, self)
        self.abort = current_halt()  # set in a run arun() drives on a worker thread
        # With an event loop a blocking node goes to a worker thread, so other runs,
        # branches and the stream go on meanwhile.
        self.offloads = sleep is not blocking_sleep and (
            tasks is not None or graph.settings.sync_nodes == "thread"
        )
        if self.offloads:
            self._direct_calls = _NO_DIRECT
        self._walk_slots()

    def _walk_slots(self) -> None:
        """Set, in ``__init__``, the attributes every walk sets.

        A class's instances share one table of attribute names, and CPython stops
        adding names to it as instances are made: a name first set mid-walk (or set
        only by some runs), after a burst of new runs, gives every later run that
        sets it a dictionary of its own (0.6-0.8 KB). So every run sets the names
        all runs use, in ``__init__``, and leaves on the class only what rare runs
        set (loop detection, checkpoints, resumes): more than the table's 30 names.
        """
        self._guards = False
        self._checks = False
        self._control: RunControl | None = None
        self._held = None

    config: Mapping[str, Any] = MappingProxyType({})
    """Run-time values for the nodes (``context.config``): what the caller passed as
    ``config=``, or LangGraph's ``config["configurable"]``."""
    tasks: TaskRunner | None = None
    """The executor's task runner, when an executor runs this run's tasks."""

    offloads = False
    """Whether blocking nodes (plain functions, all-synchronous graphs) run on worker
    threads: in branches and under executors when there is an event loop, and on the
    run's own path unless its graph says ``sync_nodes="loop"``."""

    _decide: Callable[[Edge, Awaitable[RouteDecision]], Awaitable[RouteDecision]] | None = None
    """How an llm_decide edge's decision is made (through the task runner, when there is one)."""

    # Counters most runs never touch live on the class until first written, so
    # starting a run does not pay for them.
    _fp: StateFingerprint | None = None
    """Set at the first revisit of a node, when loop and stall detection begin."""

    _seen: dict[tuple[str, int], int] | None = None
    """(node, state fingerprint) -> the step that saw it, once loop detection began."""

    _last_total = 0

    _unchanged = 0

    _stalls = 0

    _loops = 0

    attempts = 1

    _held: tuple[Any, ...] | None = None
    """The NodeFinished of the node just completed, held until its edge is resolved.

    Only for an edge that can fail (a condition, router, ``goto`` or model
    decision) in a run without checkpoints: a routing or edge failure is then
    reported on the node's RunFailed instead, as a node's own failure is
    (graph-engine §6: one completion per node, carrying the error). A run that
    checkpoints records it at once, before the node's checkpoint, which stores
    it in the event log: held, it would reach the store only with the next
    checkpoint (a crash in between would lose it, and a watcher in another
    process would see the node running on). There a routing failure follows
    the node's NodeFinished as its RunFailed.
    """

    _degraded = False

    _max_steps_reached = False

    _stopped_at: Any = None
    """The node the walk would have run next when the step limit stopped it."""

    stop_at: Any = None
    """Where a branch's walk ends (its join point); never reached by a whole run."""

    one_node = False

    def _release(self) -> None:
        """Record the held NodeFinished: the node's edge resolved, or the walk stopped."""
        held = self._held
        if held is not None:
            self._held = None
            self.recorder.finish_node(*held)

    """A parallel group's branch: run its node and stop, whatever its edges say."""

    detect = True
    """Whether loop and stall detection run (not inside branches)."""

    branch: BranchRef | None = None
    """The branch this walk is, inside fan-outs."""

    abort: threading.Event | None = None
    """For a branch: set when its fan-out gave up; the walk stops before its next node."""

    durable: Durable | None = None
    """The checkpoint writer, for a run with a checkpoint store (never a branch's)."""

    progress: ChildProgress | None = None
    """For a subgraph's run under a durable run: saves its progress after each node."""

    active_subgraph: Any = None
    """The subgraph run this durable run's current node is waiting for (see ChildProgress)."""

    book: InterruptBook | None = None
    """Answers, pending questions and live generators (made when a generator node runs)."""

    _book_parent: RunState | None = None
    """The run whose book this one shares (a branch's or subgraph's parent)."""

    resumed_from: str | None = None
    """The checkpoint a continued run started from (its first event is RunResumed)."""

    resumed_live = False
    """Whether the continued run is the paused run itself, still in memory."""

    first_write: tuple[str, list[Any], dict[str, Any] | None] | None = None
    """A checkpoint to write once the run has announced itself (its input, or a fork)."""

    _pause_reason = ""

    resumed_answer: tuple[str | None, str | None] = (None, None)
    """The node and interrupt id of the (first) answer a resume was given."""

    _pause_next: list[Any] | None = None

    _fan_out_source = ""

    expected_fan_out: tuple[str, int] | None = None
    """A run resumed inside a fan-out: its source and how many branches it paused with."""

    # ------------------------------------------------- durability and interrupts
    _interrupts: tuple[Interrupt, ...] = ()

    _checkpoint_id: str | None = None

    _resume_next: list[Any] = []  # noqa: RUF012 - replaced, never changed in place
    """Where a paused run continues (the checkpoint's ``next``)."""

    child_key: str | None = None
    """For a subgraph's run: the parent task it runs as (keys its paused state)."""

    _resume_branches: Branches | None = None
    """The fan-out a branch paused in: an in-process resume runs it again without routing."""

    # -------------------------------------------------------------- fan-out
    _after_fan_out: Any = None
    """Where the walk goes once a list fan-out has joined."""

    _branch_steps = 0
    """The highest step the last fan-out's branches reached."""

    _group_hit_limit = False
    """Whether the last parallel group stopped because a member reached max_steps."""

    _lost_run: CheckpointConflict | None = None
    """Set when storing a branch's writes found that another writer moved the run on."""

    @property
    def driven_without_loop(self) -> bool:
        """Whether run() drives this run without an event loop (branches go to threads)."""
        return self.sleep is blocking_sleep

    @property
    def visits(self) -> dict[str, int]:
        """How many times each node ran in this run."""
        return self._visits

    @property
    def degraded(self) -> bool:
        """Whether some failure was absorbed on the way."""
        return self._degraded

    @property
    def stopped_at(self) -> Any:
        """The node the walk would have run next when the step limit stopped it."""
        return self._stopped_at

    @property
    def resume_next(self) -> list[Any]:
        """Where a paused run continues (its checkpoint's ``next``)."""
        return self._resume_next

    @property
    def history_start(self) -> int:
        """Entries of ``state.history`` that predate this run."""
        return self._history_start

    def restart_clock(self) -> None:
        """Time the run from now (a paused run continued in memory)."""
        self._started = perf_counter()

    def restore(self, *, steps: int, visits: dict[str, int], usage: Usage, degraded: bool) -> None:
        """Take up the counters of a run continued from a checkpoint."""
        self.steps = steps
        self._visits = dict(visits)
        self.usage = usage
        self._degraded = degraded

    def previous_result(self, node: str) -> NodeResult | None:
        """This node's result from its previous visit in this run, if any."""
        history = self.state.history
        for index in range(len(history) - 1, self._history_start - 1, -1):
            name, result = history[index]
            if name == node and isinstance(result, NodeResult):
                return result
        return None

    def _record_error(self, record: dict[str, Any]) -> None:
        self.state.errors.append(record)

    def _roll_back(self, name: str) -> None:
        """Uncount the visit of ``name`` in progress: it runs again, as the same step."""
        visit = self._visits.get(name, 1)
        self.steps -= 1
        if visit > 1:
            self._visits[name] = visit - 1
        else:
            self._visits.pop(name, None)

    def ensure_book(self) -> InterruptBook:
        """The run's interrupt book (a branch's or subgraph's is its parent's), made if needed."""
        if self._book_parent is not None:
            return self._book_parent.ensure_book()
        book = self.book
        if book is None:
            book = self.book = InterruptBook()
        return book
