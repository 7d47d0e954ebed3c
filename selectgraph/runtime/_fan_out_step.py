"""Fan-out in the loop: run a step's branches at once, then join what they wrote.

A list fan-out (an edge to several nodes, a router's list, Scatter) and a
parallel group both become a FanOutPlan; its branches walk the same loop
(``BranchRun``) or, for one plain function, run as a quick branch, and the
join merges their pending writes in merge order.
"""

from __future__ import annotations

import threading
from time import perf_counter
from typing import Any, Protocol

from selectgraph.core._branch import BranchRef
from selectgraph.core._errors import CheckpointConflict, ResumeError
from selectgraph.core._interrupts import NodeInterrupt
from selectgraph.core._run_errors import (
    BranchError,
    GraphRunError,
    NodeError,
    RoutingError,
)
from selectgraph.core._sentinels import END, EndType
from selectgraph.core._usage import NO_USAGE, Usage
from selectgraph.nodes._spec import NodeSpec
from selectgraph.observe._events import NodeFinished, ParallelFinished, ParallelStarted
from selectgraph.routing._parallel import Branches, FailureMode, FanOutOptions
from selectgraph.runtime._branches import (
    CANCELLED,
    BranchAborted,
    BranchTask,
    run_concurrently,
    run_on_threads,
)
from selectgraph.runtime._fanout import FanOutPlan, plan_fanout
from selectgraph.runtime._interrupts import Interrupts
from selectgraph.runtime._join import BranchWrites, KeptFailure, apply_merge_fn, join_branches
from selectgraph.runtime._pending import encode_branch_writes
from selectgraph.runtime._quick_branch import QuickBranches
from selectgraph.runtime._run_state import Stop, describe_error
from selectgraph.runtime._tasks import BranchTally
from selectgraph.state._output import NodeOutput

__all__ = ["BranchWalk", "FanOuts"]


class BranchWalk(Protocol):
    """A branch's walk (a ``BranchRun``), as the fan-out that started it sees it."""

    usage: Usage
    """Model usage of the branch's nodes."""
    ran: dict[str, int]
    """Visits of each node in the branch."""
    steps: int
    """The step counter where the branch stopped."""
    hit_limit: bool
    """Whether the branch stopped at max_steps."""

    @property
    def degraded(self) -> bool:
        """Whether the branch absorbed a failure."""
        ...

    @property
    def stopped_at(self) -> Any:
        """Where it would have gone next, when it hit the limit."""
        ...

    async def run(self, node: str | EndType) -> BranchWrites:
        """Walk from ``node`` to the join point; returns what the branch wrote."""
        ...


