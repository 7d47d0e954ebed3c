"""Run: the step loop — pick a node, run it, merge its output, route, detect loops, repeat.

One loop serves every way of running a graph: ``arun()`` awaits it,
``astream()`` reads its events as they are emitted, and ``run()`` drives the
same coroutine without an event loop when every node is synchronous. A
branch of a fan-out walks the same loop on its own view of the state (see
``_branch_run``), so a step does the same thing wherever it runs.

The loop body is kept flat on purpose: at a few microseconds per step, every
extra call or object shows in the benchmarks.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final, Literal

from selectgraph.core._branch import BranchRef
from selectgraph.core._control import (
    TOKEN_CANCEL,
    Budget,
    BudgetStop,
    RunCancelledByToken,
    RunControl,
    current_control,
)
from selectgraph.core._control import enter as enter_control
from selectgraph.core._control import leave as leave_control
from selectgraph.core._errors import CheckpointConflict
from selectgraph.core._interrupts import Interrupt, NodeInterrupt
from selectgraph.core._node_result import NodeResult
from selectgraph.core._policies import (
    ErrorPolicy,
    LoopAction,
    MaxStepsAction,
    RetryPolicy,
    StopReason,
)
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import (
    BranchError,
    GraphRunError,
    GuardrailBlocked,
    LoopDetected,
    MaxStepsExceeded,
    NodeContractError,
    NodeError,
    NodeTimeout,
    ReducerError,
    RoutingError,
    StateValidationError,
    VisitLimitExceeded,
)
from selectgraph.core._sentinels import END, EndType
from selectgraph.core._state import LAST_OUTPUT, GraphState
from selectgraph.core._usage import NO_USAGE, Usage
from selectgraph.nodes._output import read_output
from selectgraph.nodes._spec import NodeContext, NodeSpec
from selectgraph.observe._events import (
    BudgetExceeded,
    EdgeFired,
    InterruptRaised,
    NodeFinished,
    NodeRetried,
    NodeStarted,
    ParallelFinished,
    ParallelStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    StallDetected,
)
from selectgraph.observe._events import (
    LoopDetected as LoopDetectedEvent,
)
from selectgraph.observe._recorder import EventRecorder
from selectgraph.routing._edges import (
    Edge,
    Resolved,
    RouteDecision,
    aresolve_next,
    match_simple,
    resolve_next,
    route_with_value,
)
from selectgraph.routing._parallel import Branches, FailureMode
from selectgraph.runtime._branches import (
    CANCELLED,
    BranchAborted,
    BranchTask,
    run_blocking,
    run_concurrently,
    run_on_threads,
)
from selectgraph.runtime._fanout import FanOutOptions, FanOutPlan, plan_fanout
from selectgraph.runtime._guard import guard_output
from selectgraph.runtime._join import BranchWrites, apply_merge_fn, join_branches, relative_to
from selectgraph.runtime._retry import is_retryable, retry_after_failure
from selectgraph.runtime._tasks import BranchTally, TaskRunner, current_task_runner
from selectgraph.state._fingerprint import StateFingerprint
from selectgraph.state._merge import Merger
from selectgraph.state._output import NodeOutput
from selectgraph.state._views import StateView

if TYPE_CHECKING:
    from selectgraph.runtime._durable import Durable, InterruptBook
    from selectgraph.runtime._program import GraphProgram
    from selectgraph.state._views import StateView as _View

__all__ = ["Run", "blocking_sleep", "new_run_id"]

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


_NO_BUDGET = Budget()
_NO_DIRECT: Final[dict[str, Any]] = {}
"""The direct-call tables of a run whose tasks an executor runs: every node goes through it."""
_STOPPED_EARLY = frozenset({"max_steps", "token_budget", "cost_budget", "time_budget", "cancelled"})
"""Stops before a node ran: continuing the run starts at that node."""
_TRIGGERS = {
    "join": "end",
    "token_budget": "budget",
    "cost_budget": "budget",
    "time_budget": "budget",
    "cancelled": "cancel",
}


async def blocking_sleep(seconds: float) -> None:
    """Sleep without an event loop; used when run() drives a synchronous graph."""
    time.sleep(seconds)


def new_run_id() -> str:
    """A random run identifier (64 bits, hex).

    ``random`` is seeded from the OS at import and reseeded after fork; asking
    the OS for fresh bytes on every run is a syscall too many for the hot path.
    """
    return f"{_random_bits(64):016x}"


def _describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _changes_nothing(output: NodeOutput, data: Any, reducers: Any) -> bool:
    """Whether merging ``output`` leaves ``data`` as it is (a cheap, conservative check).

    Looks only at the update, never the rest of the state: each key must be a
    last-write-wins key given a value equal to (and of the same type as) the one
    it holds. Anything else counts as a change, as does a write through the view.
    """
    writes = output.writes
    if writes is not None and (writes.assignments or writes.deletions):
        return False
    for key, value in output.update.items():
        if key in reducers:
            return False
        current = data.get(key, _ABSENT)
        if current is value:
            continue
        try:
            if current != value:
                return False
        except Exception:  # e.g. an array whose == is elementwise: count it as a change
            return False
        if type(current) is not type(value):  # 1 == True == 1.0, but they differ
            return False
    return True


_ABSENT: Any = object()


def _cancel_reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, GeneratorExit):
        return "closed"
    return "cancelled"


class Run:
    """One execution of a compiled graph and everything it keeps track of."""

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

    tasks: TaskRunner | None = None
    """The executor's task runner, when an executor runs this run's tasks."""
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
    _attempts = 1
    _degraded = False
    _max_steps_reached = False
    _stopped_at: Any = None
    """The node the walk would have run next when the step limit stopped it."""
    stop_at: Any = None
    """Where a branch's walk ends (its join point); never reached by a whole run."""
    one_node = False
    """A parallel group's branch: run its node and stop, whatever its edges say."""
    detect = True
    """Whether loop and stall detection run (not inside branches)."""
    branch: BranchRef | None = None
    """The branch this walk is, inside fan-outs."""
    abort: threading.Event | None = None
    """For a branch: set when its fan-out gave up; the walk stops before its next node."""
    durable: Durable | None = None
    """The checkpoint writer, for a run with a checkpoint store (never a branch's)."""
    book: InterruptBook | None = None
    """Answers, pending questions and live generators (made when a generator node runs)."""
    _book_parent: Run | None = None
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

    @property
    def driven_without_loop(self) -> bool:
        """Whether run() drives this run without an event loop (branches go to threads)."""
        return self.sleep is blocking_sleep

    # ------------------------------------------------------------------- loop
    def execute(self) -> Coroutine[Any, Any, GraphResult]:
        """Run to a stop; the coroutine returns the result.

        Raises:
            GraphRunError: the run failed; ``error.state`` and ``error.result`` keep what was done.
        """
        return self.walk(self.graph.entry)

    async def walk(self, target: str | EndType | Branches | tuple[str, bool, Any]) -> Any:
        """Run nodes from ``target`` until END, the join point, the step limit or a loop stop.

        A whole run (no ``stop_at``) reports its start, its end and any failure, and
        returns its GraphResult; a branch returns why it stopped (a ``Stop``) and
        leaves reporting to the fan-out that ran it.
        """
        # The loop lives in this one coroutine: run() drives it without an event
        # loop, and each extra coroutine layer would cost every run.
        # A suspended run keeps this frame: every local here costs each run in flight.
        nodes = self.graph.nodes
        all_routes = self.graph.routes
        direct_calls = self._direct_calls
        direct_async = self._direct_async
        settings = self.graph.settings
        max_steps = settings.max_steps
        fp: StateFingerprint | None = None
        detect = self.detect
        check_loops = False
        # Stalls are watched from the first step: until fingerprints start, a
        # step that wrote nothing new (checked on its update alone) is unchanged.
        stall_threshold = settings.stall_threshold if detect else None
        reducers = self.graph.schema.reducers
        quiet = False  # before fingerprints: whether this step left ``data`` as it was
        seen = self._seen
        recorder = self.recorder
        visits = self._visits
        state = self.state
        stop_at = self.stop_at
        one_node = self.one_node
        abort = self.abort
        name = self._fan_out_source
        top = stop_at is None
        durable = self.durable
        stop: Stop
        output: Any  # a NodeOutput, or what _recover says of a failure (a bool)
        # The outermost run owns the control (usage so far, budgets, cancellation);
        # its subgraphs and branches see it through the context.
        control: RunControl | None = None
        checks = False  # whether budgets or a token are checked before each node
        entered: Any = None
        outer = current_control()
        nested = None  # a subgraph's or branch's walk checks its owner's time and token
        if outer is None:
            if top:
                control = RunControl(
                    settings.budget or _NO_BUDGET, settings.cancellation_token, self.usage
                )
                entered = enter_control(control)
                checks = settings.controlled
        elif outer.checked:
            nested = outer
        try:
            if top:
                if self.resumed_from is None and not self.resumed_live:
                    self.recorder.record_delivering(RunStarted, 0, target, state=state)
                else:
                    answered_node, answered = self.resumed_answer
                    self.recorder.record(
                        RunResumed,
                        self.steps,
                        self.resumed_from,
                        self.resumed_live,
                        answered_node,
                        answered,
                    )
                if self.first_write is not None:
                    assert durable is not None
                    trigger, next_, extra = self.first_write
                    self.first_write = None
                    await durable.write(self, trigger, next_, extra=extra)
            if type(target) is tuple:  # continued from a checkpoint taken after a node
                name, ok, goto = target
                target = await self.route_after(name, ok, goto)
            # Names are compared by value past the identity check: a router may return
            # an equal string that is not the node's own name object.
            while target is not END and not (
                target is stop_at or (stop_at is not None and target == stop_at)
            ):
                if type(target) is Branches:
                    self._fan_out_source = name
                    stop = await self._fan_out_from(name, target)  # type: ignore[assignment]
                    if stop is not None:
                        break
                    target = self._after_fan_out
                    continue
                if max_steps is not None and self.steps >= max_steps:
                    self._stopped_at = target
                    stop = "max_steps"
                    break
                if abort is not None and abort.is_set():
                    raise BranchAborted(f"branch {self.branch!r} stopped: its fan-out failed")
                if nested is not None:
                    nested.check_time()  # raises for the run that owns the control
                if checks:
                    assert control is not None
                    refused = control.refusal()
                    if refused is not None:
                        if refused != "cancelled":
                            limit, used = control.spent(refused)
                            recorder.record(BudgetExceeded, self.steps, refused, limit, used)
                        self._stopped_at = target
                        self._degraded = True
                        stop = refused  # type: ignore[assignment]
                        break
                if durable is not None and target in durable.pause_before:
                    if durable.skip_gate == target:
                        durable.skip_gate = None  # the gate this run was continued from
                    else:
                        self._pause_reason = "pause_before"
                        self._pause_next = [target]
                        stop = "paused"
                        break
                name = target  # type: ignore[assignment]
                spec = nodes[name]
                self.steps = step = self.steps + 1
                visit = visits.get(name, 0) + 1
                if (
                    visit == 2
                    and fp is None
                    and detect
                    and (settings.detect_loops or stall_threshold)
                ):
                    # Until some node comes back the run cannot repeat itself, so
                    # fingerprints start here, with this state as their baseline.
                    if self._merger is self.graph.plain_merger:
                        self._merger = Merger(self.graph.schema, None)
                    fp = self._fp = self._merger.fingerprints = StateFingerprint()
                    check_loops = settings.detect_loops
                    seen = self._seen = {}
                if check_loops:
                    assert fp is not None
                    assert seen is not None
                    first = seen.setdefault((name, fp.total), step)
                    if first != step and self._loop_stops_run(name, first):
                        stop = "loop"
                        break
                visits[name] = visit
                state.current_node = name
                started = perf_counter()
                recorder.record_at(started, NodeStarted, step, name, visit)
                if spec.group is not None:
                    ok = await self._run_group(spec, visit, started)
                    if self._group_hit_limit:
                        stop = "max_steps"
                        break
                    goto = None
                    quiet = False
                else:
                    try:
                        if spec.max_visits is not None or spec.reads:
                            self._preflight(spec, visit)
                        call = direct_calls.get(name)
                        if call is not None:
                            view = StateView(state, name)
                            raw = call(view)
                            if type(raw) is dict and not view.touched and spec.writes is None:
                                output = NodeOutput(raw)  # the common case, without read_output()
                            else:
                                output = read_output(raw, view, spec)
                        else:
                            call = direct_async.get(name)
                            if call is not None:
                                # A plain async function, awaited here without adapter layers.
                                view = StateView(state, name)
                                raw = await call(view)
                                if type(raw) is dict and not view.touched and spec.writes is None:
                                    output = NodeOutput(raw)
                                else:
                                    output = read_output(raw, view, spec)
                            else:
                                output = await self._attempt(spec, visit)
                    except (ReducerError, StateValidationError):
                        raise
                    except Exception as exc:
                        output = await self._recover(spec, visit, exc, started)
                        if type(output) is bool:
                            ok = output
                            goto = None
                            quiet = True  # a failed node wrote nothing
                            output = None
                    if output is not None:
                        if fp is None and stall_threshold is not None:
                            quiet = _changes_nothing(output, state.data, reducers)
                        self._complete(spec, output, visit, started)
                        ok, goto = True, output.goto
                if one_node:
                    stop = "join"
                    break
                if durable is not None and await durable.after_node(self, name, ok, goto):
                    self._pause_reason = (
                        "pause_after" if name in durable.pause_after else "requested"
                    )
                    stop = "paused"
                    break

                routes = all_routes[name]
                if goto is not None:
                    target = self._check_goto(spec, goto)
                    recorder.record(EdgeFired, step, name, target, "goto", "")
                elif ok and routes.static_success is not None:
                    edge = routes.static_success
                    target = edge.target  # type: ignore[assignment]
                    if type(target) is Branches:
                        self._fired(name, target, edge.kind, edge.label)
                    else:
                        recorder.record(EdgeFired, step, name, target, "static", edge.label)
                elif ok and routes.simple is not None:
                    edge = match_simple(name, routes, state)
                    target = edge.target  # type: ignore[assignment]
                    if type(target) is Branches:
                        self._fired(name, target, edge.kind, edge.label)
                    else:
                        recorder.record(EdgeFired, step, name, target, edge.kind, edge.label)
                elif ok and routes.router is not None:
                    edge = routes.router
                    view = StateView(state, routes.router_view, readonly=True)
                    resolved = route_with_value(edge, state, nodes, view)
                    target = resolved[0]
                    if type(target) is str and resolved[2] is None:
                        recorder.record(EdgeFired, step, name, target, "router", edge.label, "")
                    else:
                        target = self._follow(name, resolved)
                        if resolved[2] is not None and resolved[2].values:
                            quiet = False  # the router wrote
                else:
                    if routes.is_async:
                        resolved = await aresolve_next(name, routes, ok, state, nodes, self._decide)
                    else:
                        resolved = resolve_next(name, routes, ok, state, nodes)
                    target = self._follow(name, resolved)
                    if resolved[2] is not None and resolved[2].values:
                        quiet = False  # the router wrote
                if stall_threshold is not None:
                    if fp is not None:  # from here on, quiet means "fingerprint unchanged"
                        quiet = fp.total == self._last_total
                        self._last_total = fp.total
                    if quiet:
                        self._stalled(name, stall_threshold)
                    elif self._unchanged:
                        self._unchanged = 0
            else:
                stop = "end" if target is END and stop_at is not END else "join"
            if not top:
                return stop
            if durable is not None:
                return await self._stop_durably(stop)
            if stop == "max_steps":
                return self._stop_at_limit(self._stopped_at)
            return self._finish("end" if stop == "join" else stop)
        except (BudgetStop, RunCancelledByToken) as signal:
            if control is None:
                raise  # the run that owns the budget stops, with its subgraphs and branches
            if type(signal) is BudgetStop:
                self.recorder.record(
                    BudgetExceeded,
                    self.steps,
                    signal.kind,
                    signal.limit,
                    signal.used,
                    signal.needed,
                    name,
                )
                kind: Stop = signal.kind
            else:
                kind = "cancelled"
            return await self._stop_safely(kind, name, type(target) is Branches, control)
        except NodeInterrupt as signal:
            if not top:
                raise  # the run at the top pauses, with every branch's questions
            if self._book_parent is not None:
                self._pause_child(name, type(target) is Branches)
                raise
            return await self._interrupted(
                signal.interrupt, name, target if type(target) is Branches else None
            )
        except GraphRunError as error:
            if top:
                self._attach(error)
                if durable is not None:
                    await self._save_failure(error, name, type(target) is Branches)
            raise
        except Exception as exc:
            if top:
                # Not an engine error (a bug, or a failure nothing wrapped): observers
                # still learn that the run ended.
                self.recorder.record(
                    RunFailed, self.steps, _describe_error(exc), "run_error", state.current_node
                )
            raise
        except BaseException as exc:
            if (
                control is not None
                and isinstance(exc, asyncio.CancelledError)
                and TOKEN_CANCEL in exc.args
            ):
                # The run's own token cancelled its task (see cancellable()): an LLM call
                # in flight, branches. Take the cancellation back and stop cleanly.
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                return await self._stop_safely("cancelled", name, type(target) is Branches, control)
            if top:
                # Cancelled, timed out, interrupted or closed from outside.
                self.recorder.record(
                    RunCancelled, self.steps, _cancel_reason(exc), state.current_node
                )
                if durable is not None:
                    self._save_cancelled(name)
            raise
        finally:
            if entered is not None:
                leave_control(entered)

    async def _stop_safely(
        self, reason: Stop, name: str, in_fan_out: bool, control: RunControl
    ) -> GraphResult:
        """:meth:`_stop_inside`, making sure a failure while stopping still ends the run."""
        # Calls of the node that was stopped (and of its branches) are spent too.
        if control.usage.total_tokens > self.usage.total_tokens:
            self.usage = control.usage
        try:
            return await self._stop_inside(reason, name, in_fan_out)
        except GraphRunError as error:
            self._attach(error)
            raise
        except Exception as exc:
            self.recorder.record(
                RunFailed, self.steps, _describe_error(exc), "run_error", self.state.current_node
            )
            raise

    async def _stop_inside(self, reason: Stop, name: str, in_fan_out: bool) -> GraphResult:
        """Stop for a budget or a cancellation that came in the middle of ``name``.

        What completed is kept; ``name`` runs again when the run is continued
        from the checkpoint saved here (with a store).
        """
        self._degraded = True
        if not in_fan_out and self.state.current_node == name:
            self.recorder.record(
                NodeFinished,
                self.steps,
                name,
                self._visits.get(name, 1),
                0.0,
                "cancelled",
                1,
                f"stopped: {reason}",
            )
        durable = self.durable
        if durable is not None:
            try:
                await durable.flush(self)
                checkpoint = await durable.write(
                    self,
                    "cancel" if reason == "cancelled" else "budget",
                    self._resume_point(name, in_fan_out),
                    extra={"stop_reason": reason},
                )
                await durable.flush(self)
                self._checkpoint_id = checkpoint.checkpoint_id
            finally:
                durable.close()
        else:
            self._roll_back(name)
        return self._finish(reason)  # type: ignore[arg-type]

    # ------------------------------------------------------------- one node
    def _preflight(self, spec: NodeSpec, visit: int) -> None:
        if spec.max_visits is not None and visit > spec.max_visits:
            raise VisitLimitExceeded(
                f"node {spec.name!r} would run for visit {visit} but max_visits={spec.max_visits}",
                node=spec.name,
            )
        missing = sorted(key for key in spec.reads or () if key not in self.state.data)
        if missing:
            raise NodeContractError(
                f"node {spec.name!r} reads {', '.join(map(repr, missing))} but the state has "
                "no such key yet; did an earlier node fail to write it?",
                node=spec.name,
            )

    def _complete(self, spec: NodeSpec, output: NodeOutput, visit: int, started: float) -> None:
        name = spec.name
        step = self.steps
        self._merger.merge(self.state, output, name, step)
        if visit > 1 and spec.optional_writes:
            stale = set(spec.optional_writes) - output.written_keys()
            if stale:
                self._merger.clear(self.state, stale)
        if self.written_keys is not None:
            self.written_keys.update(output.written_keys())
        self._record_success(spec, output, visit, started)

    def _record_success(
        self, spec: NodeSpec, output: NodeOutput, visit: int, started: float
    ) -> None:
        """Usage, a history entry and NodeFinished for a node whose output was taken."""
        name = spec.name
        step = self.steps
        usage = output.usage
        if usage is not None:
            self.usage = self.usage + usage
        writes = output.writes
        written = output.update
        if writes is not None and writes.assignments:
            written = {**writes.assignments, **written}
        finished = perf_counter()
        duration = (finished - started) * 1000
        attempts = self._attempts
        if attempts != 1:
            self._attempts = 1
        self._history.append(
            (
                name,
                step,
                visit,
                "success",
                written,
                written.get(LAST_OUTPUT),
                None,
                attempts,
                duration,
                usage,
                output.agent_result,
            )
        )
        self.recorder.finish_node(
            finished, step, name, visit, duration, "success", attempts, written, self.state
        )

    async def _recover(
        self, spec: NodeSpec, visit: int, exc: Exception, started: float
    ) -> NodeOutput | bool:
        """After a node raised: its retries' output, else whether its success edges apply.

        Nodes called directly get their retries here, so the first attempt of a
        node under ErrorPolicy.RETRY costs what any direct call costs.
        """
        name = spec.name
        if name in self.graph.retried_directly and (
            name in self._direct_calls or name in self._direct_async
        ):  # the first attempt was a direct call: its retries are made here
            retry = spec.retry or self.graph.settings.retry
            if retry.max_retries and is_retryable(retry, exc):
                try:
                    return await self._retries(spec, visit, retry, exc)
                except (ReducerError, StateValidationError):
                    raise
                except Exception as last:
                    exc = last
        try:
            return self._handle_failure(spec, visit, exc, started)
        finally:
            del exc  # the traceback holds this frame: no cycle through a local

    async def _attempt(self, spec: NodeSpec, visit: int) -> NodeOutput:
        tasks = self.tasks
        if tasks is not None:
            return await tasks.node(self, spec, visit, lambda: self._attempt_here(spec, visit))
        return await self._attempt_here(spec, visit)

    async def _attempt_here(self, spec: NodeSpec, visit: int) -> NodeOutput:
        policy = spec.error_policy or self.graph.settings.error_policy
        if policy is not ErrorPolicy.RETRY or not spec.adapter.executor_retries:
            return await self._call(spec, visit, 1)
        retry = spec.retry or self.graph.settings.retry
        try:
            # The first attempt runs bare: a node that succeeds never pays for tenacity.
            return await self._call(spec, visit, 1)
        except Exception as exc:
            if not retry.max_retries or not is_retryable(retry, exc):
                raise
            first = exc
        try:
            return await self._retries(spec, visit, retry, first)
        finally:
            del first

    async def _retries(
        self, spec: NodeSpec, visit: int, retry: RetryPolicy, first: BaseException
    ) -> NodeOutput:
        """Attempts 2.. of a node whose first attempt raised ``first`` (retryable)."""
        # tenacity's objects form cycles among themselves: the hooks handed to
        # them must not hold the run (and so its state), only what they use.
        record, step, name = self.recorder.record, self.steps, spec.name
        attempts = [1]

        def on_retry(failed: int, error: BaseException, delay: float) -> None:
            attempts[0] = failed + 1
            record(NodeRetried, step, name, failed, _describe_error(error), delay)

        async def attempt(number: int) -> NodeOutput:
            # Each attempt gets a fresh view of the unchanged state: a failed
            # attempt's writes were never merged, so nothing needs undoing.
            return await self._call(spec, visit, number)

        try:
            return await retry_after_failure(attempt, first, retry, self.sleep, on_retry)
        finally:
            self._attempts = attempts[0]  # read and reset by _complete / _handle_failure
            del first

    async def _call(self, spec: NodeSpec, visit: int, attempt: int) -> NodeOutput:
        adapter = spec.adapter
        view = StateView(self.state, spec.name, reads=spec.reads)
        context = None
        if adapter.wants_context:
            context = NodeContext(
                spec.name,
                self.steps,
                visit,
                attempt,
                self.run_id,
                self.graph.name,
                self.namespace,
                self.graph.settings.goal,
                self.recorder.emit,
                self,
                self.branch,
            )
        timeout = spec.timeout
        # A blocking function runs on a worker thread inside a branch (its siblings go
        # on) and under an executor (the worker's other runs go on).
        if timeout is None and not (
            spec.offload and (self.stop_at is not None or self.tasks is not None)
        ):
            raw = await adapter(view, context)
        else:
            raw = await self._call_bounded(spec, adapter(view, context), timeout)
        return read_output(raw, view, spec)

    async def _call_bounded(self, spec: NodeSpec, pending: Any, timeout: float | None) -> Any:
        """Await a node on a worker thread (a blocking function) and/or under its timeout."""
        if spec.offload and not self.driven_without_loop:
            pending = run_blocking(pending)  # a blocking function must not stall its siblings
        if timeout is None:
            return await pending
        try:
            async with asyncio.timeout(timeout):
                return await pending
        except TimeoutError as exc:
            raise NodeTimeout(
                f"node {spec.name!r} ran past its timeout of {timeout:g} s",
                node=spec.name,
                step=self.steps,
            ) from exc

    def previous_result(self, node: str) -> NodeResult | None:
        """This node's result from its previous visit in this run, if any."""
        history = self.state.history
        for index in range(len(history) - 1, self._history_start - 1, -1):
            name, result = history[index]
            if name == node and isinstance(result, NodeResult):
                return result
        return None

    def _handle_failure(self, spec: NodeSpec, visit: int, exc: Exception, started: float) -> bool:
        """Record a failure the run survives and return whether success edges apply; else raise."""
        name = spec.name
        routes = self.graph.routes[name]
        policy = spec.error_policy or self.graph.settings.error_policy
        if routes.failure:
            outcome: Any = "failure"
        elif policy is ErrorPolicy.SKIP:
            outcome = "skipped"
        else:
            error = self._node_error(spec, exc)
            try:
                if error is exc:
                    raise error  # an engine error keeps its own cause chain
                raise error from exc
            finally:
                # The traceback holds this frame, whose locals hold the error: a
                # cycle that would keep the failed run's state alive until the
                # cyclic collector ran.
                del error, exc
        error_text = _describe_error(exc)
        attempts = self._attempts
        self._attempts = 1
        self._record_error(
            {
                "node": name,
                "step": self.steps,
                "visit": visit,
                "error": str(exc),
                "type": type(exc).__name__,
                "attempts": attempts,
                "handled_by": "on_failure edge" if outcome == "failure" else "skip",
            }
        )
        self._degraded = True
        duration = (perf_counter() - started) * 1000
        usage = getattr(exc, "usage", None)  # what a model-calling node spent before failing
        if isinstance(usage, Usage):
            self.usage = self.usage + usage
        else:
            usage = None
        result = NodeResult(
            node=name,
            step=self.steps,
            visit=visit,
            outcome=outcome,
            error=error_text,
            attempts=attempts,
            duration_ms=duration,
            usage=usage,
        )
        self._history.append((name, result))
        self.recorder.record(
            NodeFinished, self.steps, name, visit, duration, outcome, attempts, error_text
        )
        return bool(outcome == "skipped")

    def _record_error(self, record: dict[str, Any]) -> None:
        self.state.errors.append(record)

    def _node_error(self, spec: NodeSpec, exc: Exception) -> GraphRunError:
        if isinstance(exc, GraphRunError):
            if exc.node is None:
                exc.node = spec.name
            if exc.step is None:
                exc.step = self.steps
            return exc
        return NodeError(
            f"node {spec.name!r} raised {_describe_error(exc)}",
            node=spec.name,
            step=self.steps,
            state=self.state,
        )

    # -------------------------------------------------------------- fan-out
    _after_fan_out: Any = None
    """Where the walk goes once a list fan-out has joined."""
    _branch_steps = 0
    """The highest step the last fan-out's branches reached."""

    async def _fan_out_from(self, source: str, branches: Branches) -> Stop | None:
        """Run a list fan-out (an edge to several nodes, a router's list or Scatter) and join.

        Sets ``_after_fan_out`` to the join point; returns a stop when a branch hit
        the step limit. A failure that is not absorbed raises BranchError.
        """
        plan = plan_fanout(
            self.graph, source, branches.targets, branches.options, self.branch, branches.how
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

    _group_hit_limit = False
    """Whether the last parallel group stopped because a member reached max_steps."""

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
        from selectgraph.runtime._branch_run import BranchRun

        durable = self.durable
        if durable is not None and (durable.pause_before or durable.pause_after):
            self._refuse_gated_branches(plan, durable.pause_before | durable.pause_after)
        options = plan.options
        mode = options.failure_mode
        step = self.steps
        labels = plan.labels
        recorder = self.recorder
        recorder.record(ParallelStarted, step, plan.source, tuple(labels), mode)
        started = perf_counter()
        runs: list[BranchRun | BranchTally] = []  # what each branch's walk counts into this run
        single = plan.join is None
        quick_nodes: list[str] = []
        # Set when fail_all gives up: branches on worker threads stop before their next node.
        abort = threading.Event()

        book = self.book if self._book_parent is None else self._ensure_book()
        finished_before = book.branches_done if book is not None else None
        # A durable run stores each finished branch's writes at once: after a crash
        # mid-fan-out, the branches that finished are not run again.
        keep_writes = self.durable is not None and self.durable.durability == "sync"

        async def run_branch(task: BranchTask) -> BranchWrites | NodeInterrupt:
            if finished_before:
                # Finished before the run paused at a sibling's interrupt: not run again.
                done = finished_before.pop(f"{step}:{task.ref.task_id}", None)
                if done is not None:
                    return done  # type: ignore[no-any-return]
            try:
                writes = await branch_body(task)
            except NodeInterrupt as signal:
                # Returned, not raised: a question must not cancel the siblings (fail_all).
                return signal
            if keep_writes:
                await self._keep_branch_writes(f"{step}:{task.ref.task_id}", writes)
            return writes

        tasks = self.tasks
        if tasks is not None:
            tasks.fan_out(self, plan)

        async def branch_body(task: BranchTask) -> BranchWrites:
            if tasks is not None:
                return await tasks.branch(self, task, lambda: walk_branch(task), runs)
            return await walk_branch(task)

        async def walk_branch(task: BranchTask) -> BranchWrites:
            quick = self._quick_call(task.node, plan.join)
            if quick is not None:
                quick_nodes.append(task.node)  # a visit, whether it succeeds or not
                writes, goto = await self._quick_branch(task, quick, step, plan.join)
                if single or goto is None or goto == plan.join or goto is END:
                    return writes
                # The node chose where its branch goes on: walk it from there.
                walker = BranchRun(self, task, plan.join, False, abort, writes)
                runs.append(walker)
                return await walker.run(goto)
            branch = BranchRun(self, task, plan.join, single, abort)
            runs.append(branch)
            return await branch.run(task.node)

        limit = options.max_concurrency or self.graph.settings.max_concurrency
        # Under an executor a branch that ran is a recorded task, and a replay must meet
        # the same ones: fail_all lets every branch finish, then fails the fan-out as
        # fail_all does (merging nothing), instead of cancelling siblings at a time that
        # a replay could not reproduce.
        scheduling: FailureMode = "wait_all" if tasks is not None and mode == "fail_all" else mode
        try:
            if self.driven_without_loop:
                outcomes = run_on_threads(
                    plan.tasks, run_branch, failure_mode=mode, limit=limit, on_abort=abort.set
                )
            else:
                outcomes = await run_concurrently(
                    plan.tasks, run_branch, failure_mode=scheduling, limit=limit, on_abort=abort.set
                )
        except BaseException:
            # Cancelled (a token, the caller): the fan-out still reports its end.
            self._fan_out_cut_off(plan, step, started)
            raise
        done: list[BranchWrites] = []
        failed: list[tuple[BranchTask, BaseException]] = []
        cancelled: list[str] = []
        lost = self._lost_run
        if lost is not None:
            self._lost_run = None
            raise lost
        asked = [o for o in outcomes if type(o) is NodeInterrupt]
        if asked and not any(
            isinstance(o, Exception) and not isinstance(o, BranchAborted) for o in outcomes
        ):
            # Some branch waits for an answer: keep what the finished ones wrote for the
            # resume, and pause the run (the join happens once every branch is done).
            kept = self._ensure_book().branches_done
            for task, outcome in zip(plan.tasks, outcomes, strict=True):
                if type(outcome) is BranchWrites:
                    kept[f"{step}:{task.ref.task_id}"] = outcome
            raise asked[0]
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
        reached = step + 1 if quick_nodes else step
        for node in quick_nodes:
            self._visits[node] = self._visits.get(node, 0) + 1
        for branch in runs:
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
        failed_any = bool(failed)
        for task, exc in failed:
            self._close_failed_node(task, exc, step)
        failure: BranchError | None = None
        try:
            if failed and (mode == "fail_all" or (mode == "continue_others" and not done)):
                if self.durable is not None:
                    # Kept with the failure's checkpoint: continuing the run after a
                    # fix runs only the branches that did not finish.
                    kept = self._ensure_book().branches_done
                    for task, outcome in zip(plan.tasks, outcomes, strict=True):
                        if type(outcome) is BranchWrites:
                            kept[f"{step}:{task.ref.task_id}"] = outcome
                done = []  # a failed fan-out merges nothing
                failure = self._branch_error(plan, *failed[0])
            else:
                self._merge_branches(plan, done)
                for task, exc in failed:
                    self._record_error(self._branch_failure_record(plan, task, exc))
        finally:
            if failed or cancelled:
                self._degraded = True
            recorder.record_delivering(
                ParallelFinished,
                step,
                plan.source,
                tuple(b.label for b in done),
                tuple(task.ref.label for task, _ in failed),
                tuple(cancelled),
                (perf_counter() - started) * 1000,
                state=self.state,
            )
            del failed  # its errors' tracebacks hold this frame
        if failure is not None:
            return False, failure
        if any(branch.hit_limit for branch in runs):
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

    _lost_run: CheckpointConflict | None = None
    """Set when storing a branch's writes found that another writer moved the run on."""

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
        from selectgraph.runtime._pending import encode_branch_writes

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
            _describe_error(cause),
        )

    def _quick_call(self, node: str, join: str | EndType | None) -> tuple[Any, bool] | None:
        """``(function, is_async)`` when a branch is just one plain function and its join.

        Such a branch needs no walk of its own (the usual Scatter or group member);
        anything with retries, a timeout, a context, declared reads, a failure
        route or more nodes after it takes the general path.
        """
        if self.tasks is not None:
            return None  # an executor's branch task is a walk, whatever its shape
        max_steps = self.graph.settings.max_steps
        if max_steps is not None and self.steps + 1 > max_steps:
            return None  # a walk reports the step limit properly
        cache = self.graph.quick_branches
        key = (node, join, self.driven_without_loop)
        if key in cache:
            return cache[key]  # type: ignore[no-any-return]
        found: tuple[Any, bool] | None = None
        spec = self.graph.nodes[node]
        routes = self.graph.routes[node]
        static = routes.static_success
        ends_there = join is None or (
            static is not None and (static.target == join or static.target is END)
        )
        plain = (
            spec.group is None
            and spec.max_visits is None
            and not routes.failure
            and (spec.error_policy or self.graph.settings.error_policy) is ErrorPolicy.ABORT
        )
        if ends_there and plain:
            if node in self.graph.direct_async:
                found = (self.graph.direct_async[node], True)
            elif node in self.graph.direct_calls and self.driven_without_loop:
                found = (self.graph.direct_calls[node], False)
        cache[key] = found
        return found

    async def _quick_branch(
        self,
        task: BranchTask,
        call: tuple[Any, bool],
        step: int,
        join: str | EndType | None,
    ) -> tuple[BranchWrites, str | EndType | None]:
        """A one-node branch of a plain function, run without a walk of its own.

        Returns what it wrote and where it asked to go (its goto(), if any).
        """
        from selectgraph.runtime._branch_run import light_state

        fn, is_async = call
        ref = task.ref
        name = task.node
        spec = self.graph.nodes[name]
        recorder = self.recorder
        base = recorder.base_for(ref)
        visit = self._visits.get(name, 0) + 1
        state = self.state if task.patch is None else light_state(self.state, task.patch)
        started = perf_counter()
        recorder.record_as(base, started, NodeStarted, step + 1, name, visit)
        view = StateView(state, name)
        try:
            raw = (await fn(view)) if is_async else fn(view)
            if type(raw) is dict and not view.touched and spec.writes is None:
                output = NodeOutput(raw)
            else:
                output = read_output(raw, view, spec)
                reducers = self.graph.schema.reducers
                if reducers and output.writes is not None:
                    relative_to(output, state.data, reducers)
        except Exception as exc:
            error = self._node_error(spec, exc)
            try:
                if error is exc:
                    raise
                raise error from exc
            finally:
                del error, exc  # the traceback holds this frame: no cycle through locals
        written = output.update
        writes = output.writes
        if writes is not None and writes.assignments:
            written = {**writes.assignments, **written}
        finished = perf_counter()
        duration = (finished - started) * 1000
        entry = (
            name,
            step + 1,
            visit,
            "success",
            written,
            written.get(LAST_OUTPUT),
            None,
            1,
            duration,
            output.usage,
            output.agent_result,
        )
        recorder.record_as(
            base, finished, NodeFinished, step + 1, name, visit, duration, "success", 1
        )
        goto = output.goto
        if join is not None and goto is None:
            recorder.record_as(base, finished, EdgeFired, step + 1, name, join, "static", "")
        elif goto is not None:
            recorder.record_as(base, finished, EdgeFired, step + 1, name, goto, "goto", "")
        if output.usage is not None:
            self.usage = self.usage + output.usage
        return BranchWrites(ref.index, ref.label, [(name, output)], [entry]), goto

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
        problem = str(exc) if isinstance(exc, GraphRunError) else _describe_error(exc)
        error = BranchError(
            f"branch {label!r} of {plan.source!r} failed: {problem}",
            branch=label,
            node=plan.source,
            step=self.steps,
            state=self.state,
        )
        error.__cause__ = exc
        return error

    def _branch_failure_record(
        self, plan: FanOutPlan, task: BranchTask, exc: BaseException
    ) -> dict[str, Any]:
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

    # ---------------------------------------------------------------- routing
    def _follow(self, source: str, resolved: Resolved) -> str | EndType | Branches:
        target, edge, directive, decision = resolved
        if directive is not None and directive.values:
            self._merge_directive(source, NodeOutput(directive.values))
        reason = ""
        if decision is not None:
            reason = decision.reasoning
            if decision.usage is not None:
                self.usage = self.usage + decision.usage
        kind, label = (edge.kind, edge.label) if edge is not None else ("static", "")
        if type(target) is Branches:
            self._fired(source, target, kind, label, reason)
        else:
            self.recorder.record(EdgeFired, self.steps, source, target, kind, label, reason)
        return target

    def _fired(
        self, source: str, branches: Branches, kind: str, label: str, reason: str = ""
    ) -> None:
        """One EdgeFired per node a fan-out starts branches at."""
        for node in branches.nodes():
            self.recorder.record(EdgeFired, self.steps, source, node, kind, label, reason)

    def _merge_directive(self, source: str, output: NodeOutput) -> None:
        self._merger.merge(self.state, output, source, self.steps)
        if self.written_keys is not None:
            self.written_keys.update(output.update)

    def _check_goto(self, spec: NodeSpec, goto: str | EndType) -> str | EndType:
        if goto is not END and goto not in self.graph.nodes:
            raise RoutingError(
                f"node {spec.name!r} returned goto({goto!r}), which is not a node of this graph; "
                f"nodes: {', '.join(sorted(self.graph.nodes))}",
                node=spec.name,
            )
        if spec.destinations is not None and goto not in spec.destinations:
            allowed = ", ".join(repr(d) for d in spec.destinations)
            raise RoutingError(
                f"node {spec.name!r} returned goto({goto!r}) but declares destinations=[{allowed}]",
                node=spec.name,
            )
        return goto

    # ------------------------------------------------------------- detection
    def _loop_stops_run(self, node: str, first: int) -> bool:
        """A loop was seen (``node`` had this state at step ``first``): apply on_loop."""
        self._loops += 1
        self.recorder.record(LoopDetectedEvent, self.steps, node, first)
        action = self.graph.settings.on_loop
        if action is LoopAction.WARN:
            return False
        self.steps -= 1  # the repeated node never ran
        if action is LoopAction.STOP:
            self._degraded = True
            return True
        raise LoopDetected(
            f"node {node!r} is about to run on exactly the state it had at step {first}; with "
            "deterministic nodes the run would repeat forever. Add a stop condition, or set "
            "on_loop=LoopAction.WARN if the node is not deterministic",
            node=node,
        )

    def _stalled(self, node: str, threshold: int) -> None:
        """One more step left the state unchanged; report a stall every ``threshold`` of them."""
        self._unchanged += 1
        if self._unchanged >= threshold:
            self._stalls += 1
            self.recorder.record(StallDetected, self.steps, node, self._unchanged)
            self._unchanged = 0

    # ------------------------------------------------------------- stopping
    def _stop_at_limit(self, next_node: str | EndType) -> GraphResult:
        limit = self.graph.settings.max_steps
        action = self.graph.settings.on_max_steps
        if action is MaxStepsAction.THROW:
            raise MaxStepsExceeded(
                f"run reached max_steps={limit} before END (next node would have been "
                f"{next_node!r}); raise max_steps or add a stop condition",
                node=str(next_node),
            )
        # RETURN_LAST and RETURN_WITH_FLAG both return the state as it is; a run
        # cut off before END is never reported as clean.
        self._max_steps_reached = True
        self._degraded = True
        return self._finish("max_steps")

    def _build_result(self, stop_reason: StopReason, quality: Any) -> GraphResult:
        return GraphResult(
            state=self.state,
            steps=self.steps,
            trace=self.recorder.trace,
            quality=quality,
            stop_reason=stop_reason,
            run_id=self.run_id,
            duration_ms=(perf_counter() - self._started) * 1000,
            stalls=self._stalls,
            loops_detected=self._loops,
            max_steps_reached=self._max_steps_reached,
            total_usage=self.usage,
            history_start=self._history_start,
            interrupts=self._interrupts,
            checkpoint_id=self._checkpoint_id,
            observer_errors=self.recorder.outermost.listener_errors,
        )

    def _finish(self, stop_reason: StopReason) -> GraphResult:
        self.state.current_node = None
        guard = self.graph.settings.output_guardrails
        if guard is not None and not self.namespace:
            try:
                guard_output(guard, self.state)
            except GuardrailBlocked as blocked:
                blocked.result = self._build_result(stop_reason, "failed")
                raise
        if self.graph.schema.model is not None:
            try:
                self.graph.schema.validate_exit(self.state.data, state=self.state)
            except StateValidationError as error:
                self._blame(error)
                raise
        result = self._build_result(stop_reason, "degraded" if self._degraded else "clean")
        self.recorder.record_delivering(
            RunFinished,
            self.steps,
            self.steps,
            result.duration_ms,
            result.quality,
            stop_reason,
            result=result,
        )
        return result

    def _blame(self, error: StateValidationError) -> None:
        """Name the node that last wrote a field the exit validation rejected.

        Validation runs once, at exit, so that a step never pays for it; the
        history already says which node wrote what.
        """
        fields = {path.split(".", 1)[0] for path in error.fields}
        raw = self._history
        for index in range(len(raw) - 1, self._history_start - 1, -1):
            entry = raw[index]
            if type(entry) is tuple and len(entry) != 2:
                node, step, written = entry[0], entry[1], entry[4]
            else:
                result = entry[1]
                if not isinstance(result, NodeResult) or not result.output:
                    continue
                node, step, written = result.node, result.step, result.output
            if not fields.isdisjoint(written):
                error.node, error.step = node, step
                error.args = (f"{error.args[0]}; last written by node {node!r} at step {step}",)
                return

    # ------------------------------------------------- durability and interrupts
    _interrupts: tuple[Interrupt, ...] = ()
    _checkpoint_id: str | None = None
    _resume_next: list[Any] = []  # noqa: RUF012 - replaced, never changed in place
    """Where a paused run continues (the checkpoint's ``next``)."""

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

    def _ensure_book(self) -> InterruptBook:
        if self._book_parent is not None:
            return self._book_parent._ensure_book()
        book = self.book
        if book is None:
            from selectgraph.runtime._durable import InterruptBook

            book = self.book = InterruptBook()
        return book

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
        answers = self._ensure_book().answers
        if interrupt_id in answers:
            return True, answers[interrupt_id]
        return False, None

    def take_live(self, task: str) -> tuple[Any, _View, Interrupt] | None:
        """The suspended generator of ``task``, if this process still has it."""
        return self._ensure_book().live.pop(task, None)

    def keep_live(self, task: str, generator: Any, view: _View, interrupt: Interrupt) -> None:
        """Keep ``task``'s suspended generator and record its question as pending."""
        book = self._ensure_book()
        book.live[task] = (generator, view, interrupt)
        book.pending[interrupt.id] = interrupt

    def task_done(self, task: str) -> None:
        """``task``'s generator returned: forget its answers and memoized steps."""
        self._ensure_book().clear_task(task)

    def memo_for(self, task: str) -> dict[str, Any]:
        """The results of ``task``'s ``context.once()`` steps."""
        return self._ensure_book().memo.setdefault(task, {})

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

    child_key: str | None = None
    """For a subgraph's run: the parent task it runs as (keys its paused state)."""

    def _unfinished(self, name: str, in_fan_out: bool, interrupt_id: str) -> list[Any]:
        """Where a run paused inside ``name`` continues; the unfinished visit is rolled back."""
        from selectgraph.runtime._durable import encode_next

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

    def _roll_back(self, name: str) -> None:
        """Uncount the visit of ``name`` in progress: it runs again, as the same step."""
        visit = self._visits.get(name, 1)
        self.steps -= 1
        if visit > 1:
            self._visits[name] = visit - 1
        else:
            self._visits.pop(name, None)

    def _pause_child(self, name: str, in_fan_out: bool) -> None:
        """A subgraph's run paused: keep it, so the resumed parent continues it, not restarts it."""
        self._resume_next = self._unfinished(name, in_fan_out, "")
        if self.child_key is not None:
            self._ensure_book().children[self.child_key] = self

    _resume_branches: Branches | None = None
    """The fan-out a branch paused in: an in-process resume runs it again without routing."""

    async def _interrupted(
        self, interrupt: Interrupt, name: str, branches: Branches | None
    ) -> GraphResult:
        """A generator node asked a question: checkpoint, and return a paused result."""
        from selectgraph.runtime._durable import keep_paused

        book = self._ensure_book()
        pending = tuple(book.pending.values()) or (interrupt,)
        # The node did not complete: its step and visit are counted again on resume.
        next_ = self._unfinished(name, branches is not None, interrupt.id)
        self._resume_branches = branches
        for item in pending:
            self.recorder.record(InterruptRaised, self.steps, item.node, item.id, item.prompt)
        self._interrupts = pending
        self._resume_next = next_
        durable = self.durable
        if durable is not None:
            records, extra, writes = self._interrupt_records(durable.serializer, pending)
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
        return result

    def _interrupt_records(
        self, serializer: Any, pending: tuple[Interrupt, ...]
    ) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, list[Any]]]:
        """A paused run's interrupts, metadata (memo, paused subgraphs) and pending writes.

        The interrupts are the pending ones plus the answered ones of nodes not done.
        """
        from selectgraph.runtime._book_codec import encode_book

        return encode_book(self._ensure_book(), serializer, pending)

    async def _stop_durably(self, stop: Stop) -> GraphResult:
        """End a run that has a checkpoint store: write its last checkpoint, then report."""
        durable = self.durable
        assert durable is not None
        if stop == "paused":
            if self._pause_next is not None:
                checkpoint = await durable.write(self, "pause", self._pause_next)
            else:
                assert durable.head is not None  # after_node wrote it
                checkpoint = durable.head
            await durable.flush(self)
            durable.close()
            self._checkpoint_id = checkpoint.checkpoint_id
            self.state.current_node = None
            result = self._build_result("paused", "degraded" if self._degraded else "clean")
            self.recorder.record_delivering(
                RunPaused,
                self.steps,
                self._pause_reason,
                tuple(n if isinstance(n, str) else n["after"] for n in checkpoint.next),
                self._checkpoint_id,
                result=result,
            )
            return result
        self.state.current_node = None
        if stop in _STOPPED_EARLY and isinstance(self._stopped_at, str):
            next_: list[Any] = [self._stopped_at]  # a later call may continue from there
        else:
            next_ = []
        trigger = _TRIGGERS.get(stop, stop)
        checkpoint = await durable.write(self, trigger, next_)
        await durable.flush(self)
        durable.close()
        self._checkpoint_id = checkpoint.checkpoint_id
        if stop == "max_steps":
            return self._stop_at_limit(self._stopped_at)
        return self._finish("end" if stop == "join" else stop)

    def _resume_point(self, name: str, in_fan_out: bool = False) -> list[Any]:
        """Where a run that stopped inside ``name`` continues, rolling back its unfinished visit."""
        from selectgraph.runtime._durable import encode_next

        durable = self.durable
        assert durable is not None
        completed = durable.completed
        if completed is not None and (
            completed[0] == self.steps or (in_fan_out and completed[1] == name)
        ):
            # The node finished; what came after it (routing, a fan-out) did not.
            step, node, ok, goto = completed
            self.steps = step
            return encode_next("after", node, ok=ok, goto=goto)
        if not name or name not in self.graph.nodes:
            return [self.graph.entry] if not self.steps else []
        self._roll_back(name)
        return [name]

    async def _save_failure(self, error: GraphRunError, name: str, in_fan_out: bool) -> None:
        """Checkpoint a failed run so it can be fixed and continued; never hides ``error``."""
        durable = self.durable
        assert durable is not None
        try:
            await durable.flush(self)
            checkpoint = await durable.write(
                self,
                "error",
                self._resume_point(name if in_fan_out else error.node or name, in_fan_out),
                extra={"error": str(error)},
            )
            await durable.flush(self)
            self._checkpoint_id = checkpoint.checkpoint_id
            if error.result is not None:
                error.result.checkpoint_id = checkpoint.checkpoint_id
        except Exception as failure:  # the run's own error matters more
            error.add_note(f"its checkpoint could not be saved: {_describe_error(failure)}")
        finally:
            durable.close()

    def _save_cancelled(self, name: str) -> None:
        """Checkpoint a cancelled run synchronously (no awaiting while cancelled)."""
        durable = self.durable
        assert durable is not None
        try:
            for future in durable.pending_writes():
                future.result()
            checkpoint = durable.make(self, "cancel", self._resume_point(name))
            durable.store.save(checkpoint, expected_version=checkpoint.version - 1)
            self._checkpoint_id = checkpoint.checkpoint_id
        except Exception:  # cancellation must go on; the last good checkpoint stands
            pass
        finally:
            durable.close()

    async def route_after(self, node: str, ok: bool, goto: Any) -> Any:
        """Where the run goes after ``node`` (its output already merged): for a resume."""
        spec = self.graph.nodes[node]
        if goto is not None:
            target = self._check_goto(spec, goto)
            self.recorder.record(EdgeFired, self.steps, node, target, "goto", "")
            return target
        routes = self.graph.routes[node]
        if routes.is_async:
            resolved = await aresolve_next(
                node, routes, ok, self.state, self.graph.nodes, self._decide
            )
        else:
            resolved = resolve_next(node, routes, ok, self.state, self.graph.nodes)
        return self._follow(node, resolved)

    def _attach(self, error: GraphRunError) -> None:
        if error.state is None:
            error.state = self.state
        if error.step is None:
            error.step = self.steps
        if error.result is None:
            stop: StopReason = "error"
            if isinstance(error, LoopDetected):
                stop = "loop"
            elif isinstance(error, MaxStepsExceeded):
                stop = "max_steps"
            error.result = self._build_result(stop, "failed")
        self.recorder.record_delivering(
            RunFailed,
            self.steps,
            _describe_error(error),
            error.category,
            error.node,
            exception=error,
        )