class FanOuts(QuickBranches, Interrupts):
    """Parallel groups and list fan-outs: plan, run the branches, join."""

    def _new_branch(
        self,
        task: BranchTask,
        join: str | EndType | None,
        one_node: bool,
        abort: threading.Event,
        seed: BranchWrites | None = None,
    ) -> BranchWalk:
        """A walk for one branch of a fan-out of this run (see ``BranchRun``)."""
        raise NotImplementedError  # Run and BranchRun make BranchRuns

    async def _fan_out_from(self, source: str, branches: Branches) -> Stop | None:
        """Run a list fan-out (an edge to several nodes, a router's list or Scatter) and join.

        Sets ``_after_fan_out`` to the join point; returns a stop when a branch hit
        the step limit. A failure that is not absorbed raises BranchError.
        """
        plan = plan_fanout(
            self.graph, source, branches.targets, branches.options, self.branch, branches.how
        )
        expected = self.expected_fan_out
        if expected is not None:
            self.expected_fan_out = None
            paused_with = expected[1]
            if expected[0] == source and paused_with != len(plan.tasks):
                raise ResumeError(
                    f"run {self.run_id!r} paused inside the fan-out after {source!r} over "
                    f"{paused_with} branches, but resumed it routes to {len(plan.tasks)}: what "
                    "it fans out over changed since the pause, and its finished branches would "
                    "no longer match. Give the state it paused with back, or fork from a "
                    "checkpoint before the fan-out",
                    run_id=self.run_id,
                )
        outcome = await self._fan_out(plan)
        self.steps = self._branch_steps  # the join point runs after the deepest branch
        if outcome is None:
            return "max_steps"
        failure = outcome[1]
        del outcome  # it holds the failure, whose traceback will hold this frame
        if failure is not None:
            failure.node = failure.node or source
            try:
                raise failure
            finally:
                del failure  # the traceback holds this frame: no cycle through a local
        self._after_fan_out = plan.join if plan.join is not None else END
        return None

    async def _run_group(self, spec: NodeSpec, visit: int, started: float) -> bool:
        """Run a parallel group node; returns whether its success edges apply."""
        group = spec.group
        assert group is not None
        plan = FanOutPlan(
            source=spec.name,
            tasks=tuple(
                BranchTask(BranchRef(spec.name, index, member, self.branch), member)
                for index, member in enumerate(group.members)
            ),
            join=None,
            options=FanOutOptions(
                merge_policy=group.merge_policy,
                merge_fn=group.merge_fn,
                failure_mode=group.failure_mode,
                max_concurrency=group.max_concurrency,
            ),
        )
        try:
            outcome = await self._fan_out(plan)
            if outcome is None:
                self._group_hit_limit = True  # walk stops there, reporting max_steps
                ok, failure = True, None
            else:
                ok, failure = outcome
                del outcome  # it holds the failure, whose traceback will hold this frame
            if failure is not None:
                try:
                    raise failure
                finally:
                    del failure
        except Exception as exc:
            try:
                handled = self._handle_failure(spec, visit, exc, started)
            finally:
                del exc
            self.steps = self._branch_steps
            return handled
        self._record_success(spec, NodeOutput(), visit, started)
        self.steps = self._branch_steps  # what runs next comes after the deepest member
        # wait_all with failures takes the group's on_failure edge when it has one.
        return ok or not self.graph.routes[spec.name].failure

    async def _fan_out(self, plan: FanOutPlan) -> tuple[bool, BranchError | None] | None:
        """Run ``plan``'s branches at once, merge what they wrote, and say how it went.

        Returns ``(ok, failure)``: ``ok`` is whether the fan-out's success edges
        apply; ``failure`` is the error to raise or route when the fan-out failed as
        a whole (fail_all, or every branch failed under continue_others). ``None``
        means a branch reached the step limit (what was done is merged; the run
        stops there).
        """
        durable = self.durable
        if durable is not None and (durable.pause_before or durable.pause_after):
            self._refuse_gated_branches(plan, durable.pause_before | durable.pause_after)
        step = self.steps
        self.recorder.record(
            ParallelStarted, step, plan.source, tuple(plan.labels), plan.options.failure_mode
        )
        started = perf_counter()
        walks: list[BranchWalk | BranchTally] = []  # what each branch's walk counts into this run
        quick_nodes: list[str] = []
        try:
            outcomes = await self._run_branches(plan, step, walks, quick_nodes)
        except BaseException:
            # Cancelled (a token, the caller): the fan-out still reports its end.
            self._fan_out_cut_off(plan, step, started)
            raise
        lost = self._lost_run
        if lost is not None:
            self._lost_run = None
            raise lost
        asked = [o for o in outcomes if type(o) is NodeInterrupt]
        failed = any(
            isinstance(o, Exception) and not isinstance(o, BranchAborted) for o in outcomes
        )
        survives = plan.options.failure_mode != "fail_all"
        if asked and (survives or not failed):
            # Some branch waits for an answer: keep what the finished ones wrote (and,
            # when the fan-out survives failures, each failed branch's error) for the
            # resume, and pause the run (the join happens once every branch is done).
            self._keep_finished(plan, outcomes, step, failures=survives)
            raise asked[0]
        self._tally(walks, quick_nodes, step)
        return self._join(plan, outcomes, step, started, any(w.hit_limit for w in walks))

    async def _run_branches(
        self,
        plan: FanOutPlan,
        step: int,
        walks: list[BranchWalk | BranchTally],
        quick_nodes: list[str],
    ) -> list[Any]:
        """Every branch's outcome, in plan order: its writes, a question, or what it raised."""
        single = plan.join is None
        # Set when fail_all gives up: branches on worker threads stop before their next node.
        abort = threading.Event()
        book = self.book if self._book_parent is None else self.ensure_book()
        finished_before = book.branches_done if book is not None else None
        # A durable run stores each finished branch's writes at once: after a crash
        # mid-fan-out, the branches that finished are not run again.
        keep_writes = self.durable is not None and self.durable.durability == "sync"

        async def run_branch(task: BranchTask) -> BranchWrites | NodeInterrupt:
            if finished_before:
                # Finished before the run paused at a sibling's interrupt: not run again.
                done = finished_before.pop(f"{step}:{task.ref.task_id}", None)
                if done is not None:
                    if done.failed:  # failed before the pause: failed again, not re-run
                        raise KeptFailure(done)
                    return done  # type: ignore[no-any-return]
            try:
                writes = await body(task)
            except NodeInterrupt as signal:
                # Returned, not raised: a question must not cancel the siblings (fail_all).
                return signal
            if keep_writes:
                await self._keep_branch_writes(f"{step}:{task.ref.task_id}", writes)
            return writes

        tasks = self.tasks
        if tasks is not None:
            tasks.fan_out(self, plan)

        async def executor_branch(task: BranchTask) -> BranchWrites:
            assert tasks is not None
            return await tasks.branch(self, task, lambda: walk_branch(task), walks)

        async def walk_branch(task: BranchTask) -> BranchWrites:
            quick = self._quick_call(task.node, plan.join)
            if quick is not None:
                quick_nodes.append(task.node)  # a visit, whether it succeeds or not
                writes, goto = await self._quick_branch(task, quick, step, plan.join)
                if single or goto is None or goto == plan.join or goto is END:
                    return writes
                # The node chose where its branch goes on: walk it from there.
                walker = self._new_branch(task, plan.join, False, abort, writes)
                walks.append(walker)
                return await walker.run(goto)
            branch = self._new_branch(task, plan.join, single, abort)
            walks.append(branch)
            return await branch.run(task.node)

        # Without an executor a branch is its walk: one coroutine less per branch.
        body = walk_branch if tasks is None else executor_branch
        mode = plan.options.failure_mode
        limit = plan.options.max_concurrency or self.graph.settings.max_concurrency
        # Under an executor a branch that ran is a recorded task, and a replay must meet
        # the same ones: fail_all lets every branch finish, then fails the fan-out as
        # fail_all does (merging nothing), instead of cancelling siblings at a time that
        # a replay could not reproduce.
        scheduling: FailureMode = "wait_all" if tasks is not None and mode == "fail_all" else mode
        if self.driven_without_loop:
            return run_on_threads(
                plan.tasks, run_branch, failure_mode=mode, limit=limit, on_abort=abort.set
            )
        return await run_concurrently(
            plan.tasks, run_branch, failure_mode=scheduling, limit=limit, on_abort=abort.set
        )

    def _keep_finished(
        self, plan: FanOutPlan, outcomes: list[Any], step: int, *, failures: bool = False
    ) -> None:
        """Keep the writes of the branches that finished, for when the fan-out runs again.

        With ``failures`` (a fan-out that survives them, paused by a sibling's
        question), a failed branch is kept too, as its recorded error: resumed, it
        is not run again, and the join reports it as it would have.
        """
        kept = self.ensure_book().branches_done
        for task, outcome in zip(plan.tasks, outcomes, strict=True):
            key = f"{step}:{task.ref.task_id}"
            if type(outcome) is BranchWrites:
                kept[key] = outcome
            elif failures and isinstance(outcome, Exception):
                if isinstance(outcome, BranchAborted):
                    continue
                self._close_failed_node(task, outcome, step)
                record = self._branch_failure_record(plan, task, outcome)
                kept[key] = BranchWrites(
                    task.ref.index, task.ref.label, errors=[record], failed=True
                )
                self._degraded = True

    def _tally(
        self, walks: list[BranchWalk | BranchTally], quick_nodes: list[str], step: int
    ) -> None:
        """Count what the branches' walks did into this run: visits, usage, steps, quality."""
        reached = step + 1 if quick_nodes else step
        for node in quick_nodes:
            self._visits[node] = self._visits.get(node, 0) + 1
        for branch in walks:
            if branch.usage is not NO_USAGE:
                self.usage = self.usage + branch.usage
            for node, count in branch.ran.items():
                self._visits[node] = self._visits.get(node, 0) + count
            reached = max(reached, branch.steps)
            if branch.degraded:
                self._degraded = True  # a failure a branch absorbed degrades the run
            if branch.hit_limit:
                self._stopped_at = branch.stopped_at
        self._branch_steps = reached

    def _join(
        self, plan: FanOutPlan, outcomes: list[Any], step: int, started: float, hit_limit: bool
    ) -> tuple[bool, BranchError | None] | None:
        """Merge the branches that finished (or fail the fan-out), and record ParallelFinished."""
        mode = plan.options.failure_mode
        done: list[BranchWrites] = []
        failed: list[tuple[BranchTask, BaseException]] = []
        cancelled: list[str] = []
        for task, outcome in zip(plan.tasks, outcomes, strict=True):
            if type(outcome) is NodeInterrupt:
                cancelled.append(task.ref.label)  # a sibling failed: the question is moot
                continue
            if type(outcome) is BranchWrites:
                done.append(outcome)
            elif outcome is CANCELLED or isinstance(outcome, BranchAborted):
                cancelled.append(task.ref.label)
            elif not isinstance(outcome, Exception):
                # A budget stop, SystemExit, KeyboardInterrupt...: never absorbed by a fan-out.
                self._fan_out_cut_off(plan, step, started)
                raise outcome
            else:
                failed.append((task, outcome))
        failed_any = bool(failed)
        for task, exc in failed:
            self._close_failed_node(task, exc, step)
        failure: BranchError | None = None
        try:
            if failed and (mode == "fail_all" or (mode == "continue_others" and not done)):
                if self.durable is not None:
                    # Kept with the failure's checkpoint: continuing the run after a
                    # fix runs only the branches that did not finish.
                    self._keep_finished(plan, outcomes, step)
                done = []  # a failed fan-out merges nothing
                failure = self._branch_error(plan, *failed[0])
            else:
                self._merge_branches(plan, done)
                for task, exc in failed:
                    self._record_error(self._branch_failure_record(plan, task, exc))
        finally:
            if failed or cancelled:
                self._degraded = True
            self.recorder.record_delivering(
                ParallelFinished,
                step,
                plan.source,
                tuple(b.label for b in done),
                tuple(task.ref.label for task, _ in failed),
                tuple(cancelled),
                (perf_counter() - started) * 1000,
                state=self.state,
            )
            del failed, outcomes  # their errors' tracebacks hold this frame
        if failure is not None:
            return False, failure
        if hit_limit:
            return None
        return not (failed_any and mode == "wait_all"), None

    def _fan_out_cut_off(self, plan: FanOutPlan, step: int, started: float) -> None:
        """ParallelFinished for a fan-out stopped as a whole: no branch's writes were merged."""
        self.recorder.record(
            ParallelFinished,
            step,
            plan.source,
            (),
            (),
            tuple(plan.labels),
            (perf_counter() - started) * 1000,
        )

    def _refuse_gated_branches(self, plan: FanOutPlan, gated: frozenset[str]) -> None:
        """A pause gate on a node that runs as a branch would never fire: say so."""
        for task in plan.tasks:
            if task.node in gated:
                raise RoutingError(
                    f"node {task.node!r} has a pause gate (pause_before/pause_after) but runs "
                    f"as a branch of the fan-out from {plan.source!r}; gates stop a run only "
                    "between nodes outside fan-outs. Gate the fan-out's source or its join, "
                    "or ask from the branch with a generator node (yield InterruptRequest)",
                    node=task.node,
                )

    async def _keep_branch_writes(self, key: str, writes: BranchWrites) -> None:
        """Store a finished branch's writes under the run's head checkpoint (pending writes)."""
        durable = self.durable
        assert durable is not None
        head = durable.head
        if head is None:
            return
        record = encode_branch_writes(writes, durable.serializer, f"pending_writes[{key!r}]")
        try:
            if self.driven_without_loop:
                durable.store.put_writes(self.run_id, head.checkpoint_id, key, [record])
            else:
                await durable.store.aput_writes(self.run_id, head.checkpoint_id, key, [record])
        except CheckpointConflict as conflict:
            # Another writer owns the run now: not this branch's failure, the run's.
            self._lost_run = conflict

    def _close_failed_node(self, task: BranchTask, exc: BaseException, step: int) -> None:
        """A NodeFinished for the node a failed branch stopped in, so no node is left open."""
        if isinstance(exc, KeptFailure):
            return  # closed when it failed, before the run paused
        node = getattr(exc, "node", None) or task.node
        cause = exc.__cause__ if isinstance(exc, NodeError) and exc.__cause__ else exc
        self.recorder.record_as(
            self.recorder.base_for(task.ref),
            perf_counter(),
            NodeFinished,
            step + 1,
            node,
            self._visits.get(node, 1),
            0.0,
            "failure",
            1,
            describe_error(cause),
        )

    def _merge_branches(
        self, plan: FanOutPlan, done: list[BranchWrites]
    ) -> list[tuple[str, NodeOutput]]:
        """Join ``done`` into this run's state; returns the outputs the join merged."""
        options = plan.options
        schema = self.graph.schema
        if options.merge_fn is not None:
            merged = apply_merge_fn(
                self.state,
                self._merger,
                schema,
                done,
                options.merge_fn,
                node=plan.source,
                step=self.steps,
            )
        else:
            merged = join_branches(
                self.state,
                self._merger,
                schema,
                done,
                options.merge_policy,
                node=plan.source,
                step=self.steps,
            )
        if self.written_keys is not None:
            for _, output in merged:
                self.written_keys.update(output.written_keys())
        return merged

    def _branch_error(self, plan: FanOutPlan, task: BranchTask, exc: BaseException) -> BranchError:
        label = task.ref.label
        problem = str(exc) if isinstance(exc, GraphRunError) else describe_error(exc)
        error = BranchError(
            f"branch {label!r} of {plan.source!r} failed: {problem}",
            branch=label,
            node=plan.source,
            step=self.steps,
            state=self.state,
        )
        error.__cause__ = exc
        # The category of what went wrong in the branch (a timeout, a reducer conflict...),
        # the branch named on the error: not a generic "branch_failed".
        error.category = exc.category if isinstance(exc, GraphRunError) else "node_exception"
        return error

    def _branch_failure_record(
        self, plan: FanOutPlan, task: BranchTask, exc: BaseException
    ) -> dict[str, Any]:
        if isinstance(exc, KeptFailure):
            return dict(exc.record)  # as recorded when it failed
        cause = exc.__cause__ if isinstance(exc, NodeError) and exc.__cause__ else exc
        return {
            "node": getattr(exc, "node", None) or task.node,
            "branch": task.ref.label,
            "fan_out": plan.source,
            "step": self.steps,
            "error": str(cause),
            "type": type(cause).__name__,
            "handled_by": plan.options.failure_mode,
        }
